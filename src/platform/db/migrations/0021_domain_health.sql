-- The deliverability doctor's last findings per sending domain (src/doctor/doctor.ts): each check's
-- status, what it found and the fix to make. The daily round picks the domains checked longest ago.
CREATE TABLE domain_health (
  domain_id uuid PRIMARY KEY REFERENCES domains (id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('pass', 'warn', 'fail')),
  findings jsonb NOT NULL,
  checked_at timestamptz NOT NULL
);
