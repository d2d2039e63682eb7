-- expand: webhooks: endpoints, one delivery per (event, endpoint), and every attempt of each delivery.

CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  url text NOT NULL,
  events jsonb NOT NULL DEFAULT '[]',           -- event types; [] means every type, including later ones
  signing_secret text NOT NULL,
  previous_secret text,                         -- during a rotation, also signed with until …
  previous_secret_expires_at timestamptz,
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_organization_idx ON webhook_endpoints (organization_id) WHERE enabled;

CREATE TABLE webhook_deliveries (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id uuid NOT NULL,                       -- the body's id is evt_<event_id>
  event_type text NOT NULL,
  payload jsonb NOT NULL,                       -- the body: { id, type, created_at, data }
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC);

CREATE TABLE webhook_attempts (
  delivery_id uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  request_id uuid NOT NULL,                     -- x-service-delivery-id of this attempt
  status_code integer,
  duration_ms integer NOT NULL,
  response text,                                -- first 1 KiB of the answer
  error text,                                   -- timeout, connection_failed, forbidden_address …
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (delivery_id, attempt)
);

-- Jobs of one group (a webhook endpoint) run at most a few at a time, so one slow endpoint cannot take
-- every worker slot.
ALTER TABLE jobs ADD COLUMN group_key text;
CREATE INDEX jobs_group_idx ON jobs (group_key) WHERE group_key IS NOT NULL;
