import type { Logger } from '../platform/logger.ts';
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import { startWorker, type Worker, type WorkerOptions } from '../queue/worker.ts';
import { loadSigner } from '../platform/signing.ts';
import { deliverEmailHandler } from './deliver-email.ts';
import { deliveryFailed } from './delivery-failed.ts';
import { DELIVERY_QUEUE } from '../emails/delivery-job.ts';
import type { Transport } from './transport.ts';

/** Polling interval: a lost NOTIFY, or a scheduled message coming due, waits at most this long. */
export const POLL_INTERVAL_MS = 250;

/** The delivery worker's options: its pace, and what a job that fails for good records (delivery-failed.ts). */
export function deliveryWorkerOptions(config: Config, log: Pick<Logger, 'error' | 'warn'>): WorkerOptions {
  return {
    concurrency: config.workerConcurrency,
    leaseSeconds: config.jobLeaseSeconds,
    pollIntervalMs: POLL_INTERVAL_MS,
    log,
    maxAttempts: config.jobMaxAttempts,
    failed: { [DELIVERY_QUEUE]: deliveryFailed },
  };
}

/** Starts this process's delivery worker; `stop()` lets the messages in flight finish. */
export async function startDelivery(
  db: Database,
  config: Config,
  transport: Transport,
  log: Pick<Logger, 'error' | 'warn'>,
): Promise<Worker> {
  return startWorker(
    db,
    { [DELIVERY_QUEUE]: deliverEmailHandler(db, config, transport, await loadSigner(db)) },
    deliveryWorkerOptions(config, log),
  );
}
