-- contract: emails.status no longer takes 'failed', which older releases write.
-- A message never fails as a whole: its recipients fail one by one (email_recipients.status), and the
-- message is sent once each of them has an outcome. The emails.status CHECK keeps only the statuses a
-- message can have: queued, scheduled, sending, sent, canceled.

ALTER TABLE emails DROP CONSTRAINT emails_status_check;
ALTER TABLE emails ADD CONSTRAINT emails_status_check
  CHECK (status IN ('queued', 'scheduled', 'sending', 'sent', 'canceled'));
