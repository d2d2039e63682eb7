-- expand: GET /emails lists an organization's messages newest first, a page at a time by keyset (created_at, id):
-- a page costs one index range scan, however many messages are stored.
DROP INDEX emails_organization_idx;
CREATE INDEX emails_list_idx ON emails (organization_id, created_at DESC, id DESC);

-- Filtering the list by recipient starts from the recipient's rows.
CREATE INDEX email_recipients_address_idx ON email_recipients (lower(address));

-- Attachments are read one by one (GET /emails/:id/attachments/:attachment_id) and downloaded by id.
ALTER TABLE email_attachments ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX email_attachments_id_key ON email_attachments (id);
