-- expand: the accept path's intake. Under load a send is committed as one row here (its messages as the
-- rows they will be stored as), with its idempotent result and its quota charge; a worker then stores
-- each row's messages, recipients, timeline entries and delivery jobs and deletes the row in one
-- transaction. A request for an organization's data first stores that organization's rows
-- (emails/intake.ts), so what was accepted is readable at once.
-- No foreign key: writing a row checks nothing (every send of an organization would otherwise lock its
-- organization row). An organization's rows go with it (the trigger below), and a row whose organization
-- is gone when it is stored stores nothing.
CREATE TABLE email_intake (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  organization_id uuid NOT NULL,
  accepted_at timestamptz NOT NULL DEFAULT now(),
  -- { "messages": [...], "entries": [...], "attachments": [...] } (emails/store-messages.ts)
  rows jsonb NOT NULL,
  -- A row the database refused to store is kept, set aside with the reason, for an operator: no worker
  -- or read tries it again until failed_at is cleared.
  failed_at timestamptz,
  failure text
);
CREATE INDEX email_intake_organization_idx ON email_intake (organization_id, id);

CREATE FUNCTION email_intake_of_deleted_organizations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM email_intake i USING deleted d WHERE i.organization_id = d.id;
  RETURN NULL;
END $$;
CREATE TRIGGER organizations_delete_email_intake AFTER DELETE ON organizations
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION email_intake_of_deleted_organizations();
