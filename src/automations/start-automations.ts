import type { Logger } from '../platform/logger.ts';
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import { startWorker, type Worker } from '../queue/worker.ts';
import { eventJobHandler } from './process-event.ts';
import { stepJobFailed, stepJobHandler } from './step-jobs.ts';

/**
 * Event and step jobs held at once per process. The jobs running at once are done together, a batch of
 * events and one of steps at a time (process-event.ts, step-jobs.ts): the more a claim takes, the fewer
 * claims, transactions and statements for the same work.
 */
const CONCURRENCY = 1000;
/** A lost NOTIFY delays an event or a step by at most this. */
const POLL_INTERVAL_MS = 1000;

export interface AutomationOptions {
  /** The engine's clock (tests of long delays); the real one otherwise. */
  clock?: () => Date;
}

/**
 * Starts this process's automation worker: it processes the events applications send and runs the steps
 * of automation runs. `stop()` waits for the jobs running to finish; a job cut short by a crash runs
 * again when its lease ends, and does only what it had not done (step-jobs.ts).
 */
export async function startAutomations(
  db: Database,
  config: Config,
  log: Pick<Logger, 'error' | 'warn'>,
  options: AutomationOptions = {},
): Promise<Worker> {
  const clock = options.clock ?? (() => new Date());
  const context = { db, config, clock };
  return startWorker(
    db,
    // Steps first: a claim serves its queues in this order, and the runs already started go on before new
    // events start more (a burst of events would otherwise hold up every started run's sends).
    { 'automation-step': stepJobHandler(context), 'automation-event': eventJobHandler(context) },
    {
      concurrency: CONCURRENCY,
      leaseSeconds: config.jobLeaseSeconds,
      pollIntervalMs: POLL_INTERVAL_MS,
      log,
      maxAttempts: config.jobMaxAttempts,
      failed: { 'automation-step': stepJobFailed },
      ...(options.clock ? { clock: options.clock } : {}),
    },
  );
}
