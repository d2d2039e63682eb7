import type { Logger } from '../platform/logger.ts';
import type { Database } from '../platform/db/database.ts';
import { workerBatchSize } from '../platform/metrics.ts';
import { JOBS_CHANNEL, type QueueName } from './jobs.ts';
import { CLAIMABLE, CLAIMED, jobOf, LEASE, runJob, type ClaimedRow, type Job, type JobResult } from './leases.ts';

export type { Job, JobResult } from './leases.ts';

// A worker claims due jobs with FOR UPDATE SKIP LOCKED (so several workers, in several processes, never
// take the same job), under a lease: a job whose worker died returns to the queue when the lease ends.
// It wakes on NOTIFY and polls as well, so a lost notification costs at most one poll interval.

export type JobHandler = (job: Job) => Promise<JobResult>;

export interface WorkerOptions {
  /** Jobs run at the same time by this worker. */
  concurrency: number;
  /** How long a claim lasts: longer than any job can take. */
  leaseSeconds: number;
  pollIntervalMs: number;
  log: Pick<Logger, 'error' | 'warn'>;
}

export interface Worker {
  /** Claims no more jobs, waits for those running to finish. */
  stop(): Promise<void>;
  /** Looks for due jobs now (tests and wake-ups). */
  poke(): void;
}

export async function startWorker(
  db: Database,
  handlers: Partial<Record<QueueName, JobHandler>>,
  options: WorkerOptions,
): Promise<Worker> {
  const queues = Object.keys(handlers);
  const minimumClaim = Math.max(1, Math.floor(options.concurrency / 5));
  let running = 0;
  let stopping = false;
  let claiming = false;
  let claimAgain = false;
  let idle: (() => void) | undefined;

  const claimAndRun = async () => {
    if (stopping) return;
    if (claiming) {
      claimAgain = true;
      return;
    }
    claiming = true;
    try {
      do {
        claimAgain = false;
        // While jobs run, a claim waits until a fifth of the slots are free: a few larger claims (and
        // the larger batches of the steps their jobs run together) instead of one per finished job.
        while (!stopping && options.concurrency - running >= (running === 0 ? 1 : minimumClaim)) {
          const jobs = await claim(db, queues, options.concurrency - running, options.leaseSeconds);
          if (jobs.length === 0) break;
          for (const job of jobs) void run(job);
        }
      } while (claimAgain && !stopping);
    } catch (error) {
      options.log.error({ err: error }, 'could not claim jobs');
    } finally {
      claiming = false;
    }
  };

  const run = async (job: Job) => {
    running += 1;
    await runJob(
      db,
      job,
      () => handlers[job.queue]!(job),
      options.log,
      () => void claimAndRun(),
    );
    running -= 1;
    if (running === 0) idle?.();
    void claimAndRun();
  };

  const unlisten = await db.listen(JOBS_CHANNEL, () => void claimAndRun());
  const timer = setInterval(() => void claimAndRun(), options.pollIntervalMs);
  void claimAndRun();

  return {
    poke: () => void claimAndRun(),
    async stop() {
      stopping = true;
      clearInterval(timer);
      await unlisten();
      if (running > 0) await new Promise<void>((resolve) => (idle = resolve));
    },
  };
}

async function claim(db: Database, queues: string[], limit: number, leaseSeconds: number): Promise<Job[]> {
  // Taken before the claim, so the lease as reckoned here never outlasts the one in the database.
  const leaseEndsAt = Date.now() + leaseSeconds * 1000;
  // The oldest due jobs, straight from the (queue, run_at) index; jobs another worker is claiming right
  // now are skipped, not waited for.
  const { rows } = await db.query<ClaimedRow>(
    `UPDATE jobs SET ${LEASE}
      WHERE id IN (SELECT id FROM jobs WHERE queue = ANY($1::text[]) AND ${CLAIMABLE} ORDER BY run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
      ${CLAIMED}`,
    [queues, limit, leaseSeconds],
  );
  if (rows.length > 0) workerBatchSize.observe({ batch: 'claim-jobs' }, rows.length);
  return rows.map((row) => jobOf(row, leaseEndsAt));
}
