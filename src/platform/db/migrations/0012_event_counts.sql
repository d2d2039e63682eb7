-- expand: the dashboard's overview counts outcomes per hour (GET /overview: the last 24 hours and 30 days).
-- Counting the timeline itself would read every entry of the period, a million rows for a busy month,
-- so each counted entry also adds one to its hour's row here, in the statement that records it (a
-- repeat that the timeline drops is not counted). An hour of one kind is split over a few rows
-- (shards) so that concurrent deliveries of one organization lock different rows; its count is their sum.
-- Retention deletes timeline entries, not these counts: the overview says what happened.
CREATE TABLE email_event_counts (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  hour timestamptz NOT NULL,               -- the start of the UTC hour
  type text NOT NULL,                      -- delivered, bounced, complained, failed, opened, clicked
  shard smallint NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (organization_id, hour, type, shard)
);

-- What the timeline holds already.
INSERT INTO email_event_counts (organization_id, hour, type, shard, count)
SELECT organization_id, date_trunc('hour', created_at, 'UTC'), type, 0, count(*)
  FROM email_events
 WHERE type IN ('delivered', 'bounced', 'complained', 'failed', 'opened', 'clicked')
 GROUP BY 1, 2, 3;
