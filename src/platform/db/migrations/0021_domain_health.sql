-- expand: the deliverability doctor's last findings per sending domain (src/doctor/doctor.ts): each check's
-- status, what it found and the fix to make; null until the first check. The daily round claims a
-- domain (claimed_at) before checking it, so that two processes never check the same one, and picks
-- the domains claimed longest ago.
CREATE TABLE domain_health (
  domain_id uuid PRIMARY KEY REFERENCES domains (id) ON DELETE CASCADE,
  status text CHECK (status IN ('pass', 'warn', 'fail')),
  findings jsonb,
  checked_at timestamptz,
  claimed_at timestamptz
);
