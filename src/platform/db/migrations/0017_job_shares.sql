-- expand: due jobs are shared out between the organizations they work for: a claim takes the oldest due jobs
-- of each organization in turn (src/queue/worker.ts), so one organization's backlog of 50,000 messages
-- does not queue another's password reset behind it. `share_key` is the organization; jobs that work
-- for no one in particular share the empty key. The index lists the keys (a skip scan) and each key's
-- due jobs oldest first.
ALTER TABLE jobs ADD COLUMN share_key text NOT NULL DEFAULT '';
-- Jobs queued before this migration take their message's organization, found by the emails primary
-- key (a payload that does not hold a uuid keeps the empty key).
UPDATE jobs SET share_key = emails.organization_id::text
  FROM emails
 WHERE jobs.queue = 'deliver-email'
   AND emails.id = CASE WHEN jobs.payload ->> 'email_id' ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$'
                        THEN (jobs.payload ->> 'email_id')::uuid END;
CREATE INDEX jobs_share_due_idx ON jobs (queue, share_key, run_at, id);
