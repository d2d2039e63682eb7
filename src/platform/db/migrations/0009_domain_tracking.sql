-- expand: open and click tracking switched per domain. NULL follows the organization's switch; true or false
-- overrides it for messages sent from the domain. The switch in force is
-- coalesce(domains.<switch>, organizations.<switch>), both when a message is sent and when its open or
-- click arrives.

ALTER TABLE domains
  ADD COLUMN open_tracking boolean,
  ADD COLUMN click_tracking boolean;
