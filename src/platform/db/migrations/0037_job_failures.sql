-- expand: jobs that fail for good are kept, marked failed, instead of retried for ever.
-- A job whose handler fails with an error that cannot change (PermanentJobError), or fails
-- MAILROOM_JOB_MAX_ATTEMPTS times (database outages aside), is given `failed_at` and a `run_at` of
-- 'infinity', so no claim and no due count sees it; `last_error` says why. `failed_runs` counts the runs
-- that ended in an error (NULL: none). `mailroom jobs list --failed` reads the partial index;
-- `mailroom jobs retry` makes a failed job due again.
ALTER TABLE jobs ADD COLUMN failed_at timestamptz;
ALTER TABLE jobs ADD COLUMN failed_runs integer;
CREATE INDEX jobs_failed_idx ON jobs (failed_at, id) WHERE failed_at IS NOT NULL;
