import type { Database, Queryable } from '../platform/db/database.ts';
import { cappedText } from '../platform/text.ts';
import { addressKey } from '../platform/address-key.ts';
import { acceptedToDelivered, countOutcome, workerBatchSize, type RecipientOutcome } from '../platform/metrics.ts';
import {
  TIMELINE_ENTRY_COLUMNS,
  timelineEntriesFrom,
  timelineEntryRow,
  type TimelineEntry,
  type TimelineEntryRow,
} from '../emails/timeline.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import type { RecipientFailureReason, RecipientStatus } from '../emails/statuses.ts';
import { suppressionsFrom } from '../suppressions/suppressions.ts';
import { settleJobsFrom, settlementOf, type Job, type JobSettlement } from '../queue/leases.ts';
import { markSentStatement, retryForDeferred } from './finish-or-retry.ts';
import type { RecipientResult } from './transport.ts';
import { isBadMailbox } from '../suppressions/bad-mailbox.ts';
import type { EmailToSend, PendingRecipient } from './take-message.ts';

// Step 7, record each outcome. The outcomes of one copy commit in one statement as soon as that copy is
// sent (copies of other jobs sent meanwhile share it), so a worker that dies later sends again only the
// copies whose outcomes were not stored.
// - delivered: the recipient is delivered;
// - bounced: the recipient is bounced, and a bad mailbox goes on the suppression list;
// - deferred: the recipient stays pending, to be tried again after the next delay of the retry
//   schedule, or fails (`retries_exhausted`) when the schedule has no delay left.
// Each outcome has its timeline entry (and so its webhook event) in the same statement.

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
  /**
   * The copy is the message's only one, sent by this job: once its recipients have outcomes the message
   * is `sent`, and the job is settled (finished, or due again for the deferred) in the same statement.
   */
  onlyCopyOf: Job | undefined;
}

interface Recorded {
  retryAt: Date | undefined;
  counted: Array<{ address: string; outcome: RecipientOutcome }>;
}

/** Recipient results stored by one statement at most. */
const MAX_RESULTS_AT_ONCE = 500;

// Copies sent while a statement of outcomes is in flight are recorded together by the next one.
const outcomeWriter = batcherPerDatabase<CopyResults, Recorded>({
  transaction: false,
  run: writeOutcomes,
  size: (copy) => copy.results.length,
  maxSize: MAX_RESULTS_AT_ONCE,
  done: (items) => workerBatchSize.observe({ batch: 'record-outcomes' }, items),
});

async function writeOutcomes(db: Queryable, copies: CopyResults[]): Promise<Recorded[]> {
  const rows: OutcomeRow[] = [];
  const recorded = copies.map(({ email, results, attempts, retrySchedule }) => {
    let retryAt: Date | undefined;
    const counted: Recorded['counted'] = [];
    for (const result of results) {
      const decided = decideOutcome(email, result, attempts.get(result.address) ?? 1, retrySchedule, true);
      rows.push(decided.row);
      counted.push({ address: result.address, outcome: decided.outcome });
      retryAt = earliest(retryAt, decided.retryAt);
    }
    return { retryAt, counted };
  });
  // The message of a copy that was its only one, with no recipient deferred: `sent` once none is pending.
  const finished = new Set(copies.filter((copy, i) => copy.onlyCopyOf && !recorded[i]!.retryAt).map((c) => c.email.id));
  for (const row of rows) row.mark_sent = finished.has(row.email_id);
  const settlements = copies.flatMap(({ onlyCopyOf: job, email }, i) =>
    job ? [{ ...settlementOf(job, retryForDeferred(recorded[i]!.retryAt)), email_id: email.id }] : [],
  );
  await writeOutcomeRows(db, rows, settlements);
  return recorded;
}

/**
 * Stores the outcomes of one copy, in one statement (shared with other copies sent meanwhile). Returns
 * when to try again for the earliest of its deferred recipients that have retries left. With
 * `onlyCopyOf` (the message's only copy, sent by that job) a message left with no pending recipient is
 * marked `sent`, and the job settled, by that statement: the worker has nothing more to write.
 */
export async function recordOutcomes(
  db: Database,
  email: EmailToSend,
  results: RecipientResult[],
  attempts: Map<string, number>,
  retrySchedule: number[],
  onlyCopyOf?: Job,
): Promise<Date | undefined> {
  const { retryAt, counted } = await outcomeWriter(db).add({ email, results, attempts, retrySchedule, onlyCopyOf });
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
 * What is written for one recipient's result: its new state, its timeline entry (none when `kind` is
 * null: a hold already announced), a suppression.
 */
export interface OutcomeRow extends Omit<TimelineEntryRow, 'kind'> {
  kind: TimelineEntryRow['kind'] | null;
  address: string;
  status: RecipientStatus;
  attempts: number;
  failure_reason: RecipientFailureReason | null;
  last_response: string;
  /** The address (its key) to put on the organization's suppression list (a bad mailbox), if any. */
  suppress: string | null;
  /** Mark the message `sent` if no recipient is left pending once this statement is done. */
  mark_sent: boolean;
  /** The destination site it was tried at or held for, and the hold it now waits in (null: none). */
  site: string | null;
  hold_reason: string | null;
}

const OUTCOME_COLUMNS = `${TIMELINE_ENTRY_COLUMNS}, address text, status text, attempts int, failure_reason text,
  last_response text, suppress text, mark_sent boolean, site text, hold_reason text`;

/**
 * What a recipient's result means: its new state and timeline entry, what it counts as, and when to try
 * it again (a deferral with retries left). With `suppressBadMailbox`, a hard bounce from a mailbox that
 * does not exist puts the address on the suppression list.
 */
export function decideOutcome(
  email: EmailToSend,
  result: RecipientResult,
  attempts: number,
  schedule: number[],
  suppressBadMailbox: boolean,
): { row: OutcomeRow; outcome: RecipientOutcome; retryAt?: Date } {
  // Which egress source it went through (when the shaping file declares sources), and whether as its
  // pool's overflow (the warming sources had sent today's allowance).
  const egress = result.egress
    ? { source: result.egress.source, ...(result.egress.overflow ? { overflow: true } : {}) }
    : {};
  const smtp = {
    smtp_code: result.smtpCode ?? null,
    response: cappedText(result.response, 1000),
    ...egress,
    ...(result.tlsNote !== undefined ? { tls: cappedText(result.tlsNote, 1000) } : {}),
  };
  const entry = { emailId: email.id, organizationId: email.organization_id, recipient: result.address };
  const row = (
    status: RecipientStatus,
    reason: RecipientFailureReason | null,
    timeline: TimelineEntry,
    suppress = false,
  ): OutcomeRow => ({
    ...timelineEntryRow(timeline),
    address: result.address,
    status,
    attempts,
    failure_reason: reason,
    last_response: smtp.response,
    suppress: suppress ? addressKey(result.address) : null,
    mark_sent: false,
    site: result.hold?.site ?? null,
    hold_reason: null,
  });

  if (result.outcome === 'held') {
    // Traffic shaping keeps it back: it stays pending, this try does not count, and the hold is told
    // once (a delivery_delayed entry with its reason), not at every try while it lasts.
    const hold = result.hold!;
    const data = { ...smtp, reason: hold.reason, next_attempt_at: hold.until.toISOString() };
    const held = row('pending', null, { ...entry, kind: 'delivery_delayed', data });
    const announced = hold.announced ? { kind: null } : {};
    return {
      row: { ...held, ...announced, attempts: attempts - 1, hold_reason: hold.reason },
      outcome: 'held',
      retryAt: hold.until,
    };
  }

  if (result.outcome === 'delivered') {
    return { row: row('delivered', null, { ...entry, kind: 'delivered', data: smtp }), outcome: 'delivered' };
  }
  if (result.outcome === 'bounced') {
    // once: a bounce report (inbound/) may have recorded this recipient's bounce first. A bad mailbox is
    // not tried again: later messages to this address fail as suppressed.
    const bounce = { type: 'hard', smtp_code: result.smtpCode ?? null, diagnostic: smtp.response };
    const timeline: TimelineEntry = { ...entry, once: true, kind: 'bounced', data: { bounce, ...egress } };
    return { row: row('bounced', null, timeline, suppressBadMailbox && isBadMailbox(result)), outcome: 'bounced' };
  }
  if (result.outcome === 'failed') {
    // Refused for good, but not for the recipient's sake: given up, not a bounce, nobody suppressed.
    const timeline: TimelineEntry = { ...entry, kind: 'failed', data: { reason: 'refused', ...smtp } };
    return { row: row('failed', 'refused', timeline), outcome: 'failed' };
  }
  // Deferred: try again after the next delay of the schedule, or give up.
  const delay = schedule[attempts - 1];
  if (delay === undefined) {
    const timeline: TimelineEntry = { ...entry, kind: 'failed', data: { reason: 'retries_exhausted', ...smtp } };
    return { row: row('failed', 'retries_exhausted', timeline), outcome: 'failed' };
  }
  const retryAt = new Date(Date.now() + delay * 1000);
  const data = { ...smtp, attempt: attempts, next_attempt_at: retryAt.toISOString() };
  return { row: row('pending', null, { ...entry, kind: 'delivery_delayed', data }), outcome: 'deferred', retryAt };
}

/**
 * Writes decided outcomes with one statement (in a transaction when given one, else as its own): each
 * recipient's new state (only while it is still pending), its timeline entry with its webhook fan-out
 * and its count in the overview, the bad mailboxes on the suppression list (in a fixed order, so two
 * such statements cannot deadlock), `sent` for the messages left with no pending recipient, and the
 * settlements of the jobs that sent them (each only while the job still has the lease it names).
 */
export async function writeOutcomeRows(
  db: Queryable,
  rows: OutcomeRow[],
  settlements: (JobSettlement & { email_id: string })[] = [],
): Promise<void> {
  if (rows.length === 0) return;
  await db.query(
    `WITH outcome AS (
       SELECT *, ordinality AS n FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (${OUTCOME_COLUMNS})) WITH ORDINALITY
     ),
     updated AS (
       UPDATE email_recipients r SET status = o.status, attempts = o.attempts, failure_reason = o.failure_reason,
              last_response = o.last_response, site = coalesce(o.site, r.site),
              -- a hold that writes no entry (already announced, or a moment's wait) keeps the one announced
              hold_reason = CASE WHEN o.kind IS NULL THEN r.hold_reason ELSE o.hold_reason END,
              updated_at = now()
         FROM outcome o WHERE r.email_id = o.email_id AND r.address = o.address AND r.status = 'pending'
          -- The messages named as an array too: the planner takes jsonb_to_recordset for 100 rows and,
          -- on a table of some ten thousand recipients, would hash-join them against a scan of the whole
          -- table (5-8 ms a statement at 40,000 rows, growing with it) instead of probing its key.
          AND r.email_id = ANY(ARRAY(SELECT email_id FROM outcome))
       RETURNING r.email_id, r.address, r.status
     ),
     entry AS (SELECT * FROM outcome WHERE kind IS NOT NULL),
     ${timelineEntriesFrom('entry', { from: 'emails' })},
     suppressed AS (${suppressionsFrom('outcome', 'suppress', 'hard_bounce')}),
     sent AS (${markSentStatement('SELECT email_id FROM outcome WHERE mark_sent', 'updated')} RETURNING e.id),
     -- A job whose message this statement could not mark sent (a recipient changed concurrently, e.g.
     -- by an inbound bounce, which this statement's snapshot does not see) is not finished but due again
     -- at once: its next run finds the message's state and marks it.
     settlement AS (
       SELECT s.job_id, s.lease_id,
              CASE WHEN s.retry_at IS NOT NULL OR s.email_id IN (SELECT id FROM sent) THEN s.retry_at ELSE now() END
                AS retry_at,
              COALESCE(s.reason, 'message not marked sent with its outcomes') AS reason
         FROM jsonb_to_recordset($2::jsonb)
           AS s(job_id bigint, lease_id uuid, retry_at timestamptz, reason text, email_id uuid)
     ),
     ${settleJobsFrom('settlement')}
     SELECT 1`,
    [JSON.stringify(rows), JSON.stringify(settlements)],
  );
}
