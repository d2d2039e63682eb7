-- expand: A worker that finishes a job of a group (a webhook endpoint) hands its slot to the group's oldest due
-- job in the same statement (src/queue/worker.ts): this index finds that job without sorting the
-- group's backlog. It replaces the index on group_key alone.
CREATE INDEX jobs_group_due_idx ON jobs (group_key, run_at, id) WHERE group_key IS NOT NULL;
DROP INDEX jobs_group_idx;
