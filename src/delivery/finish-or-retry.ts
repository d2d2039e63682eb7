import type { Database, Queryable } from '../platform/db/database.ts';
import type { JobResult } from '../queue/worker.ts';

// Step 8, finish or retry. With deferred recipients, the job comes back at the earliest of their retry
// times and the message stays `sending`. Otherwise, when no recipient is pending any more, the message
// is `sent`: every recipient has its outcome.

export async function finishOrRetry(db: Database, emailId: string, retryAt: Date | undefined): Promise<JobResult> {
  if (retryAt) return { retryAt, reason: 'deferred recipients' };
  await markSent(db, [emailId]);
  return { done: true };
}

/** Marks `sent` those of the messages that are `sending` and have no pending recipient left. */
export async function markSent(db: Queryable, emailIds: string[]): Promise<void> {
  await db.query(
    `UPDATE emails e SET status = 'sent' WHERE e.id = ANY($1::uuid[]) AND e.status = 'sending'
        AND NOT EXISTS (SELECT 1 FROM email_recipients r WHERE r.email_id = e.id AND r.status = 'pending')`,
    [emailIds],
  );
}
