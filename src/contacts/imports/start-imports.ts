import type { Logger } from '../../platform/logger.ts';
import type { Config } from '../../platform/config.ts';
import type { Database } from '../../platform/db/database.ts';
import { startBatchJobWorker, type Worker } from '../../queue/worker.ts';
import { IMPORT_QUEUE } from './contact-imports.ts';
import { contactImportHandler, importFailed } from './run-import.ts';

/** Imports at once per process: each is one long job writing batch after batch. */
const CONCURRENCY = 2;
/** A lost NOTIFY delays an import's start by at most this. */
const POLL_INTERVAL_MS = 1000;

/**
 * Starts this process's contact-import worker. `stop()` does not wait for a large import to end: each
 * running import stops after its current batch and its job goes back to the queue, to resume there.
 */
export async function startContactImports(
  db: Database,
  config: Config,
  log: Pick<Logger, 'error' | 'warn'>,
): Promise<Worker> {
  return startBatchJobWorker(db, IMPORT_QUEUE, (stopping) => contactImportHandler(db, stopping), {
    concurrency: CONCURRENCY,
    leaseSeconds: config.jobLeaseSeconds,
    pollIntervalMs: POLL_INTERVAL_MS,
    log,
    maxAttempts: config.jobMaxAttempts,
    failed: importFailed,
  });
}
