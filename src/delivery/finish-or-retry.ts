import type { Database } from '../platform/db/database.ts';
import type { JobResult } from '../queue/worker.ts';

// Step 8, finish or retry. With deferred recipients, the job comes back at the earliest of their retry
// times and the message stays `sending`. Otherwise, when no recipient is pending any more, the message
// is `sent`: every recipient has its outcome.

export async function finishOrRetry(db: Database, emailId: string, retryAt: Date | undefined): Promise<JobResult> {
  if (retryAt) return { retryAt, reason: 'deferred recipients' };
  await db.query(
    `UPDATE emails SET status = 'sent' WHERE id = $1 AND status = 'sending'
        AND NOT EXISTS (SELECT 1 FROM email_recipients WHERE email_id = $1 AND status = 'pending')`,
    [emailId],
  );
  return { done: true };
}
