-- expand: processes cache API keys and sending domains in memory (src/platform/db/lookup-cache.ts). Every change
-- to those rows notifies the channel they listen on, from the commit that makes it, whatever code (or
-- person at a psql prompt) makes it: each process then forgets what it cached. Inserts need no notice:
-- only rows that were found are cached.
CREATE FUNCTION notify_lookups_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('mailroom_lookups', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_lookups_changed AFTER UPDATE OR DELETE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION notify_lookups_changed();
CREATE TRIGGER domains_lookups_changed AFTER UPDATE OR DELETE ON domains
  FOR EACH STATEMENT EXECUTE FUNCTION notify_lookups_changed();
