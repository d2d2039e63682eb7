-- expand: processes cache inbound routes in memory (src/receiving/routes.ts: the answer at RCPT TO and
-- the routes a received message takes), as they cache API keys and sending domains (migration 0013).
-- Every change to a route notifies the channel they listen on, from the commit that makes it, whatever
-- code makes it: each process then forgets what it cached. Inserts notify too: a new route must apply
-- to the next recipient, and an organization's routes are cached whole, none included.
CREATE TRIGGER inbound_routes_lookups_changed AFTER INSERT OR UPDATE OR DELETE ON inbound_routes
  FOR EACH STATEMENT EXECUTE FUNCTION notify_lookups_changed();
