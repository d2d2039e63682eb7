import type { Logger } from '../platform/logger.ts';
import type { Database } from '../platform/db/database.ts';
import { listenOrPoll } from '../platform/db/listening.ts';
import { workerBatchSize } from '../platform/metrics.ts';
import { JOBS_CHANNEL, type QueueName } from './jobs.ts';
import { claimFailureLog } from './claim-failures.ts';
import {
  CLAIMED,
  claimableBy,
  jobOf,
  LEASE,
  runJob,
  type ClaimedRow,
  type FailedJobHook,
  type Job,
  type JobResult,
} from './leases.ts';

export type { FailedJobHook, Job, JobResult } from './leases.ts';
export { PermanentJobError } from './failures.ts';

// A worker claims due jobs with FOR UPDATE SKIP LOCKED (so several workers, in several processes, never
// take the same job), under a short lease that it renews every third of the lease while the job runs:
// a job whose worker died (or lost the database) returns to the queue when the lease ends, within one
// lease, however long a job of a live worker takes. It wakes on NOTIFY and polls as well, so a lost
// notification costs at most one poll interval. Due jobs are claimed in turn across the organizations
// they work for (their share key), not strictly oldest first: a burst from one does not hold up another.

export type JobHandler = (job: Job) => Promise<JobResult>;

export interface WorkerOptions {
  /** Jobs run at the same time by this worker. */
  concurrency: number;
  /** How long a claim lasts unless renewed; renewed every third of it while the job runs. */
  leaseSeconds: number;
  pollIntervalMs: number;
  log: Pick<Logger, 'error' | 'warn'>;
  /** Failed runs (database outages aside) before a job fails for good: MAILROOM_JOB_MAX_ATTEMPTS. */
  maxAttempts?: number;
  /** Per queue, the hook that records a job's failure for good on what it acts on. */
  failed?: Partial<Record<QueueName, FailedJobHook>>;
  /**
   * The time jobs are due by: the database's clock when absent. Tests of long delays give one, so that a
   * job due in 30 days runs when the test's clock says 30 days have passed.
   */
  clock?: () => Date;
}

/** A batch-job worker's options: those of a worker, with its one queue's hook. */
export type BatchJobWorkerOptions = Omit<WorkerOptions, 'failed'> & { failed?: FailedJobHook };

export interface Worker {
  /** Claims no more jobs, waits for those running to finish. */
  stop(): Promise<void>;
  /** Looks for due jobs now (tests and wake-ups). */
  poke(): void;
}

/**
 * A worker of one queue whose jobs are long, going batch after batch (a broadcast's fan-out, a contact
 * import). `stop()` first tells the running jobs to end after the batch in flight (`stopping()` turns
 * true; a job then gives itself back, due at once, to go on here or in another process), then waits for
 * them: a stop is not held for as long as a whole job takes.
 */
export async function startBatchJobWorker(
  db: Database,
  queue: QueueName,
  handlerFor: (stopping: () => boolean) => JobHandler,
  options: BatchJobWorkerOptions,
): Promise<Worker> {
  let stopping = false;
  const worker = await startWorker(
    db,
    { [queue]: handlerFor(() => stopping) },
    { ...options, failed: options.failed && { [queue]: options.failed } },
  );
  return {
    poke: () => worker.poke(),
    async stop() {
      stopping = true;
      await worker.stop();
    },
  };
}

export async function startWorker(
  db: Database,
  handlers: Partial<Record<QueueName, JobHandler>>,
  options: WorkerOptions,
): Promise<Worker> {
  const queues = Object.keys(handlers);
  const minimumClaim = Math.max(1, Math.floor(options.concurrency / 5));
  /** The jobs running now, whose leases the heartbeat renews. */
  const runningJobs = new Set<Job>();
  const cursors: Cursors = new Map();
  let running = 0;
  let stopping = false;
  let claiming = false;
  let claimAgain = false;
  let idle: (() => void) | undefined;
  const claimFailures = claimFailureLog(options.log);

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
          const dueBy = options.clock?.() ?? null;
          const jobs = await claim(db, queues, options.concurrency - running, options.leaseSeconds, cursors, dueBy);
          if (jobs.length === 0) break;
          for (const job of jobs) void run(job);
        }
      } while (claimAgain && !stopping);
      claimFailures.succeeded();
    } catch (error) {
      claimFailures.failed(error);
    } finally {
      claiming = false;
    }
  };

  const run = async (job: Job) => {
    running += 1;
    runningJobs.add(job);
    await runJob(
      db,
      job,
      () => handlers[job.queue]!(job),
      options.log,
      () => void claimAndRun(),
      { maxAttempts: options.maxAttempts, failed: options.failed?.[job.queue] },
    );
    runningJobs.delete(job);
    running -= 1;
    if (running === 0) idle?.();
    void claimAndRun();
  };

  const heartbeat = setInterval(
    () =>
      void renewLeases(db, [...runningJobs], options.leaseSeconds).catch((error: unknown) =>
        options.log.warn({ err: error }, 'could not renew the leases of running jobs'),
      ),
    (options.leaseSeconds * 1000) / 3,
  );
  const unlisten = await listenOrPoll(db, JOBS_CHANNEL, () => void claimAndRun());
  const timer = setInterval(() => void claimAndRun(), options.pollIntervalMs);
  void claimAndRun();

  return {
    poke: () => void claimAndRun(),
    async stop() {
      stopping = true;
      clearInterval(timer);
      await unlisten();
      if (running > 0) await new Promise<void>((resolve) => (idle = resolve));
      clearInterval(heartbeat);
    },
  };
}

/** Extends the leases of jobs still held under the lease they were claimed with; their ends move on too. */
async function renewLeases(db: Database, jobs: Job[], leaseSeconds: number): Promise<void> {
  if (jobs.length === 0) return;
  // Taken before the statement, so the lease as reckoned here never outlasts the one in the database.
  const leaseEndsAt = Date.now() + leaseSeconds * 1000;
  const { rows } = await db.query<{ id: string }>(
    `UPDATE jobs SET locked_until = now() + make_interval(secs => $3)
      WHERE id = ANY($1::bigint[]) AND lease_id = ANY($2::uuid[]) RETURNING id`,
    [jobs.map((job) => job.id), jobs.map((job) => job.leaseId), leaseSeconds],
  );
  const renewed = new Set(rows.map((row) => Number(row.id)));
  for (const job of jobs) if (renewed.has(job.id)) job.leaseEndsAt = leaseEndsAt;
}

/**
 * Where each queue's turns have got to: the share key served last. The next claim starts after it, so
 * that with more keys due than a claim takes, every key gets its turn (round robin), not only the keys
 * whose jobs are oldest.
 */
type Cursors = Map<string, string>;

async function claim(
  db: Database,
  queues: string[],
  limit: number,
  leaseSeconds: number,
  cursors: Cursors,
  dueBy: Date | null,
): Promise<Job[]> {
  const jobs: Job[] = [];
  for (const queue of queues) {
    // A key with fewer due jobs than its share leaves slots over: they go to the other keys at once.
    for (let pass = 0; pass < 3 && jobs.length < limit; pass++) {
      let claimed: Job[];
      try {
        claimed = await claimShared(db, queue, limit - jobs.length, leaseSeconds, cursors, dueBy);
      } catch (error) {
        // Jobs claimed by an earlier statement are this worker's now: they run, whatever this one met
        // (left unrun, they would wait for their lease to run out).
        if (jobs.length === 0) throw error;
        break;
      }
      jobs.push(...claimed);
      if (claimed.length === 0) break;
    }
  }
  if (jobs.length > 0) workerBatchSize.observe({ batch: 'claim-jobs' }, jobs.length);
  return jobs;
}

/**
 * Claims up to `limit` due jobs of a queue, shared out between the keys (organizations) that have due
 * jobs: the next `limit` keys at most after the queue's cursor (wrapping round), each an equal part, its
 * oldest due jobs first. Jobs another worker is claiming right now are skipped, not waited for.
 */
async function claimShared(
  db: Database,
  queue: string,
  limit: number,
  leaseSeconds: number,
  cursors: Cursors,
  dueBy: Date | null,
): Promise<Job[]> {
  // Taken before the claim, so the lease as reckoned here never outlasts the one in the database.
  const leaseEndsAt = Date.now() + leaseSeconds * 1000;
  const cursor = cursors.get(queue) ?? '';
  // The keys come from a skip scan of the (queue, share_key, run_at, id) index, one probe per key, and
  // each key's due jobs from the same index, oldest first. Only the keys that can get a slot are locked
  // from: at most `limit` of them, the first after the cursor. Whether a key has a claimable job is a
  // scalar subquery with LIMIT 1, not EXISTS: PostgreSQL plans an EXISTS here as a hash semi-join over
  // every due job of the queue (4 ms a claim with 15,000 due), where one index probe per key will do.
  const { rows } = await db.query<ClaimedRow & { share_key: string }>(
    `WITH RECURSIVE share_keys AS (
       (SELECT share_key FROM jobs WHERE queue = $1 ORDER BY share_key LIMIT 1)
       UNION ALL
       SELECT (SELECT next.share_key FROM jobs next
                WHERE next.queue = $1 AND next.share_key > share_keys.share_key ORDER BY next.share_key LIMIT 1)
         FROM share_keys WHERE share_keys.share_key IS NOT NULL
     ),
     due_keys AS (
       SELECT share_key FROM share_keys
        WHERE share_key IS NOT NULL
          AND (SELECT true FROM jobs WHERE queue = $1 AND jobs.share_key = share_keys.share_key AND ${claimableBy('$5')}
                LIMIT 1)
        ORDER BY share_key <= $4, share_key LIMIT $2
     ),
     shares AS (
       SELECT due.id, due.run_at, due_keys.share_key FROM due_keys, LATERAL (
         SELECT id, run_at FROM jobs WHERE queue = $1 AND jobs.share_key = due_keys.share_key AND ${claimableBy('$5')}
          ORDER BY run_at, id LIMIT ceil($2::float8 / (SELECT count(*) FROM due_keys)) FOR UPDATE SKIP LOCKED
       ) due
     ),
     picked AS (
       SELECT id FROM shares
        ORDER BY row_number() OVER (PARTITION BY share_key ORDER BY run_at, id), share_key <= $4, share_key LIMIT $2
     )
     UPDATE jobs SET ${LEASE} WHERE id = ANY(ARRAY(SELECT id FROM picked)) ${CLAIMED}, share_key`,
    [queue, limit, leaseSeconds, cursor, dueBy],
  );
  // The cursor moves to the last key served, in the order served (after the cursor first, then from the start).
  const keys = [...new Set(rows.map((row) => row.share_key))].sort();
  const last = keys.filter((key) => key <= cursor).at(-1) ?? keys.at(-1);
  if (last !== undefined) cursors.set(queue, last);
  return rows.map((row) => jobOf(row, leaseEndsAt));
}
