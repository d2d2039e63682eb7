// Where a message and each of its recipients stand. These are the values the CHECK constraints on
// emails.status and email_recipients.status allow, no more: a status added here needs a migration that
// adds it there (test/statuses.test.ts compares the two).

/**
 * A message's status:
 * - queued: accepted, to be sent as soon as a worker takes it;
 * - scheduled: accepted, not to be sent before its scheduled_at;
 * - sending: a worker took it, and some recipients may have no outcome yet;
 * - sent: every recipient has its outcome (delivered, bounced or failed);
 * - canceled: cancelled before a worker took it.
 *
 * Only queued and scheduled messages can be cancelled or rescheduled; a worker takes only those two (and
 * a sending one whose job came back), under the same row lock as a cancel.
 *
 * A message never fails as a whole: its recipients fail one by one.
 */
export const EMAIL_STATUSES = ['queued', 'scheduled', 'sending', 'sent', 'canceled'] as const;
export type EmailStatus = (typeof EMAIL_STATUSES)[number];

/**
 * One recipient's status:
 * - pending: no outcome yet (not tried, or deferred and to be tried again);
 * - delivered: the receiving server took responsibility for it;
 * - bounced: refused for good, when sent or later by a bounce report;
 * - failed: never delivered, for the reason in failure_reason.
 */
export const RECIPIENT_STATUSES = ['pending', 'delivered', 'bounced', 'failed'] as const;
export type RecipientStatus = (typeof RECIPIENT_STATUSES)[number];

/**
 * Why a recipient failed (email_recipients.failure_reason, set with status `failed` only):
 * - suppressed: on the organization's suppression list when the message was sent, so not sent to;
 * - unsubscribed: a topic send, and the recipient is not subscribed to the topic, so not sent to;
 * - retries_exhausted: deferred at every attempt of the retry schedule;
 * - refused: the receiving server refused the message for good for a reason that is not the
 *   recipient's (a policy, reputation or content block, or the sender's own authentication): not a
 *   bounce, and the address is not suppressed;
 * - delivery_error: the delivery worker failed on the message at every run it is allowed (an error of
 *   Mailroom's or of the message, not the receiving server's answer): its job is kept failed.
 */
export type RecipientFailureReason = 'suppressed' | 'unsubscribed' | 'retries_exhausted' | 'refused' | 'delivery_error';
