-- expand: the API request log (GET /logs): one row per request made with an API key, written in batches from
-- each API process's memory (src/request-log/). Bodies are kept redacted and capped. Rows go with the
-- organization; a revoked key keeps its rows (keys are never deleted), a deleted one leaves them keyless.
CREATE TABLE request_logs (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  api_key_id uuid REFERENCES api_keys (id) ON DELETE SET NULL,
  method text NOT NULL,
  endpoint text NOT NULL,
  response_status integer NOT NULL,
  duration_ms integer NOT NULL,
  user_agent text,
  -- json, not jsonb: kept as written, keys in the order the client sent them; nothing queries inside.
  request_body json,
  response_body json,
  created_at timestamptz NOT NULL
);

-- GET /logs pages: an organization's entries newest first, by keyset on (created_at, id).
CREATE INDEX request_logs_list_idx ON request_logs (organization_id, created_at, id);
-- Retention takes the oldest entries of every organization.
CREATE INDEX request_logs_created_idx ON request_logs (created_at);
