-- expand: engagement and audience: contacts and their per-topic choices, tracking switches per organization,
-- the server's signing secret (tracking, unsubscribe and return-path tokens), and one engagement entry
-- per recipient where repeats carry no news (opens, clicks per link, bounces, complaints).

ALTER TABLE topics ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

CREATE TABLE contacts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  email text NOT NULL,                          -- the bare address, domain in ASCII; matched without case
  first_name text,
  last_name text,
  unsubscribed boolean NOT NULL DEFAULT false,  -- out of every topic send
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX contacts_email_key ON contacts (organization_id, lower(email));
CREATE INDEX contacts_organization_idx ON contacts (organization_id, created_at, id);

-- A contact's own choice for a topic; without a row, the topic's default_subscription applies.
CREATE TABLE contact_topics (
  contact_id uuid NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
  topic_id uuid NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
  subscription text NOT NULL CHECK (subscription IN ('opt_in', 'opt_out')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (contact_id, topic_id)
);
CREATE INDEX contact_topics_topic_idx ON contact_topics (topic_id);

ALTER TABLE organizations
  ADD COLUMN open_tracking boolean NOT NULL DEFAULT true,
  ADD COLUMN click_tracking boolean NOT NULL DEFAULT true;

-- Made by the first process that needs it and shared by all: keys for links Mailroom must recognise
-- as its own. Losing it only invalidates links already sent.
CREATE TABLE signing_secrets (
  name text PRIMARY KEY,
  secret bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Opens, clicks (per link), bounces and complaints are recorded once per recipient: a pixel fetched
-- again or a report delivered twice inserts nothing (ON CONFLICT DO NOTHING) and emits nothing.
CREATE UNIQUE INDEX email_events_once_key ON email_events (email_id, recipient, type, (coalesce(data #>> '{click,link}', '')))
  WHERE type IN ('opened', 'clicked', 'bounced', 'complained');

CREATE INDEX suppressions_list_idx ON suppressions (organization_id, created_at, address);
