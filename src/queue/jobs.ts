import type { Queryable } from '../platform/db/database.ts';

/** Queues of background work. */
export type QueueName = 'deliver-email';

/**
 * Adds a job, to run at `runAt` (now when absent). Call it inside the transaction whose change the job
 * acts on: the job exists exactly when that change committed.
 */
export async function enqueueJob(
  tx: Queryable,
  queue: QueueName,
  payload: Record<string, unknown>,
  runAt?: Date,
): Promise<void> {
  await tx.query(`INSERT INTO jobs (queue, payload, run_at) VALUES ($1, $2::jsonb, coalesce($3::timestamptz, now()))`, [
    queue,
    JSON.stringify(payload),
    runAt ?? null,
  ]);
}
