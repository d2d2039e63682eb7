-- expand: MTA-STS policies of recipient domains (RFC 8461), kept for their max_age so that a restart does not
-- forget them: a policy stands while its TXT record's id is unchanged, and while the record or the
-- policy's fetch fails (src/delivery/transports/mta-sts.ts).
CREATE TABLE mta_sts_policies (
  domain text PRIMARY KEY,
  policy_id text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('enforce', 'testing', 'none')),
  mx text[] NOT NULL,
  max_age integer NOT NULL,
  fetched_at timestamptz NOT NULL
);
