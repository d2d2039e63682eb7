-- expand: retention. A sent or canceled message loses its content (html, text, headers, template variables,
-- attachments) once MAILROOM_RETENTION_DAYS have passed since it was sent (or, never sent, accepted);
-- body_pruned_at says when. Its metadata and timeline go once MAILROOM_METADATA_RETENTION_DAYS have
-- passed, always after its content. Each index below holds exactly the rows one pruning step looks
-- for, oldest first, so a step never scans the rest of the table.
ALTER TABLE emails ADD COLUMN body_pruned_at timestamptz;

CREATE INDEX emails_body_retention_idx ON emails ((coalesce(sent_at, created_at)))
  WHERE body_pruned_at IS NULL AND status IN ('sent', 'canceled');
CREATE INDEX emails_metadata_retention_idx ON emails ((coalesce(sent_at, created_at)))
  WHERE body_pruned_at IS NOT NULL;

-- Settled webhook deliveries (with their attempts) go after the metadata period; pending ones stay.
CREATE INDEX webhook_deliveries_settled_idx ON webhook_deliveries (created_at) WHERE status <> 'pending';
