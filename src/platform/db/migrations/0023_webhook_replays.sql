-- expand: webhook deliveries: which delivery a replay sends again (so "replay all failed since" passes over a
-- failed delivery already replayed, and a second click sends nothing twice), why a delivery failed
-- without an attempt (its endpoint was disabled while it waited), and whether it is a test event.
-- No foreign key on replay_of: the delivery replayed may be pruned before its replay.
ALTER TABLE webhook_deliveries ADD COLUMN replay_of uuid;
ALTER TABLE webhook_deliveries ADD COLUMN failure text;
ALTER TABLE webhook_deliveries ADD COLUMN test boolean NOT NULL DEFAULT false;
CREATE INDEX webhook_deliveries_replay_of_idx ON webhook_deliveries (replay_of) WHERE replay_of IS NOT NULL;
