import type { Database, Queryable } from '../platform/db/database.ts';
import type { JobResult } from '../queue/worker.ts';

// Step 8, finish or retry. With deferred recipients, the job comes back at the earliest of their retry
// times and the message stays `sending`. Otherwise, when no recipient is pending any more, the message
// is `sent`: every recipient has its outcome.

export async function finishOrRetry(db: Database, emailId: string, retryAt: Date | undefined): Promise<JobResult> {
  if (retryAt) return retryForDeferred(retryAt);
  await markSent(db, [emailId]);
  return { done: true };
}

/** The job's result once its message's outcomes are stored: again at `retryAt` if any were deferred. */
export function retryForDeferred(retryAt: Date | undefined): JobResult {
  return retryAt ? { retryAt, reason: 'deferred recipients' } : { done: true };
}

/** Marks `sent` those of the messages that are `sending` and have no pending recipient left. */
export async function markSent(db: Queryable, emailIds: string[]): Promise<void> {
  await db.query(markSentStatement('SELECT unnest($1::uuid[])'), [emailIds]);
}

/**
 * The statement that marks `sent` the messages of `ids` (an SQL query of message ids) that are `sending`
 * and have no pending recipient left. `settled`, an earlier CTE of the same statement (columns
 * `email_id`, `address`, `status`: recipients it changed, as RETURNING gives them), says which
 * recipients that statement has just given an outcome, which its own snapshot does not yet show.
 */
export function markSentStatement(ids: string, settled?: string): string {
  const settledNow = settled
    ? `AND NOT EXISTS (SELECT 1 FROM ${settled} s WHERE s.email_id = r.email_id AND s.address = r.address
                          AND s.status <> 'pending')`
    : '';
  return `UPDATE emails e SET status = 'sent' WHERE e.id IN (${ids}) AND e.status = 'sending'
      AND NOT EXISTS (SELECT 1 FROM email_recipients r WHERE r.email_id = e.id AND r.status = 'pending' ${settledNow})`;
}
