import type { Database } from '../platform/db/database.ts';
import { recordTimelineEntry } from '../emails/timeline.ts';
import { isTestDomainAddress, testOutcome } from '../emails/test-addresses.ts';
import type { RecipientResult } from './transport.ts';
import { attemptNumbers, decideOutcome, writeOutcomeRows } from './record-outcome.ts';
import type { EmailToSend, PendingRecipient } from './take-message.ts';

// Step 3, simulate the test addresses: the recipients at resend.dev (delivered@, bounced@, complained@,
// each with an optional +label) get the outcome their address names without being sent to, on every
// transport: no DNS lookup, no SMTP transaction, no captured copy. Their outcomes are recorded as a
// transport's would be, so their timeline entries and webhook events are those of a real outcome:
// - delivered@: delivered (email.delivered);
// - bounced@: a hard bounce, 550 5.1.1 (email.bounced), the address left off the suppression list so
//   the same test can be run again;
// - complained@: delivered, then complained (email.delivered, then email.complained), again without
//   suppression.
// Any other address at resend.dev (refused when a message is accepted; only a message accepted before
// that rule can hold one) bounces the same way, since no such mailbox exists: nothing is sent there.
// The step runs after the gate, so a test address the organization suppressed itself, or that is not
// subscribed to the topic of a topic send, fails as any address would. The other recipients go on to
// the transport as usual.

const DELIVERED: Omit<RecipientResult, 'address'> = {
  outcome: 'delivered',
  smtpCode: 250,
  response: '250 2.0.0 OK: test address, accepted without being sent',
};

const BOUNCED: Omit<RecipientResult, 'address'> = {
  outcome: 'bounced',
  smtpCode: 550,
  response: '550 5.1.1 The email account that you tried to reach does not exist',
};

/** The complaint a feedback loop would report: spam (`abuse`), from no particular mail client. */
const COMPLAINT = { feedback_type: 'abuse', user_agent: null };

/** Records the outcomes of the test recipients, in one transaction; returns the recipients to send to. */
export async function simulateTestAddresses(
  db: Database,
  email: EmailToSend,
  recipients: PendingRecipient[],
): Promise<PendingRecipient[]> {
  const tests = recipients.filter((r) => isTestDomainAddress(r.address));
  if (tests.length === 0) return recipients;
  const attempts = attemptNumbers(tests);
  const complaints: string[] = [];
  const rows = tests.map(({ address }) => {
    const outcome = testOutcome(address);
    const result = { address, ...(outcome === 'delivered' || outcome === 'complained' ? DELIVERED : BOUNCED) };
    const decided = decideOutcome(email, result, attempts.get(address) ?? 1, [], false);
    if (outcome === 'complained') {
      complaints.push(address);
    }
    return decided.row;
  });
  await db.transaction(async (tx) => {
    await writeOutcomeRows(tx, rows);
    // The timeline orders entries by the time each was written: delivered comes first.
    for (const address of complaints) {
      await recordTimelineEntry(tx, {
        emailId: email.id,
        organizationId: email.organization_id,
        kind: 'complained',
        recipient: address,
        once: true,
        data: COMPLAINT,
      });
    }
  });
  // Not counted in mailroom_recipient_outcomes_total: a simulated bounce or complaint would trip the
  // bounce and complaint rate alerts, as it would skew every other rate that judges deliverability.
  return recipients.filter((r) => !isTestDomainAddress(r.address));
}
