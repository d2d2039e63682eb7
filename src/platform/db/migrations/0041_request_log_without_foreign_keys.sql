-- expand: the request log's foreign keys become triggers on the deleting side: its rows keep the same fate when an organization or an API key is deleted, and writing a row no longer checks either.
-- Every request of an API key writes a row here. Each foreign key cost every row a lookup of its parent
-- row with a share lock on it (all of an organization's requests lock the same organization row, from
-- two writers: the accept path and this log), about a third of the log's cost to the database. The
-- deletions they did are done here by statement triggers instead, once per deleting statement.
-- The log's writer adds only entries whose organization exists (request-logs.ts); an entry written
-- while its organization is being deleted may outlive it until the log's retention removes it.
ALTER TABLE request_logs
  DROP CONSTRAINT request_logs_organization_id_fkey,
  DROP CONSTRAINT request_logs_api_key_id_fkey;

-- Was ON DELETE CASCADE: an organization's log goes with it (request_logs_list_idx leads with organization_id).
CREATE FUNCTION request_logs_of_deleted_organizations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM request_logs l USING deleted d WHERE l.organization_id = d.id;
  RETURN NULL;
END $$;
CREATE TRIGGER organizations_delete_request_logs AFTER DELETE ON organizations
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION request_logs_of_deleted_organizations();

-- Was ON DELETE SET NULL: an entry of a deleted key stays, without its key.
CREATE FUNCTION request_logs_of_deleted_api_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE request_logs l SET api_key_id = NULL FROM deleted d WHERE l.api_key_id = d.id;
  RETURN NULL;
END $$;
CREATE TRIGGER api_keys_delete_request_logs AFTER DELETE ON api_keys
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION request_logs_of_deleted_api_keys();
