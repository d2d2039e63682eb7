-- expand: resend's per-domain options `tls` and `region` (src/domains/domain-options.ts), stored as given.
-- tls 'enforced': the domain's messages are never sent in the clear (no STARTTLS, or a failed
-- handshake, defers the copy instead). region: kept and answered back only; Mailroom sends from the
-- servers it runs on whatever it says. Existing domains keep what they had: opportunistic TLS, and
-- Resend's default region, us-east-1, which is what they have been reported as.
ALTER TABLE domains
  ADD COLUMN tls text NOT NULL DEFAULT 'opportunistic' CHECK (tls IN ('opportunistic', 'enforced')),
  ADD COLUMN region text NOT NULL DEFAULT 'us-east-1'
    CHECK (region IN ('us-east-1', 'eu-west-1', 'sa-east-1', 'ap-northeast-1'));
