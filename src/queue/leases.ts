import type { Logger } from '../platform/logger.ts';
import {
  isConnectionLost,
  retryWhileUnreachable,
  waitedTooLong,
  type Database,
  type Queryable,
} from '../platform/db/database.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import { workerBatchSize } from '../platform/metrics.ts';
import type { QueueName } from './jobs.ts';
import { DEFAULT_MAX_ATTEMPTS, markJobFailed, PermanentJobError } from './failures.ts';

// What both workers (worker.ts, and grouped-worker.ts for jobs run per group) share: a claimed job
// under its lease, and how it is settled. A claim sets a new lease_id; finishing or rescheduling a job
// acts only while that lease_id is still the job's, so a worker whose lease ran out (and whose job
// another worker has claimed since) changes nothing.

export interface Job {
  id: number;
  queue: QueueName;
  payload: Record<string, unknown>;
  /** How many times the job has been claimed, this claim included. */
  attempts: number;
  /** Its runs so far that ended in an error (database outages aside). */
  failedRuns: number;
  /** The group it belongs to (a webhook endpoint), if any. */
  groupKey: string | null;
  leaseId: string;
  /** When the claim ends (epoch ms, by this process's clock): after it, another worker may take the job. */
  leaseEndsAt: number;
}

/**
 * What a handler decides: the job is finished, or should run again at `retryAt`. `settled` says the
 * handler has already written that to the job, in the statement that recorded what the job did
 * (settleJobsFrom): the worker then writes nothing more.
 */
export type JobResult = ({ done: true } | { retryAt: Date; reason: string }) & { settled?: true };

/** `SET` list of a claim: `$3` is the lease in seconds. */
export const LEASE =
  'locked_until = now() + make_interval(secs => $3), attempts = attempts + 1, lease_id = gen_random_uuid()';
/** A job nobody holds (never claimed, or its lease ran out) and due. */
export const CLAIMABLE = 'run_at <= now() AND (locked_until IS NULL OR locked_until < now()) AND failed_at IS NULL';
/**
 * CLAIMABLE, with the time jobs are due by given as the parameter `param` (a timestamptz, or NULL for the
 * database's clock): how a worker given its own clock (tests of long delays) sees jobs due.
 */
export const claimableBy = (param: string) =>
  `run_at <= coalesce(${param}::timestamptz, now()) AND (locked_until IS NULL OR locked_until < now()) AND failed_at IS NULL`;
export const CLAIMED = 'RETURNING id, queue, payload, attempts, lease_id, group_key, failed_runs';

export interface ClaimedRow {
  id: number;
  queue: QueueName;
  payload: Record<string, unknown>;
  attempts: number;
  lease_id: string;
  group_key: string | null;
  failed_runs: number | null;
}

/** `leaseEndsAt` is taken before the claim, so the lease as reckoned here never outlasts the database's. */
export const jobOf = (row: ClaimedRow, leaseEndsAt: number): Job => ({
  id: Number(row.id),
  queue: row.queue,
  payload: row.payload,
  attempts: row.attempts,
  failedRuns: row.failed_runs ?? 0,
  groupKey: row.group_key,
  leaseId: row.lease_id,
  leaseEndsAt,
});

/**
 * When a job whose handler threw runs again. A bug backs off, doubling per failed run up to 5 minutes. The
 * database being unreachable or too busy to answer says nothing about the job: it runs again a second
 * later, and its claims so far do not push it further out. Otherwise the jobs a worker took while the
 * database was coming back (a restart, a network cut) would each have waited 2, 4, 8, 16 s and more
 * after it was back. While the database stays away, claims fail too, which paces the retries.
 */
export function failedJobDelayMs(error: unknown, failedRuns: number): number {
  if (isOutage(error)) return DATABASE_RETRY_MS;
  return Math.min(300, 2 ** Math.min(failedRuns, 9)) * 1000;
}

const isOutage = (error: unknown) => isConnectionLost(error) || waitedTooLong(error);

const DATABASE_RETRY_MS = 1000;

/** What a kind of job does with its errors. */
export interface FailurePolicy {
  /** Failed runs (database outages aside) before the job fails for good (default DEFAULT_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /**
   * The kind's hook: records why the job failed for good on what it acts on (an import: `failed` with
   * its reason), in the transaction that marks the job failed.
   */
  failed?: FailedJobHook;
}

export type FailedJobHook = (tx: Queryable, job: Job, reason: string) => Promise<void>;

/**
 * Runs a claimed job (`handle` calls its handler) and settles what the handler decided. A handler that
 * throws has its job run again later (failedJobDelayMs), logged as a warning, unless the error is a
 * PermanentJobError or the job has now failed `maxAttempts` times: then it fails for good (failures.ts),
 * logged once as an error. An outage of the database is not the job's failure and is not counted. A
 * retry due within a minute (webhook attempts 1, 2, 4, 8 s apart) calls `wake` at its time, so that it is
 * looked for then, not at the next poll.
 */
export async function runJob(
  db: Database,
  job: Job,
  handle: () => Promise<JobResult>,
  log: Pick<Logger, 'error' | 'warn'>,
  wake: () => void,
  policy: FailurePolicy = {},
): Promise<void> {
  let result: JobResult;
  let failedRuns: number | undefined;
  try {
    result = await handle();
  } catch (error) {
    const maxAttempts = policy.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    const outage = isOutage(error);
    failedRuns = outage ? job.failedRuns : job.failedRuns + 1;
    const fields = { err: error, jobId: job.id, queue: job.queue, failedRuns, maxAttempts };
    if (!outage && (error instanceof PermanentJobError || failedRuns >= maxAttempts)) {
      const reason =
        error instanceof PermanentJobError
          ? error.message
          : `stopped after ${failedRuns} failed attempts: ${error instanceof Error ? error.message : String(error)}`;
      log.error({ ...fields, reason }, 'job failed for good; it is kept as failed (mailroom jobs list --failed)');
      const cause = error instanceof PermanentJobError ? 'permanent' : 'attempts';
      await failForGood(db, job, reason, failedRuns, cause, policy.failed, log).catch((markError: unknown) =>
        log.error({ err: markError, jobId: job.id, queue: job.queue }, 'could not mark the job failed'),
      );
      return;
    }
    log.warn(fields, 'job failed; it runs again later');
    result = { retryAt: new Date(Date.now() + failedJobDelayMs(error, failedRuns)), reason: String(error) };
  }
  try {
    await settleJob(db, job, result, failedRuns);
  } catch (error) {
    log.error({ err: error, jobId: job.id, queue: job.queue }, 'could not settle job');
    return;
  }
  if ('retryAt' in result) {
    const delay = result.retryAt.getTime() - Date.now();
    if (delay < 60_000) setTimeout(wake, Math.max(0, delay)).unref();
  }
}

/**
 * Marks the job failed with its kind's record of it, retried while the database is away, within the
 * lease. A hook that fails does not keep the job from failing (it would come back and fail again for
 * ever): the job is then marked failed without it.
 */
async function failForGood(
  db: Database,
  job: Job,
  reason: string,
  failedRuns: number,
  cause: 'permanent' | 'attempts',
  hook: FailedJobHook | undefined,
  log: Pick<Logger, 'error'>,
) {
  const mark = (record?: FailedJobHook) =>
    retryWhileUnreachable(
      () => markJobFailed(db, job, reason, failedRuns, cause, record && ((tx) => record(tx, job, reason))),
      job.leaseEndsAt,
    );
  try {
    await mark(hook);
  } catch (error) {
    if (!hook || isOutage(error)) throw error;
    log.error({ err: error, jobId: job.id, queue: job.queue }, 'could not record the failure on what the job acts on');
    await mark();
  }
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

/**
 * Deletes a finished job, or sets it to run again at `retryAt`, unless its lease ended and another
 * worker holds it now. Retried while the database is unreachable, up to the end of the lease: otherwise
 * a job handled during an outage would stay claimed, untouched, until its lease ran out. Still
 * unreachable then, it throws, and the job comes back as a dead worker's would.
 */
async function settleJob(db: Database, job: Job, result: JobResult, failedRuns?: number): Promise<void> {
  if (result.settled) return;
  if ('done' in result) {
    await retryWhileUnreachable(() => finisher(db).add(job), job.leaseEndsAt);
    return;
  }
  await retryWhileUnreachable(
    () =>
      db.query(
        // A run that ended without an error clears the count: the limit is on failed runs in a row, so
        // a few errors spread over a day of deferrals do not end a job that keeps making progress.
        `UPDATE jobs SET run_at = $3, locked_until = NULL, lease_id = NULL, last_error = $4, failed_runs = $5
          WHERE id = $1 AND lease_id = $2`,
        [job.id, job.leaseId, result.retryAt, result.reason.slice(0, 1000), failedRuns || null],
      ),
    job.leaseEndsAt,
  );
}

/** How a job is to be settled by a statement of its handler's (settleJobsFrom). */
export interface JobSettlement {
  job_id: number;
  lease_id: string;
  /** Absent: the job is finished (deleted). */
  retry_at: string | null;
  reason: string | null;
}

/** The job's part of a handler's record, for settleJobsFrom: finished, or due again at `result.retryAt`. */
export function settlementOf(job: Job, result: JobResult): JobSettlement {
  return {
    job_id: job.id,
    lease_id: job.leaseId,
    retry_at: 'retryAt' in result ? result.retryAt.toISOString() : null,
    reason: 'reason' in result ? result.reason.slice(0, 1000) : null,
  };
}

/**
 * SQL for a CTE `name` holding the rows of the earlier CTE `from` (JobSettlement's columns) whose job
 * still has the lease the row names: a handler records only what a job it still holds did, so the
 * record of a worker that lost its lease (another may be running the job again) changes nothing.
 */
export function jobsStillHeld(from: string, name: string): string {
  return `${name} AS (
    SELECT ${from}.* FROM ${from} JOIN jobs j ON j.id = ${from}.job_id AND j.lease_id = ${from}.lease_id
  )`;
}

/**
 * SQL for two data-modifying CTEs that settle the jobs named by the rows of the earlier CTE `from`
 * (JobSettlement's columns), in the statement that records what they did: one statement, one commit
 * for both. As settleJob, only while the lease is still the one the row names.
 */
export function settleJobsFrom(from: string): string {
  return `finished_jobs AS (
    DELETE FROM jobs j USING ${from} s WHERE j.id = s.job_id AND j.lease_id = s.lease_id AND s.retry_at IS NULL
  ),
  retried_jobs AS (
    UPDATE jobs j SET run_at = s.retry_at, locked_until = NULL, lease_id = NULL, last_error = s.reason,
           failed_runs = NULL
      FROM ${from} s WHERE j.id = s.job_id AND j.lease_id = s.lease_id AND s.retry_at IS NOT NULL
  )`;
}

/** Gives claimed jobs back unrun (a worker stopping, or a group it no longer owns): due again at once. */
export async function releaseJobs(db: Queryable, jobs: Job[]): Promise<void> {
  if (jobs.length === 0) return;
  await db.query(
    `UPDATE jobs SET locked_until = NULL, lease_id = NULL, attempts = attempts - 1
      WHERE (id, lease_id) IN (SELECT * FROM unnest($1::bigint[], $2::uuid[]))`,
    [jobs.map((job) => job.id), jobs.map((job) => job.leaseId)],
  );
}
