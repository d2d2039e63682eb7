import type { Logger } from '../platform/logger.ts';
import { retryWhileUnreachable, type Database } from '../platform/db/database.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import { workerBatchSize } from '../platform/metrics.ts';
import { JOBS_CHANNEL, type QueueName } from './jobs.ts';

// A worker claims due jobs with FOR UPDATE SKIP LOCKED (so several workers, in several processes, never
// take the same job), under a lease: a job whose worker died returns to the queue when the lease ends.
// It wakes on NOTIFY and polls as well, so a lost notification costs at most one poll interval.

export interface Job {
  id: number;
  queue: QueueName;
  payload: Record<string, unknown>;
  /** How many times the job has been claimed, this claim included. */
  attempts: number;
  /** The group it belongs to (a webhook endpoint), if any. */
  groupKey: string | null;
  leaseId: string;
  /** When the claim ends (epoch ms, by this process's clock): after it, another worker may take the job. */
  leaseEndsAt: number;
}

/** What a handler decides: the job is finished, or should run again at `retryAt`. */
export type JobResult = { done: true } | { retryAt: Date; reason: string };

export type JobHandler = (job: Job) => Promise<JobResult>;

export interface WorkerOptions {
  /** Jobs run at the same time by this worker. */
  concurrency: number;
  /** How long a claim lasts: longer than any job can take. */
  leaseSeconds: number;
  pollIntervalMs: number;
  /** Jobs of one group_key (a webhook endpoint) running at once, across all workers. */
  groupLimit?: number;
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
        while (!stopping && running < options.concurrency) {
          const jobs = await claim(db, queues, options.concurrency - running, options.leaseSeconds, options.groupLimit);
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

  // Finishing or rescheduling a job is retried while the database is unreachable, up to the end of the
  // lease: otherwise a job handled during an outage would stay claimed, untouched, until its lease ran out.
  const settle = <T>(write: () => Promise<T>, job: Job) => retryWhileUnreachable(write, job.leaseEndsAt);

  const run = async (job: Job) => {
    running += 1;
    let result: JobResult;
    try {
      result = await handlers[job.queue]!(job);
    } catch (error) {
      // The handler failed (the database went away, a bug): try again later, backing off to 5 minutes.
      options.log.error({ err: error, jobId: job.id, queue: job.queue }, 'job failed');
      const delay = Math.min(300, 2 ** Math.min(job.attempts, 9));
      result = { retryAt: new Date(Date.now() + delay * 1000), reason: String(error) };
    }
    let next: Job | undefined;
    try {
      if ('done' in result && job.groupKey !== null && options.groupLimit !== undefined && !stopping) {
        // The job's slot in its group goes straight to the group's next due job, in one statement.
        next = await settle(() => finishAndTakeNext(db, job, options.leaseSeconds), job);
      } else if ('done' in result) await settle(() => finish(db, job), job);
      else {
        const { retryAt, reason } = result;
        await settle(() => retry(db, job, retryAt, reason), job);
        wakeAt(retryAt);
      }
    } catch (error) {
      // Still unreachable at the end of the lease: the job comes back as a dead worker's would.
      options.log.error({ err: error, jobId: job.id, queue: job.queue }, 'could not settle job');
    } finally {
      if (next) void run(next); // counted as running before this job stops counting
      running -= 1;
      if (running === 0) idle?.();
      void claimAndRun();
    }
  };

  // A retry due soon (webhook attempts 1, 2, 4, 8 s apart) is looked for at its time, not at the next poll.
  const wakeAt = (at: Date) => {
    const delay = at.getTime() - Date.now();
    if (delay < 60_000) setTimeout(() => void claimAndRun(), Math.max(0, delay)).unref();
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

const CLAIMED = 'RETURNING id, queue, payload, attempts, lease_id, group_key';
const CLAIMABLE = 'queue = ANY($1::text[]) AND run_at <= now() AND (locked_until IS NULL OR locked_until < now())';
const LEASE = 'locked_until = now() + make_interval(secs => $3), attempts = attempts + 1, lease_id = gen_random_uuid()';

async function claim(
  db: Database,
  queues: string[],
  limit: number,
  leaseSeconds: number,
  groupLimit: number | undefined,
): Promise<Job[]> {
  // Taken before the claim, so the lease as reckoned here never outlasts the one in the database.
  const leaseEndsAt = Date.now() + leaseSeconds * 1000;
  const { rows } = await db.query<ClaimedRow>(
    groupLimit === undefined
      ? // The oldest due jobs, straight from the (queue, run_at) index; jobs another worker is claiming
        // right now are skipped, not waited for.
        `UPDATE jobs SET ${LEASE}
          WHERE id IN (SELECT id FROM jobs WHERE ${CLAIMABLE} ORDER BY run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
          ${CLAIMED}`
      : // Groups (webhook endpoints) already running their limit are left out before the window of oldest
        // due jobs is taken, so a dead endpoint's backlog cannot fill the window and starve the others; in
        // the window, a group's n-th job qualifies while its running jobs plus n stay within the limit.
        // The claimability test is repeated in the locking SELECT: PostgreSQL re-checks that WHERE on the
        // newest row version after a lock wait, so a job another worker claimed meanwhile is skipped.
        // (This window costs a sort per claim: workers without groups take the plain claim above.)
        `WITH running AS (
           SELECT group_key, count(*) AS n FROM jobs
            WHERE group_key IS NOT NULL AND locked_until > now() GROUP BY group_key
         ),
         oldest AS (
           SELECT id, group_key, run_at FROM jobs
            WHERE ${CLAIMABLE}
              AND (group_key IS NULL OR group_key NOT IN (SELECT group_key FROM running WHERE n >= $4))
            ORDER BY run_at, id LIMIT 1000
         ),
         due AS (
           SELECT oldest.id, oldest.group_key,
                  row_number() OVER (PARTITION BY oldest.group_key ORDER BY oldest.run_at, oldest.id)
                    + coalesce(running.n, 0) AS slot
             FROM oldest LEFT JOIN running ON running.group_key = oldest.group_key
         )
         UPDATE jobs SET ${LEASE}
          WHERE id IN (
            SELECT id FROM jobs
             WHERE ${CLAIMABLE} AND id IN (SELECT id FROM due WHERE group_key IS NULL OR slot <= $4)
             ORDER BY run_at, id LIMIT $2
             FOR UPDATE SKIP LOCKED)
          ${CLAIMED}`,
    groupLimit === undefined ? [queues, limit, leaseSeconds] : [queues, limit, leaseSeconds, groupLimit],
  );
  return rows.map((row) => jobOf(row, leaseEndsAt));
}

interface ClaimedRow {
  id: number;
  queue: QueueName;
  payload: Record<string, unknown>;
  attempts: number;
  lease_id: string;
  group_key: string | null;
}

const jobOf = (row: ClaimedRow, leaseEndsAt: number): Job => ({
  id: Number(row.id),
  queue: row.queue,
  payload: row.payload,
  attempts: row.attempts,
  groupKey: row.group_key,
  leaseId: row.lease_id,
  leaseEndsAt,
});

/**
 * Deletes a finished job of a group and, in the same statement, claims the group's oldest due job: the
 * group's count of running jobs never changes, so its limit holds exactly, and a busy group (an endpoint
 * with a backlog) is fed without a claim over every group per job. Only when the finished job's lease
 * was still this worker's: otherwise its slot is not this worker's to hand on.
 */
async function finishAndTakeNext(db: Database, job: Job, leaseSeconds: number): Promise<Job | undefined> {
  const leaseEndsAt = Date.now() + leaseSeconds * 1000;
  const { rows } = await db.query<ClaimedRow>(
    `WITH finished AS (
       DELETE FROM jobs WHERE id = $4 AND lease_id = $5 RETURNING id
     )
     UPDATE jobs SET ${LEASE}
      WHERE EXISTS (SELECT 1 FROM finished)
        AND id = (SELECT id FROM jobs
                   WHERE group_key = $2 AND ${CLAIMABLE} AND id <> $4
                   ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
      ${CLAIMED}`,
    [[job.queue], job.groupKey, leaseSeconds, job.id, job.leaseId],
  );
  return rows[0] ? jobOf(rows[0], leaseEndsAt) : undefined;
}

/** Jobs deleted by one statement at most. */
const MAX_FINISHED_AT_ONCE = 1000;

// Jobs that finish while a delete is in flight are deleted together by the next one.
const finisher = batcherPerDatabase<Job, void>({
  transaction: false,
  maxSize: MAX_FINISHED_AT_ONCE,
  done: (items) => workerBatchSize.observe({ batch: 'finish-jobs' }, items),
  async run(db, jobs) {
    await db.query('DELETE FROM jobs WHERE (id, lease_id) IN (SELECT * FROM unnest($1::bigint[], $2::uuid[]))', [
      jobs.map((job) => job.id),
      jobs.map((job) => job.leaseId),
    ]);
    return jobs.map(() => undefined);
  },
});

/** Deletes a finished job, unless its lease ended and another worker holds it now. */
function finish(db: Database, job: Job): Promise<void> {
  return finisher(db).add(job);
}

async function retry(db: Database, job: Job, at: Date, reason: string): Promise<void> {
  await db.query(
    'UPDATE jobs SET run_at = $3, locked_until = NULL, lease_id = NULL, last_error = $4 WHERE id = $1 AND lease_id = $2',
    [job.id, job.leaseId, at, reason.slice(0, 1000)],
  );
}
