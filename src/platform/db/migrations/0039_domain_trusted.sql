-- expand: domains.trusted, a domain verified on the operator's word (domain verify --trust) without DNS checks.
-- It is cleared when a check finds the domain's DKIM record: the domain is then verified by DNS.
ALTER TABLE domains ADD COLUMN trusted boolean NOT NULL DEFAULT false;
-- Domains verified before this column: a check that finds DKIM always records its time, so a verified
-- domain never checked was verified on the operator's word.
UPDATE domains SET trusted = true WHERE status = 'verified' AND last_checked_at IS NULL;
