-- expand: accepting email: templates and topics it may name, the messages with their recipients and
-- attachments, the timeline, the job queue that delivery reads, and the counters behind quota, rate
-- limit and idempotency.

CREATE TABLE templates (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  subject text,
  html text,
  text text,
  variables jsonb NOT NULL DEFAULT '[]',   -- [{ "key", "type": "string"|"number", "fallback_value"? }]
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX templates_organization_idx ON templates (organization_id, created_at);

-- Topics and subscriptions are managed by the audience API; sending only checks that a topic exists.
CREATE TABLE topics (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  description text,
  default_subscription text NOT NULL DEFAULT 'opt_in' CHECK (default_subscription IN ('opt_in', 'opt_out')),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX topics_organization_idx ON topics (organization_id);

CREATE TABLE emails (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  domain_id uuid REFERENCES domains (id) ON DELETE SET NULL,
  "from" text NOT NULL,                    -- as sent: "Name <address>" or an address
  "to" jsonb NOT NULL,                     -- arrays of addresses, as given (normalised)
  cc jsonb NOT NULL DEFAULT '[]',
  bcc jsonb NOT NULL DEFAULT '[]',
  reply_to jsonb NOT NULL DEFAULT '[]',
  subject text NOT NULL,
  html text,
  text text,
  tags jsonb,
  headers jsonb,
  topic_id uuid,
  template jsonb,                          -- { id, variables } when rendered from a template
  message_id text NOT NULL,                -- the RFC 5322 Message-ID the message will carry
  status text NOT NULL CHECK (status IN ('queued', 'scheduled', 'sending', 'sent', 'canceled', 'failed')),
  scheduled_at timestamptz,
  recipient_count integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX emails_organization_idx ON emails (organization_id, created_at DESC);

CREATE TABLE email_recipients (
  email_id uuid NOT NULL REFERENCES emails (id) ON DELETE CASCADE,
  address text NOT NULL,                   -- the bare address, domain in ASCII
  kind text NOT NULL CHECK (kind IN ('to', 'cc', 'bcc')),
  PRIMARY KEY (email_id, address)
);

CREATE TABLE email_attachments (
  email_id uuid NOT NULL REFERENCES emails (id) ON DELETE CASCADE,
  position integer NOT NULL,
  filename text NOT NULL,
  content_type text NOT NULL,
  content_id text,
  content bytea NOT NULL,
  PRIMARY KEY (email_id, position)
);

-- The timeline. The id is the event's: a webhook for the same happening carries evt_<id>.
CREATE TABLE email_events (
  id uuid PRIMARY KEY,
  email_id uuid NOT NULL REFERENCES emails (id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  type text NOT NULL,                      -- accepted, delivered, opened, clicked, bounced, failed, complained, canceled …
  recipient text,
  data jsonb,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX email_events_email_idx ON email_events (email_id, created_at, id);

-- Background work, claimed with FOR UPDATE SKIP LOCKED. A job whose lease expires returns to the queue.
CREATE TABLE jobs (
  id bigserial PRIMARY KEY,
  queue text NOT NULL,                     -- e.g. 'deliver-email'
  payload jsonb NOT NULL,
  run_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0,
  locked_until timestamptz,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_ready_idx ON jobs (queue, run_at);

-- Recipients charged per organization and calendar month (UTC), split over a few rows (shards) so that
-- concurrent sends of one organization lock different rows; the month's usage is their sum.
CREATE TABLE monthly_usage (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  month date NOT NULL,
  shard smallint NOT NULL,
  recipients integer NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, month, shard)
);

-- One token bucket per organization, counted in messages, shared by every API process. last_granted is
-- what the latest take granted (a single upsert both refills and takes).
CREATE TABLE rate_limit_buckets (
  organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
  tokens double precision NOT NULL,
  last_granted integer NOT NULL DEFAULT 0,
  refilled_at timestamptz NOT NULL
);

-- Idempotency-Key: the first request's fingerprint, then its response. An entry without a response is
-- in progress until locked_until; after that a retry may take it over (its first holder died).
CREATE TABLE idempotency_keys (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL,
  fingerprint text NOT NULL,
  status_code integer,
  response jsonb,
  locked_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
