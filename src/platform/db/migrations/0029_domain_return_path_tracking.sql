-- expand: resend's per-domain options `custom_return_path` and `tracking_subdomain` (src/domains/domain-options.ts):
-- one DNS label each, under the domain's own name. custom_return_path (set when the domain is added, never
-- changed): its copies leave with the VERP return path at <label>.<domain> instead of the server's
-- MAILROOM_RETURN_PATH_DOMAIN. tracking_subdomain (set and changed at will): its open pixel and tracked
-- links point at <label>.<domain> instead of MAILROOM_PUBLIC_URL's host. NULL, as every existing domain
-- has: the server-wide settings.
ALTER TABLE domains
  ADD COLUMN custom_return_path text,
  ADD COLUMN tracking_subdomain text;
