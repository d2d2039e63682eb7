import type { Database, Queryable } from '../platform/db/database.ts';
import { addressKey } from '../platform/address-key.ts';
import { countOutcome } from '../platform/metrics.ts';
import { recordTimelineEntry } from '../emails/timeline.ts';
import type { RecipientStatus } from '../emails/statuses.ts';
import { isBadMailbox } from '../suppressions/bad-mailbox.ts';
import { suppressAddress } from '../suppressions/suppressions.ts';
import type { Signer } from '../platform/signing.ts';
import { recipientDigest, type ReturnPathTarget } from '../delivery/return-path.ts';
import type { BounceReport, ComplaintReport, DeliveryReport } from './delivery-reports.ts';
import type { BroadcastAutoPause } from '../broadcasts/auto-pause.ts';

// Records the reports that came back to one return path: a bounce marks the recipient bounced, a
// complaint records complained, each with its timeline entry and webhook event, and the address goes
// on the organization's suppression list where the report says it should. All the reports of one
// return path commit together, so an SMTP client told 250 knows they are stored, and one that was told
// 451 can send them again: bounced and complained are kept once per recipient, so a report delivered
// twice records nothing the second time.
//
// Who a report is about: the recipient the return path names, whatever the report says (a report can
// only come back to the return path of the copy it answers, so it may name a forwarding address, but
// never affects a co-recipient). A return path in the old, message-only form names no recipient: then
// the report's own fields decide, as they did when those messages were sent.

interface RecipientRow {
  address: string;
}

/**
 * How many timeline entries were recorded (repeats and reports about no recipient of the message are not).
 * A hard bounce or a complaint of a broadcast's copy, once committed, is told to `autoPause`, which may
 * pause the broadcast (broadcasts/auto-pause.ts).
 */
export async function recordReports(
  db: Database,
  signer: Signer,
  target: ReturnPathTarget,
  reports: DeliveryReport[],
  originalRecipients: string[],
  autoPause?: BroadcastAutoPause,
): Promise<number> {
  const { emailId } = target;
  const counted: Array<{ address: string; outcome: 'bounced' | 'complained'; hard: boolean }> = [];
  let broadcastId: string | null = null;
  const recorded = await db.transaction(async (tx) => {
    const email = await tx.query<{ organization_id: string; broadcast_id: string | null }>(
      'SELECT organization_id, broadcast_id FROM emails WHERE id = $1',
      [emailId],
    );
    const organizationId = email.rows[0]?.organization_id;
    broadcastId = email.rows[0]?.broadcast_id ?? null;
    if (organizationId === undefined) return 0; // deleted since it was sent
    const { rows } = await tx.query<RecipientRow>('SELECT address FROM email_recipients WHERE email_id = $1', [
      emailId,
    ]);
    const recipients = new Recipients(rows.map((row) => row.address));
    const named =
      target.recipientDigest === null
        ? undefined
        : recipients.all.find((address) => recipientDigest(signer, address) === target.recipientDigest);
    if (target.recipientDigest !== null && named === undefined) return 0; // not a recipient of this message
    const about = (report: DeliveryReport) =>
      named !== undefined && report.kind === 'bounce' && recipients.find(report.recipient) === named ? 0 : 1;

    const message = { emailId, organizationId };
    let count = 0;
    // A report naming the return path's recipient first: a bounce is recorded once, from the best block.
    for (const report of named === undefined ? reports : reports.toSorted((a, b) => about(a) - about(b))) {
      if (report.kind === 'bounce') {
        const recipient = named ?? recipients.find(report.recipient) ?? recipients.find(report.originalRecipient);
        if (recipient !== undefined && (await recordBounce(tx, message, recipient, report))) {
          count++;
          counted.push({ address: recipient, outcome: 'bounced', hard: report.type === 'hard' });
        }
      } else {
        const recipient = named ?? complainant(recipients, report, originalRecipients);
        if (recipient !== undefined && (await recordComplaint(tx, message, recipient, report))) {
          count++;
          counted.push({ address: recipient, outcome: 'complained', hard: false });
        }
      }
    }
    return count;
  });
  for (const { address, outcome } of counted) countOutcome(outcome, address);
  if (broadcastId !== null && autoPause) {
    if (counted.some((c) => c.outcome === 'complained')) autoPause.noted(broadcastId, 'complaint');
    else if (counted.some((c) => c.hard)) autoPause.noted(broadcastId, 'hard_bounce');
  }
  return recorded;
}

interface MessageRef {
  emailId: string;
  organizationId: string;
}

async function recordBounce(
  tx: Queryable,
  message: MessageRef,
  recipient: string,
  report: BounceReport,
): Promise<boolean> {
  const eventId = await recordTimelineEntry(tx, {
    ...message,
    kind: 'bounced',
    recipient,
    once: true,
    data: {
      bounce: { type: report.type, smtp_code: report.smtpCode, diagnostic: report.diagnostic },
      status: report.status,
      source: 'dsn',
    },
  });
  if (eventId === null) return false; // already recorded: a repeat changes nothing
  const bounced: RecipientStatus = 'bounced'; // whatever the recipient's outcome was at send time
  await tx.query(
    `UPDATE email_recipients SET status = $3, updated_at = now()
      WHERE email_id = $1 AND address = $2 AND status <> $3`,
    [message.emailId, recipient, bounced],
  );
  // As for a bounce at send time (smtp-outcome.ts): only a bad mailbox is suppressed, not a refusal of
  // the content or the sender (5.7.x), which is no fault of the address.
  const badMailbox = isBadMailbox({
    smtpCode: report.smtpCode ?? undefined,
    response: `${report.status} ${report.diagnostic}`,
  });
  if (report.type === 'hard' && badMailbox) {
    await suppressAddress(tx, message.organizationId, recipient, 'hard_bounce', message.emailId);
  }
  return true;
}

async function recordComplaint(
  tx: Queryable,
  message: MessageRef,
  recipient: string,
  report: ComplaintReport,
): Promise<boolean> {
  const eventId = await recordTimelineEntry(tx, {
    ...message,
    kind: 'complained',
    recipient,
    once: true,
    data: { feedback_type: report.feedbackType, user_agent: report.userAgent },
  });
  if (eventId === null) return false;
  await suppressAddress(tx, message.organizationId, recipient, 'complaint', message.emailId);
  return true;
}

/**
 * Who complained: the recipient the report names; else the one recipient of the message found in the
 * embedded original's To and Cc; else the message's only recipient. Several candidates name no one: a
 * complaint is not pinned on someone who may not have made it.
 */
function complainant(
  recipients: Recipients,
  report: ComplaintReport,
  originalRecipients: string[],
): string | undefined {
  const named = recipients.find(report.recipient);
  if (named !== undefined) return named;
  const inOriginal = new Set(
    originalRecipients.map((address) => recipients.find(address)).filter((a) => a !== undefined),
  );
  if (inOriginal.size === 1) return [...inOriginal][0];
  if (inOriginal.size === 0 && recipients.size === 1) return recipients.only;
  return undefined;
}

/** The message's recipients, found by any spelling of their address: case, or the domain in Unicode. */
class Recipients {
  private readonly byKey = new Map<string, string>();

  constructor(addresses: string[]) {
    for (const address of addresses) this.byKey.set(addressKey(address), address);
  }

  get size(): number {
    return this.byKey.size;
  }

  get all(): string[] {
    return [...this.byKey.values()];
  }

  get only(): string | undefined {
    return this.byKey.size === 1 ? [...this.byKey.values()][0] : undefined;
  }

  /** The address as stored, for an address of the message given in any case. */
  find(address: string | null): string | undefined {
    return address === null ? undefined : this.byKey.get(addressKey(address));
  }
}
