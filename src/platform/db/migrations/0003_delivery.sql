-- expand: delivery: each recipient's own progress, the organization's suppression list, and finding the job of
-- a message (cancel and reschedule).

ALTER TABLE email_recipients
  ADD COLUMN status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'delivered', 'bounced', 'failed')),
  ADD COLUMN attempts integer NOT NULL DEFAULT 0,
  ADD COLUMN failure_reason text,              -- failed: 'suppressed', 'retries_exhausted' …
  ADD COLUMN last_response text,               -- the last SMTP answer or transport error
  ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

ALTER TABLE emails ADD COLUMN sent_at timestamptz;   -- when it was first handed to a transport

-- Addresses an organization does not send to: hard bounces and complaints add themselves.
CREATE TABLE suppressions (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  address text NOT NULL,                       -- lower-cased
  reason text NOT NULL CHECK (reason IN ('hard_bounce', 'complaint', 'manual')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, address)
);

CREATE INDEX jobs_email_idx ON jobs ((payload ->> 'email_id'));

-- Each claim of a job gets a new lease id: only the holder of the current lease may finish or retry it,
-- so a worker whose lease ran out (and whose job another worker took) cannot clobber the newer claim.
ALTER TABLE jobs ADD COLUMN lease_id uuid;
