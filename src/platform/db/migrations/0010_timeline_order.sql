-- expand: A message's timeline is read in the order its entries were written. Two entries written in one
-- transaction within the same clock tick (a test address's delivered then complained) have equal
-- created_at; the insertion sequence, not the random id, breaks the tie.
ALTER TABLE email_events ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
DROP INDEX email_events_email_idx;
CREATE INDEX email_events_email_idx ON email_events (email_id, created_at, seq);
