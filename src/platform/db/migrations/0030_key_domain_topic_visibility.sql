-- expand: A sending_access key may be limited to one of its organization's domains (Resend's domain_id): it
-- then sends only with a From address at that domain. No foreign key on purpose: when the domain is
-- deleted the key keeps the id and can send nothing, rather than losing its limit (ON DELETE SET NULL
-- would let it send from every domain) or vanishing with the domain.
ALTER TABLE api_keys ADD COLUMN domain_id uuid;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_domain_needs_sending_access
  CHECK (domain_id IS NULL OR permission = 'sending_access');

-- Who sees a topic on the preference page an unsubscribe link opens (Resend's visibility): public topics
-- are listed to every contact, private ones only to contacts subscribed to them.
ALTER TABLE topics ADD COLUMN visibility text NOT NULL DEFAULT 'private'
  CHECK (visibility IN ('public', 'private'));
