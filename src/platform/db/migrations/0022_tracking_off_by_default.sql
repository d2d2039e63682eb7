-- expand: new organizations start with open and click tracking off: a tracking pixel and rewritten links are
-- a choice an organization makes (Resend's domains start with both off too), not a default it must
-- find and undo. Existing organizations keep the switches they have; only the default changes.

ALTER TABLE organizations
  ALTER COLUMN open_tracking SET DEFAULT false,
  ALTER COLUMN click_tracking SET DEFAULT false;
