import type { Database, Queryable } from '../platform/db/database.ts';

/** Queues of background work. */
export type QueueName = 'deliver-email' | 'deliver-webhook';

/** The channel workers LISTEN on; a NOTIFY wakes them before their next poll. */
export const JOBS_CHANNEL = 'mailroom_jobs';

/**
 * Adds a job, to run at `runAt` (now when absent). Call it inside the transaction whose change the job
 * acts on: the job exists exactly when that change committed. Then call wakeWorkers after the commit.
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

// NOTIFY is not sent inside the accepting transaction: PostgreSQL serialises the commits of every
// transaction that notifies, which would cap accepted sends per second. One NOTIFY after the commit,
// at most one per process every 20 ms, wakes the workers just as well; their polling covers a lost one.
const WAKE_INTERVAL_MS = 20;
const lastWake = new WeakMap<Database, { at: number; pending: boolean }>();

/** Wakes the workers (in any process) to look for jobs now. Fire and forget. */
export function wakeWorkers(db: Database): void {
  const state = lastWake.get(db) ?? { at: 0, pending: false };
  lastWake.set(db, state);
  if (state.pending) return;
  const wait = Math.max(0, state.at + WAKE_INTERVAL_MS - Date.now());
  state.pending = true;
  setTimeout(() => {
    state.pending = false;
    state.at = Date.now();
    db.query('SELECT pg_notify($1, $2)', [JOBS_CHANNEL, '']).catch(() => {});
  }, wait).unref();
}
