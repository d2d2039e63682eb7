-- expand: the hourly outcome counts (email_event_counts) no longer count Resend's test addresses.
-- Outcomes of recipients at resend.dev are simulated (delivered@, bounced@, complained@resend.dev): they
-- say nothing of deliverability, and one complaint of complained@ made the overview and the doctor's
-- complaint rate alarm. New outcomes of them are no longer counted; this takes those already counted out
-- of the counts the overview and the doctor read (the last 30 days, a day more for margin), from the
-- timeline entries still kept. Older counts are read by nothing. Each organization's entries of the
-- period are read through email_events_metrics_idx (organization, time), not the whole timeline.
WITH test_outcomes AS (
  SELECT ev.organization_id, date_trunc('hour', ev.created_at, 'UTC') AS hour, ev.type, count(*)::int AS n
    FROM organizations o
   CROSS JOIN LATERAL (
     SELECT organization_id, created_at, type FROM email_events
      WHERE organization_id = o.id AND created_at >= now() - interval '31 days'
        AND type IN ('delivered', 'bounced', 'complained', 'failed', 'opened', 'clicked')
        AND lower(recipient) LIKE '%@resend.dev'
   ) ev
   GROUP BY 1, 2, 3
),
-- An hour's count is spread over shards: the test outcomes are taken from its shards in turn, none below 0.
shards AS (
  SELECT c.organization_id, c.hour, c.type, c.shard, t.n,
         coalesce(sum(c.count) OVER (PARTITION BY c.organization_id, c.hour, c.type ORDER BY c.shard
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
    FROM email_event_counts c
    JOIN test_outcomes t ON (t.organization_id, t.hour, t.type) = (c.organization_id, c.hour, c.type)
)
UPDATE email_event_counts c SET count = c.count - least(c.count, s.n - s.before)
  FROM shards s
 WHERE (c.organization_id, c.hour, c.type, c.shard) = (s.organization_id, s.hour, s.type, s.shard)
   AND s.n > s.before;
