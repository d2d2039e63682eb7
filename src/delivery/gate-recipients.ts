import type { Database } from '../platform/db/database.ts';
import { addressKey } from '../platform/address-key.ts';
import { countOutcome } from '../platform/metrics.ts';
import { recordTimelineEntry } from '../emails/timeline.ts';
import type { RecipientFailureReason } from '../emails/statuses.ts';
import { subscribedAddresses } from '../contacts/subscriptions.ts';
import { SUPPRESSION_ORIGINS } from '../suppressions/suppressions.ts';
import type { SuppressionReason } from '../suppressions/suppressions.ts';
import type { EmailToSend, PendingRecipient } from './take-message.ts';

// Step 2, gate the recipients: those who must not receive the message fail without being sent to.
// - On the organization's suppression list: failed, reason `suppressed` (webhook email.suppressed).
// - For a topic send, not subscribed to the topic: failed, reason `unsubscribed` (webhook email.failed).
// - For a broadcast copy, a contact who has unsubscribed from everything (contacts.unsubscribed, which a
//   one-click link of a broadcast without a topic sets) since the audience was taken: failed, reason
//   `unsubscribed`. (A copy of a broadcast with a topic is a topic send: the topic gate also sees that.)
// All are decided now, when the message is sent, rather than when it was accepted, so an unsubscribe
// before a scheduled send, or while a broadcast's copies wait their turn, is honoured. The take
// (take-message.ts) read both flags with the recipients, so neither costs a query of its own.

type GateReason = Extract<RecipientFailureReason, 'suppressed' | 'unsubscribed'>;

/** Fails the recipients who must not receive the message; returns those to send to. */
export async function gateRecipients(
  db: Database,
  email: EmailToSend,
  pending: PendingRecipient[],
): Promise<PendingRecipient[]> {
  const suppressed = pending.filter((r) => r.suppressed);
  if (suppressed.length > 0) await failWithoutSending(db, email, suppressed, 'suppressed');
  let recipients = pending.filter((r) => !r.suppressed);
  const unsubscribedContacts = recipients.filter((r) => r.unsubscribed);
  if (unsubscribedContacts.length > 0) {
    await failWithoutSending(db, email, unsubscribedContacts, 'unsubscribed');
    recipients = recipients.filter((r) => !r.unsubscribed);
  }
  if (email.topic_id !== null && recipients.length > 0) {
    const subscribed = await subscribedAddresses(
      db,
      email.organization_id,
      email.topic_id,
      recipients.map((r) => r.address),
    );
    const unsubscribed = recipients.filter((r) => !subscribed.has(addressKey(r.address)));
    if (unsubscribed.length > 0) await failWithoutSending(db, email, unsubscribed, 'unsubscribed');
    recipients = recipients.filter((r) => subscribed.has(addressKey(r.address)));
  }
  return recipients;
}

/** One transaction: each recipient still pending fails, with its timeline entry. */
async function failWithoutSending(
  db: Database,
  email: EmailToSend,
  recipients: PendingRecipient[],
  reason: GateReason,
): Promise<void> {
  const failed: string[] = [];
  await db.transaction(async (tx) => {
    for (const recipient of recipients) {
      // The suppression's own reason goes to the webhook event (its `suppressed.origin`).
      const changed = await tx.query<{ suppression: SuppressionReason | null }>(
        `UPDATE email_recipients SET status = 'failed', failure_reason = $3, updated_at = now()
          WHERE email_id = $1 AND address = $2 AND status = 'pending'
          RETURNING (SELECT s.reason FROM suppressions s
                      WHERE s.organization_id = $4 AND s.address = lower($2)) AS suppression`,
        [email.id, recipient.address, reason, email.organization_id],
      );
      if (changed.rowCount === 0) continue;
      failed.push(recipient.address);
      const suppression = changed.rows[0]!.suppression;
      await recordTimelineEntry(tx, {
        emailId: email.id,
        organizationId: email.organization_id,
        kind: 'failed',
        recipient: recipient.address,
        data: { reason },
        ...(reason === 'suppressed' && {
          webhook: { suppressed: { origin: suppression ? SUPPRESSION_ORIGINS[suppression] : 'manual' } },
        }),
      });
    }
  });
  for (const address of failed) countOutcome(reason === 'suppressed' ? 'suppressed' : 'failed', address);
}
