-- expand: contact properties and segments (Resend's /contact-properties, /segments and the legacy /audiences).
-- A property is a key an organization defines once, with a type (string or number) and an optional
-- fallback; a contact's values live in contacts.properties, an object of key to JSON string or number.
-- A segment is a named group of contacts with static membership: a contact is in it because it was
-- added. An audience is a segment under its older name (same rows, same ids).

CREATE TABLE contact_properties (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL,                            -- fixed once created, as is type
  type text NOT NULL CHECK (type IN ('string', 'number')),
  fallback_value jsonb,                         -- a JSON value of `type`, or NULL for none
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- Keys are unique without regard to case, so that `Company` and `company` never both exist.
CREATE UNIQUE INDEX contact_properties_key ON contact_properties (organization_id, lower(key));
CREATE INDEX contact_properties_organization_idx ON contact_properties (organization_id, created_at, id);

ALTER TABLE contacts ADD COLUMN properties jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE TABLE segments (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX segments_organization_idx ON segments (organization_id, created_at, id);

-- Deleting a segment or a contact deletes its memberships, never the other side. Both sides belong to
-- the same organization (checked by the writers, which join on it).
CREATE TABLE contact_segments (
  contact_id uuid NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
  segment_id uuid NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (contact_id, segment_id)
);
CREATE INDEX contact_segments_segment_idx ON contact_segments (segment_id, contact_id);
