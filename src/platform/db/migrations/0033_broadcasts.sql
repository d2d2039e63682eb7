-- expand: broadcasts (Resend's /broadcasts): one message sent to the contacts of a segment, each contact getting
-- exactly one copy. Sending a broadcast snapshots its audience into broadcast_recipients, one row per
-- contact (unique on broadcast and contact), and a fan-out job turns pending rows into ordinary emails
-- (emails.broadcast_id) in batches claimed under SKIP LOCKED: a row becomes `queued` in the same
-- transaction that creates its email, so a crash at any moment leaves each contact either with its one
-- email or still pending, never both and never neither.

-- A segment's optional filter on contact fields, properties and topics (docs/audience.md has the
-- grammar), evaluated when a broadcast to it is sent.
ALTER TABLE segments ADD COLUMN filter jsonb;

CREATE TABLE broadcasts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text,
  -- A deleted segment or topic leaves the broadcast without one (a draft must name a new one to send).
  segment_id uuid REFERENCES segments (id) ON DELETE SET NULL,
  topic_id uuid REFERENCES topics (id) ON DELETE SET NULL,
  "from" text,
  subject text,
  reply_to jsonb,                               -- an array of addresses, or NULL
  preview_text text,
  html text,
  text text,
  status text NOT NULL DEFAULT 'draft'
    CHECK (status IN ('draft', 'scheduled', 'queued', 'paused', 'sent', 'canceled', 'failed')),
  pause_reason text,                            -- why it is paused (an operator's words or the automatic check's)
  failure_reason text,                          -- why it failed (status failed)
  scheduled_at timestamptz,                     -- when a scheduled broadcast is sent
  sent_at timestamptz,                          -- when sending began (the snapshot)
  completed_at timestamptz,                     -- when every recipient had its copy queued (status sent)
  -- The snapshot's counts: contacts of the audience, and those left out, by reason.
  audience_count int NOT NULL DEFAULT 0,
  skipped_unsubscribed int NOT NULL DEFAULT 0,  -- unsubscribed from everything (or from all broadcasts)
  skipped_topic int NOT NULL DEFAULT 0,         -- opted out of the broadcast's topic
  skipped_suppressed int NOT NULL DEFAULT 0,    -- on the organization's suppression list
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX broadcasts_organization_idx ON broadcasts (organization_id, created_at, id);

CREATE TABLE broadcast_recipients (
  broadcast_id uuid NOT NULL REFERENCES broadcasts (id) ON DELETE CASCADE,
  contact_id uuid NOT NULL,                     -- no foreign key: the row outlives a deleted contact
  email text NOT NULL,                          -- the contact's address when the audience was taken
  status text NOT NULL CHECK (status IN ('pending', 'queued', 'skipped', 'canceled')),
  skip_reason text CHECK (skip_reason IN ('unsubscribed', 'topic', 'suppressed')),
  email_id uuid,                                -- the contact's copy, once queued
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (broadcast_id, contact_id),
  CHECK ((status = 'skipped') = (skip_reason IS NOT NULL)),
  CHECK ((status = 'queued') = (email_id IS NOT NULL))
);
-- What the fan-out claims: a broadcast's pending rows, in contact order.
CREATE INDEX broadcast_recipients_pending_idx ON broadcast_recipients (broadcast_id, contact_id)
  WHERE status = 'pending';
CREATE INDEX broadcast_recipients_email_idx ON broadcast_recipients (email_id) WHERE email_id IS NOT NULL;

-- A copy of a broadcast is an email like any other, marked with its broadcast.
ALTER TABLE emails ADD COLUMN broadcast_id uuid REFERENCES broadcasts (id) ON DELETE SET NULL;
CREATE INDEX emails_broadcast_idx ON emails (broadcast_id, created_at) WHERE broadcast_id IS NOT NULL;
