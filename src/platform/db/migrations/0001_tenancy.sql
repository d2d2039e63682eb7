-- expand: organizations and the principals that act for them: users with dashboard sessions, and API keys.
-- Tokens are never stored: only the SHA-256 of each, as hex, looked up through a unique index.

CREATE TABLE organizations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  monthly_quota integer NOT NULL CHECK (monthly_quota >= 0),   -- recipients per calendar month (UTC)
  rate_limit integer NOT NULL CHECK (rate_limit > 0),          -- messages per second
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  email text NOT NULL,
  password_hash text,                                          -- argon2id, PHC string; NULL: no password login
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
CREATE INDEX users_organization_idx ON users (organization_id);

CREATE TABLE sessions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  token_hash text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_user_idx ON sessions (user_id);

CREATE TABLE api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  permission text NOT NULL CHECK (permission IN ('full_access', 'sending_access')),
  token_hash text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX api_keys_organization_idx ON api_keys (organization_id, created_at);

-- Sending domains. Each has its own DKIM key pair; the private key never leaves the database.
CREATE TABLE domains (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified')),
  dkim_selector text NOT NULL,
  dkim_private_key text NOT NULL,                              -- PKCS#8 PEM
  dkim_public_key text NOT NULL,                               -- SPKI, base64 (the p= of the DKIM record)
  record_status jsonb NOT NULL DEFAULT '{}',                   -- record name -> result of the last check
  verified_at timestamptz,
  last_checked_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (organization_id, name)
);
-- A domain may be pending in several organizations, but verified (allowed to send) in one only.
CREATE UNIQUE INDEX domains_verified_name_key ON domains (name) WHERE status = 'verified';
