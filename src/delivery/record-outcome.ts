import type { Database, Queryable } from '../platform/db/database.ts';
import { cappedText } from '../platform/text.ts';
import { acceptedToDelivered, countOutcome, workerBatchSize, type RecipientOutcome } from '../platform/metrics.ts';
import { EventCounts, recordTimelineEntry } from '../emails/timeline.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import { markSent } from './finish-or-retry.ts';
import type { RecipientFailureReason, RecipientStatus } from '../emails/statuses.ts';
import { suppressAddresses } from '../suppressions/suppressions.ts';
import type { RecipientResult } from './transport.ts';
import { isBadMailbox } from './smtp-outcome.ts';
import type { EmailToSend, PendingRecipient } from './take-message.ts';

// Step 7, record each outcome. The outcomes of one copy commit in one transaction as soon as that copy
// is sent (copies of other jobs sent meanwhile share it), so a worker that dies later sends again only
// the copies whose outcomes were not stored.
// - delivered: the recipient is delivered;
// - bounced: the recipient is bounced, and a bad mailbox goes on the suppression list;
// - deferred: the recipient stays pending, to be tried again after the next delay of the retry
//   schedule, or fails (`retries_exhausted`) when the schedule has no delay left.
// Each outcome has its timeline entry (and so its webhook event) in the same transaction.

/** The number of the attempt about to be made, per recipient address. */
export function attemptNumbers(recipients: PendingRecipient[]): Map<string, number> {
  return new Map(recipients.map((r) => [r.address, r.attempts + 1]));
}

/** One copy's results, to be stored. */
interface CopyResults {
  email: EmailToSend;
  results: RecipientResult[];
  attempts: Map<string, number>;
  retrySchedule: number[];
  /** The copy is the message's only one: once its recipients have outcomes the message is `sent`. */
  last: boolean;
}

interface Recorded {
  retryAt: Date | undefined;
  counted: Array<{ address: string; outcome: RecipientOutcome }>;
}

/** Recipient results stored in one transaction at most. */
const MAX_RESULTS_AT_ONCE = 500;

// Copies sent while a transaction of outcomes is in flight are recorded together in the next one.
const outcomeWriter = batcherPerDatabase<CopyResults, Recorded>({
  run: writeOutcomes,
  size: (copy) => copy.results.length,
  maxSize: MAX_RESULTS_AT_ONCE,
  done: (items) => workerBatchSize.observe({ batch: 'record-outcomes' }, items),
});

async function writeOutcomes(tx: Queryable, copies: CopyResults[]): Promise<Recorded[]> {
  // Counts and suppressions are written once at the end, each in a fixed order (see EventCounts).
  const counts = new EventCounts();
  const suppressions: BouncedAddress[] = [];
  const recorded: Recorded[] = [];
  for (const { email, results, attempts, retrySchedule } of copies) {
    let retryAt: Date | undefined;
    const counted: Recorded['counted'] = [];
    for (const result of results) {
      const attempt = attempts.get(result.address) ?? 1;
      const outcome = await recordOutcome(tx, email, result, attempt, retrySchedule, { counts, suppressions });
      counted.push({ address: result.address, outcome: outcome.outcome });
      retryAt = earliest(retryAt, outcome.retryAt);
    }
    recorded.push({ retryAt, counted });
  }
  await counts.write(tx);
  await suppressAddresses(tx, suppressions);
  const finished = copies.filter((copy, i) => copy.last && !recorded[i]!.retryAt).map((copy) => copy.email.id);
  if (finished.length > 0) await markSent(tx, finished);
  return recorded;
}

/**
 * Stores the outcomes of one copy, in one transaction (shared with other copies sent meanwhile). Returns
 * when to try again for the earliest of its deferred recipients that have retries left. With `last` (the
 * message's only copy) a message left with no pending recipient is marked `sent` in that transaction.
 */
export async function recordOutcomes(
  db: Database,
  email: EmailToSend,
  results: RecipientResult[],
  attempts: Map<string, number>,
  retrySchedule: number[],
  last = false,
): Promise<Date | undefined> {
  const { retryAt, counted } = await outcomeWriter(db).add({ email, results, attempts, retrySchedule, last });
  countOutcomes(email, counted);
  return retryAt;
}

/**
 * recordOutcomes once more, after a try whose COMMIT was cut off (it may have gone through): results
 * already stored (the recipient has its outcome, or this attempt counted) are not stored again, so no
 * timeline entry or webhook event is recorded twice. A deferral already stored still says when to retry.
 */
export async function recordOutcomesAgain(
  db: Database,
  email: EmailToSend,
  results: RecipientResult[],
  attempts: Map<string, number>,
  retrySchedule: number[],
): Promise<Date | undefined> {
  const { rows } = await db.query<{ address: string; status: string; attempts: number }>(
    'SELECT address, status, attempts FROM email_recipients WHERE email_id = $1 AND address = ANY($2::text[])',
    [email.id, results.map((result) => result.address)],
  );
  const stored = new Map(
    rows
      .filter((row) => row.status !== 'pending' || row.attempts >= (attempts.get(row.address) ?? 1))
      .map((row) => [row.address, row.status]),
  );
  let retryAt: Date | undefined;
  for (const [address, status] of stored) {
    const delay = retrySchedule[(attempts.get(address) ?? 1) - 1];
    if (status === 'pending' && delay !== undefined) retryAt = earliest(retryAt, new Date(Date.now() + delay * 1000));
  }
  const rest = results.filter((result) => !stored.has(result.address));
  return earliest(
    retryAt,
    rest.length > 0 ? await recordOutcomes(db, email, rest, attempts, retrySchedule) : undefined,
  );
}

/** Counts committed outcomes in the metrics (and a delivery's time since acceptance). */
export function countOutcomes(
  email: EmailToSend,
  counted: Array<{ address: string; outcome: RecipientOutcome }>,
): void {
  for (const { address, outcome } of counted) {
    countOutcome(outcome, address);
    if (outcome === 'delivered') acceptedToDelivered.observe((Date.now() - email.created_at.getTime()) / 1000);
  }
}

/** The earlier of two retry times, either of which may be absent. */
export function earliest(a: Date | undefined, b: Date | undefined): Date | undefined {
  return b && (!a || b < a) ? b : a;
}

/**
 * What the transaction writes once at its end (see EventCounts): `counts` gathers the overview's counts
 * (without it each entry counts itself); `suppressions` gathers the bad mailboxes to suppress (without
 * it, none is: the test addresses' simulated bounces).
 */
export interface RecordOptions {
  counts?: EventCounts;
  suppressions?: BouncedAddress[];
}

type BouncedAddress = Parameters<typeof suppressAddresses>[1][number];

/**
 * Stores one recipient's result and its timeline entry. Returns what it counts as, and when to try the
 * recipient again for a deferral that has retries left.
 */
export async function recordOutcome(
  tx: Queryable,
  email: EmailToSend,
  result: RecipientResult,
  attempts: number,
  schedule: number[],
  options: RecordOptions = {},
): Promise<{ outcome: RecipientOutcome; retryAt?: Date }> {
  const smtp = { smtp_code: result.smtpCode ?? null, response: cappedText(result.response, 1000) };
  const entry = { emailId: email.id, organizationId: email.organization_id, recipient: result.address };
  const update = (status: RecipientStatus, reason: RecipientFailureReason | null) =>
    tx.query(
      `UPDATE email_recipients SET status = $3, attempts = $4, failure_reason = $5, last_response = $6, updated_at = now()
        WHERE email_id = $1 AND address = $2 AND status = 'pending'`,
      [email.id, result.address, status, attempts, reason, smtp.response],
    );

  if (result.outcome === 'delivered') {
    await update('delivered', null);
    await recordTimelineEntry(tx, { ...entry, kind: 'delivered', data: smtp }, options.counts);
    return { outcome: 'delivered' };
  }
  if (result.outcome === 'bounced') {
    await update('bounced', null);
    // once: a bounce report (inbound/) may have recorded this recipient's bounce first.
    await recordTimelineEntry(
      tx,
      {
        ...entry,
        once: true,
        kind: 'bounced',
        data: { bounce: { type: 'hard', smtp_code: result.smtpCode ?? null, diagnostic: smtp.response } },
      },
      options.counts,
    );
    // A bad mailbox is not tried again: later messages to this address fail as suppressed.
    if (isBadMailbox(result)) {
      options.suppressions?.push({
        organizationId: email.organization_id,
        address: result.address,
        reason: 'hard_bounce',
      });
    }
    return { outcome: 'bounced' };
  }
  // Deferred: try again after the next delay of the schedule, or give up.
  const delay = schedule[attempts - 1];
  if (delay === undefined) {
    await update('failed', 'retries_exhausted');
    await recordTimelineEntry(
      tx,
      { ...entry, kind: 'failed', data: { reason: 'retries_exhausted', ...smtp } },
      options.counts,
    );
    return { outcome: 'failed' };
  }
  await tx.query(
    `UPDATE email_recipients SET attempts = $3, last_response = $4, updated_at = now()
      WHERE email_id = $1 AND address = $2 AND status = 'pending'`,
    [email.id, result.address, attempts, smtp.response],
  );
  const retryAt = new Date(Date.now() + delay * 1000);
  await recordTimelineEntry(tx, {
    ...entry,
    kind: 'delivery_delayed',
    data: { ...smtp, attempt: attempts, next_attempt_at: retryAt.toISOString() },
  });
  return { outcome: 'deferred', retryAt };
}
