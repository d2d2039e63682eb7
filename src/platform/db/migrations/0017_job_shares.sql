-- Due jobs are shared out between the organizations they work for: a claim takes the oldest due jobs
-- of each organization in turn (src/queue/worker.ts), so one organization's backlog of 50,000 messages
-- does not queue another's password reset behind it. `share_key` is the organization; jobs that work
-- for no one in particular share the empty key. The index lists the keys (a skip scan) and each key's
-- due jobs oldest first.
ALTER TABLE jobs ADD COLUMN share_key text NOT NULL DEFAULT '';
UPDATE jobs SET share_key = emails.organization_id::text
  FROM emails
 WHERE jobs.queue = 'deliver-email' AND emails.id::text = jobs.payload ->> 'email_id';
CREATE INDEX jobs_share_due_idx ON jobs (queue, share_key, run_at, id);
