-- One name receives for one organization: the listener finds the organization by the recipient's
-- domain. The API refuses a second one (409) before writing; this index settles two organizations
-- turning receiving on for one name at the same moment, and serves the listener's look-up at RCPT TO.
CREATE UNIQUE INDEX domains_receiving_name_idx ON domains (name) WHERE receiving;
