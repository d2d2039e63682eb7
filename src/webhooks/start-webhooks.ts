import type { Logger } from '../platform/logger.ts';
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import type { Worker } from '../queue/worker.ts';
import { startGroupedWorker, type GroupedWorkerOptions } from '../queue/grouped-worker.ts';
import { createSafeDispatcher } from './safe-dispatcher.ts';
import { webhookDeliveryFailed, webhookHandler } from './webhook-sender.ts';
import { WEBHOOK_QUEUE } from './delivery-jobs.ts';

/** Webhook deliveries in flight per process, across all endpoints. */
export const WEBHOOK_CONCURRENCY = 64;

/** The webhook worker's settings, and its hook for a delivery whose job failed for good (webhookDeliveryFailed). */
export function webhookWorkerOptions(config: Config, log: Pick<Logger, 'error' | 'warn'>): GroupedWorkerOptions {
  return {
    queue: WEBHOOK_QUEUE,
    groupLimit: config.webhookConnectionsPerEndpoint,
    concurrency: WEBHOOK_CONCURRENCY,
    jobSeconds: Math.ceil(config.webhookTimeoutMs / 1000),
    pollIntervalMs: 250,
    log,
    maxAttempts: config.jobMaxAttempts,
    failed: webhookDeliveryFailed,
  };
}

/**
 * Starts this process's webhook worker: its own slots (a slow endpoint never takes email delivery's),
 * at most MAILROOM_WEBHOOK_CONNECTIONS_PER_ENDPOINT requests in flight per endpoint across all workers
 * (an endpoint's deliveries are run by one worker at a time, fed from memory from batches it claims).
 */
export async function startWebhookDelivery(
  db: Database,
  config: Config,
  log: Pick<Logger, 'error' | 'warn'>,
): Promise<Worker & { close(): Promise<void> }> {
  const dispatcher = createSafeDispatcher(config, { connectionsPerOrigin: config.webhookConnectionsPerEndpoint });
  const worker = await startGroupedWorker(db, webhookHandler(db, dispatcher), webhookWorkerOptions(config, log));
  return {
    ...worker,
    async close() {
      await worker.stop();
      await dispatcher.close();
    },
  };
}
