-- expand: GET /emails/metrics counts an organization's timeline entries over a date range. Without this index
-- that is a scan of every organization's timeline; with it, a range scan of the organization's entries
-- in the range and nothing else. Entries are written in time order, so new ones land at the index's
-- right-hand edge for their organization.
CREATE INDEX email_events_metrics_idx ON email_events (organization_id, created_at);
