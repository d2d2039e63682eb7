import type { Logger } from '../platform/logger.ts';
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import { loadSigner } from '../platform/signing.ts';
import { startBatchJobWorker, type Worker } from '../queue/worker.ts';
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
  return startBatchJobWorker(db, FAN_OUT_QUEUE, (stopping) => fanOutHandler({ db, config, signer, stopping }), {
    concurrency: FAN_OUT_CONCURRENCY,
    leaseSeconds: config.jobLeaseSeconds,
    pollIntervalMs: POLL_INTERVAL_MS,
    log,
    maxAttempts: config.jobMaxAttempts,
  });
}
