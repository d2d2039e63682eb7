import { notifyAfterCommitTag, type Database, type Queryable } from '../platform/db/database.ts';
import { jobsFailed } from '../platform/metrics.ts';
import { JOBS_CHANNEL, type QueueName } from './jobs.ts';

// Jobs that fail for good. A handler that throws has its job run again later, unless the error is a
// PermanentJobError (it cannot change: a file that is not CSV) or the job has failed
// MAILROOM_JOB_MAX_ATTEMPTS times (database outages aside). Such a job is not deleted: it is marked
// failed (failed_at, last_error) and due never (run_at 'infinity', so no claim or due count sees it),
// its kind's hook records the reason on what it acts on in the same transaction, and it is listed
// (`mailroom jobs list --failed`) until retried, or deleted by the pruner after the metadata period.

/** An error that running the job again cannot change: the job fails at once, with this message as its reason. */
export class PermanentJobError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'PermanentJobError';
  }
}

/** Failed runs of a job (database outages aside) before it fails for good, unless configured. */
export const DEFAULT_MAX_ATTEMPTS = 10;

const WAKE = notifyAfterCommitTag(JOBS_CHANNEL);

/**
 * Marks a claimed job failed for good, if its lease is still `leaseId`, and runs `record` in the same
 * transaction (the kind's hook). Returns false when another worker holds the job now (nothing changed).
 */
export async function markJobFailed(
  db: Database,
  job: { id: number; leaseId: string; queue: QueueName },
  reason: string,
  failedRuns: number,
  cause: 'permanent' | 'attempts',
  record?: (tx: Queryable) => Promise<void>,
): Promise<boolean> {
  const marked = await db.transaction(async (tx) => {
    const { rows } = await tx.query(
      `UPDATE jobs SET failed_at = now(), run_at = 'infinity', locked_until = NULL, lease_id = NULL,
              last_error = $3, failed_runs = $4
        WHERE id = $1 AND lease_id = $2 RETURNING id`,
      [job.id, job.leaseId, reason.slice(0, 1000), failedRuns],
    );
    if (rows.length === 0) return false;
    await record?.(tx);
    return true;
  });
  if (marked) jobsFailed.inc({ kind: job.queue, cause });
  return marked;
}

export interface FailedJob {
  id: number;
  kind: QueueName;
  payload: Record<string, unknown>;
  /** Runs that ended in an error. */
  failedRuns: number;
  lastError: string | null;
  failedAt: Date;
  createdAt: Date;
}

/** Failed jobs, the most recent failure first; of one kind (queue) when given. */
export async function listFailedJobs(
  db: Queryable,
  { kind, limit = 100 }: { kind?: string; limit?: number } = {},
): Promise<FailedJob[]> {
  const { rows } = await db.query<{
    id: string;
    queue: QueueName;
    payload: Record<string, unknown>;
    failed_runs: number | null;
    last_error: string | null;
    failed_at: Date;
    created_at: Date;
  }>(
    `SELECT id, queue, payload, failed_runs, last_error, failed_at, created_at FROM jobs
      WHERE failed_at IS NOT NULL AND ($1::text IS NULL OR queue = $1)
      ORDER BY failed_at DESC, id DESC LIMIT $2`,
    [kind ?? null, limit],
  );
  return rows.map((row) => ({
    id: Number(row.id),
    kind: row.queue,
    payload: row.payload,
    failedRuns: row.failed_runs ?? 0,
    lastError: row.last_error,
    failedAt: row.failed_at,
    createdAt: row.created_at,
  }));
}

/**
 * Makes a failed job due now, with a fresh count of failed runs (its cause fixed). What it then does is
 * its kind's: a job whose object already records the failure (a failed import) finds nothing to do and
 * ends. Returns false when no failed job has this id.
 */
export async function retryFailedJob(db: Queryable, id: number): Promise<boolean> {
  const { rows } = await db.query(
    `${WAKE} UPDATE jobs SET failed_at = NULL, failed_runs = NULL, run_at = now() WHERE id = $1 AND failed_at IS NOT NULL
     RETURNING id`,
    [id],
  );
  return rows.length > 0;
}
