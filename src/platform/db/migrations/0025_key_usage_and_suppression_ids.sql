-- expand: when each API key was last used (GET /api-keys `last_used_at`). A table of its own, not a column of
-- api_keys: every change to api_keys makes every process forget its cached keys (0013), and a key in
-- use is stamped about once a minute, which must not empty those caches each time.
CREATE TABLE api_key_usage (
  api_key_id uuid PRIMARY KEY REFERENCES api_keys (id) ON DELETE CASCADE,
  last_used_at timestamptz NOT NULL
);

-- Suppressions get a stable id (Resend's shape: read and removed by id or by address), and the
-- message whose bounce or complaint listed the address, when one did.
ALTER TABLE suppressions ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE suppressions ADD COLUMN source_email_id uuid;
CREATE UNIQUE INDEX suppressions_id_idx ON suppressions (id);
