import type { Logger } from '../platform/logger.ts';
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import { loadSigner } from '../platform/signing.ts';
import { isUuid } from '../platform/ids.ts';
import { cappedText } from '../platform/text.ts';
import { startBatchJobWorker, type BatchJobWorkerOptions, type FailedJobHook, type Worker } from '../queue/worker.ts';
import { fanOutHandler } from './fan-out.ts';
import { FAN_OUT_QUEUE } from './send-broadcast.ts';

/** Fan-out jobs one process runs at once: each writes copies batch after batch, so a few keep up. */
const FAN_OUT_CONCURRENCY = 2;
/** A scheduled broadcast coming due, or a lost NOTIFY, waits at most this long. */
const POLL_INTERVAL_MS = 1000;

/**
 * Starts this process's broadcast fan-out worker, where the delivery worker runs. `stop()` ends each
 * running fan-out after its batch in flight (the job runs again at once, here or in another process):
 * a broadcast of 100,000 contacts does not hold a stop for as long as its fan-out takes.
 */
export async function startBroadcastFanOut(
  db: Database,
  config: Config,
  log: Pick<Logger, 'error' | 'warn'>,
): Promise<Worker> {
  const signer = await loadSigner(db);
  return startBatchJobWorker(
    db,
    FAN_OUT_QUEUE,
    (stopping) => fanOutHandler({ db, config, signer, stopping }),
    fanOutWorkerOptions(config, log),
  );
}

/** The fan-out worker's settings, and its hook for a fan-out job that failed for good (fanOutFailed). */
export function fanOutWorkerOptions(config: Config, log: Pick<Logger, 'error' | 'warn'>): BatchJobWorkerOptions {
  return {
    concurrency: FAN_OUT_CONCURRENCY,
    leaseSeconds: config.jobLeaseSeconds,
    pollIntervalMs: POLL_INTERVAL_MS,
    log,
    maxAttempts: config.jobMaxAttempts,
    failed: fanOutFailed,
  };
}

/**
 * The kind's hook for a fan-out job failed for good (its run threw MAILROOM_JOB_MAX_ATTEMPTS times): its
 * broadcast, still scheduled or queued, is `failed` with the reason as its `failure_reason`, as one whose
 * segment was deleted fails, instead of reading queued for ever. Copies made before are still sent;
 * recipients without one stay pending. A paused broadcast stays paused (resuming starts a new job).
 */
export const fanOutFailed: FailedJobHook = async (tx, job, reason) => {
  const broadcastId = job.payload.broadcast_id;
  if (typeof broadcastId !== 'string' || !isUuid(broadcastId)) return;
  await tx.query(
    `UPDATE broadcasts SET status = 'failed', failure_reason = $2, updated_at = now()
      WHERE id = $1 AND status IN ('scheduled', 'queued')`,
    [broadcastId, cappedText(reason, 1000)],
  );
};
