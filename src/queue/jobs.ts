import { notifyAfterCommitTag, type Queryable } from '../platform/db/database.ts';
import type { QueueStats } from '../platform/metrics.ts';

// The queue owns the jobs table: every row of it is written here or by the worker (worker.ts). Each
// write that adds or moves a job runs inside the caller's transaction, so the job exists exactly when
// the change it acts on committed; its statement carries the tag that makes the database seam wake
// the workers (in every process) once it commits. No caller wakes workers by hand.

/** Queues of background work. */
export type QueueName =
  'deliver-email' | 'deliver-webhook' | 'broadcast-fan-out' | 'contact-import' | 'automation-event' | 'automation-step';

/** The channel workers LISTEN on; a NOTIFY wakes them before their next poll. */
export const JOBS_CHANNEL = 'mailroom_jobs';

/**
 * The payload fields that name what a job acts on, so its job can be found again (indexed where
 * that is looked up: `email_id`).
 */
export type JobKey = 'email_id' | 'delivery_id' | 'broadcast_id' | 'import_id' | 'event_id' | 'run_id' | 'seq';

const WAKE = notifyAfterCommitTag(JOBS_CHANNEL);

export interface NewJob {
  queue: QueueName;
  payload: Partial<Record<JobKey, string>>;
  /** Jobs of one group run at most a worker's group limit at a time (a webhook endpoint). */
  groupKey?: string;
  /**
   * Whom the job works for (an organization): due jobs are claimed in turn across keys, so that one
   * key's backlog does not hold up another's jobs. Jobs without one share the empty key.
   */
  shareKey?: string;
  /** Not before this time; now when absent. */
  runAt?: Date;
}

/** Adds a job inside the transaction whose change it acts on. */
export async function enqueueJob(tx: Queryable, job: NewJob): Promise<void> {
  await tx.query(
    `${WAKE} INSERT INTO jobs (queue, payload, group_key, run_at, share_key)
     VALUES ($1, $2::jsonb, $3, coalesce($4::timestamptz, now()), $5)`,
    [job.queue, JSON.stringify(job.payload), job.groupKey ?? null, job.runAt ?? null, job.shareKey ?? ''],
  );
}

/** Adds many jobs in one statement, inside the transaction whose change they act on. */
export async function enqueueJobs(tx: Queryable, jobs: NewJob[]): Promise<void> {
  if (jobs.length === 0) return;
  const rows = jobs.map((job) => ({
    queue: job.queue,
    payload: job.payload,
    group_key: job.groupKey ?? null,
    run_at: job.runAt?.toISOString() ?? null,
    share_key: job.shareKey ?? '',
  }));
  await tx.query(
    `${WAKE} INSERT INTO jobs (queue, payload, group_key, run_at, share_key)
     SELECT r.queue, r.payload, r.group_key, coalesce(r.run_at, now()), r.share_key
       FROM jsonb_to_recordset($1::jsonb)
         AS r(queue text, payload jsonb, group_key text, run_at timestamptz, share_key text)`,
    [JSON.stringify(rows)],
  );
}

/**
 * SQL for a data-modifying CTE body that adds one job per row of the earlier CTE `from`, for
 * statements that create what the jobs act on in the same statement (webhook fan-out, accepted
 * messages). `payload`, `groupKey`, `runAt` and `shareKey` are SQL expressions over `from`'s columns (no
 * group, due now, and the empty share key, when absent). The statement it is part of wakes the workers
 * after its commit.
 */
export function enqueueJobsFromRows(spec: {
  from: string;
  queue: QueueName;
  payload: string;
  groupKey?: string;
  runAt?: string;
  shareKey?: string;
}): string {
  return `${WAKE} INSERT INTO jobs (queue, payload, group_key, run_at, share_key)
    SELECT '${spec.queue}', ${spec.payload}, ${spec.groupKey ?? 'NULL'}, ${spec.runAt ?? 'now()'},
           ${spec.shareKey ?? "''"} FROM ${spec.from}
    RETURNING 1`;
}

/** Removes the jobs of a queue whose payload names `value` under `key` (what they act on is gone). */
export async function cancelJobs(tx: Queryable, queue: QueueName, key: JobKey, value: string): Promise<void> {
  await tx.query(`DELETE FROM jobs WHERE payload ->> '${key}' = $1 AND queue = $2`, [value, queue]);
}

/** Removes every job of a group (a deleted webhook endpoint's deliveries). */
export async function cancelGroupJobs(tx: Queryable, queue: QueueName, groupKey: string): Promise<void> {
  // The group's row first (waiting for a claim that is taking it), then its jobs: the order a claim
  // takes them in, so the two cannot deadlock. Its owner, finding the row gone, drops what it holds.
  await groupChanged(tx, queue, groupKey);
  await tx.query('DELETE FROM jobs WHERE queue = $1 AND group_key = $2', [queue, groupKey]);
  await tx.query('DELETE FROM job_group_owners WHERE queue = $1 AND group_key = $2', [queue, groupKey]);
}

/**
 * Says that what a group's jobs act on has changed (a webhook endpoint's URL, secret or switch): the
 * worker that owns the group drops the jobs it holds in memory, read before the change, at its next
 * claim (within its poll interval), and reads them again.
 */
export async function groupChanged(tx: Queryable, queue: QueueName, groupKey: string): Promise<void> {
  // An upsert, not an update: a row a claim is inserting right now is waited for (and its version
  // raised once that claim commits) instead of missed. With no row, one owned by no one (expired).
  await tx.query(
    `INSERT INTO job_group_owners (queue, group_key, owner, owned_until)
     VALUES ($1, $2, '00000000-0000-0000-0000-000000000000', '-infinity')
     ON CONFLICT (queue, group_key) DO UPDATE SET version = job_group_owners.version + 1`,
    [queue, groupKey],
  );
}

/** Moves the jobs of a queue whose payload names `value` under `key` to run at `runAt` (failed ones stay failed). */
export async function rescheduleJobs(
  tx: Queryable,
  queue: QueueName,
  key: JobKey,
  value: string,
  runAt: Date,
): Promise<void> {
  await tx.query(
    `${WAKE} UPDATE jobs SET run_at = $3 WHERE payload ->> '${key}' = $1 AND queue = $2 AND failed_at IS NULL`,
    [value, queue, runAt],
  );
}

/** Removes the jobs of a queue whose payload names any of `values` under `key` (a bulk cancelJobs). */
export async function cancelJobsNaming(tx: Queryable, queue: QueueName, key: JobKey, values: string[]): Promise<void> {
  if (values.length === 0) return;
  await tx.query(`DELETE FROM jobs WHERE payload ->> '${key}' = ANY ($1::text[]) AND queue = $2`, [values, queue]);
}

/**
 * Holds every job of a queue with this share key (a paused broadcast's deliveries): they are due never,
 * until releaseSharedJobs. A job running now finishes its run.
 */
export async function holdSharedJobs(tx: Queryable, queue: QueueName, shareKey: string): Promise<void> {
  await tx.query(`UPDATE jobs SET run_at = 'infinity' WHERE queue = $1 AND share_key = $2 AND run_at <> 'infinity'`, [
    queue,
    shareKey,
  ]);
}

/** Makes the jobs holdSharedJobs held due now (not those failed for good, also due never). */
export async function releaseSharedJobs(tx: Queryable, queue: QueueName, shareKey: string): Promise<void> {
  await tx.query(
    `${WAKE} UPDATE jobs SET run_at = now()
      WHERE queue = $1 AND share_key = $2 AND run_at = 'infinity' AND failed_at IS NULL`,
    [queue, shareKey],
  );
}

/**
 * How many jobs of a queue with this share key are due within `withinMs` (running ones included), counted
 * up to `cap`: one range of the (queue, share_key, run_at) index, cheap at any backlog.
 */
export async function countSoonDueSharedJobs(
  db: Queryable,
  queue: QueueName,
  shareKey: string,
  withinMs: number,
  cap: number,
): Promise<number> {
  const { rows } = await db.query<{ due: number }>(
    `SELECT count(*)::int AS due FROM (
       SELECT 1 FROM jobs WHERE queue = $1 AND share_key = $2 AND run_at <= now() + make_interval(secs => $3)
        LIMIT $4) soon`,
    [queue, shareKey, withinMs / 1000, cap],
  );
  return rows[0]!.due;
}

/**
 * When the soonest job of a queue with this share key is due (held ones included, failed ones not: they
 * wait for an operator), or null for none.
 */
export async function soonestSharedJob(db: Queryable, queue: QueueName, shareKey: string): Promise<Date | null> {
  const { rows } = await db.query<{ run_at: Date }>(
    'SELECT run_at FROM jobs WHERE queue = $1 AND share_key = $2 AND failed_at IS NULL ORDER BY run_at LIMIT 1',
    [queue, shareKey],
  );
  return rows[0]?.run_at ?? null;
}

/** Due jobs are counted up to this many per queue, so that reading the depth stays cheap at any size. */
const DEPTH_CAP = 100_000;

/**
 * Per queue: due jobs not running (up to DEPTH_CAP) and how long the oldest has waited, each read from
 * the (queue, run_at) index.
 */
export async function queueStats(db: Queryable, queues: readonly QueueName[]): Promise<QueueStats[]> {
  const stats: QueueStats[] = [];
  for (const queue of queues) {
    const { rows } = await db.query<{ due: number; oldest: number | null }>(
      `SELECT (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE queue = $1 AND run_at <= now()
                 AND (locked_until IS NULL OR locked_until < now()) LIMIT ${DEPTH_CAP}) due)::int AS due,
              (SELECT extract(epoch FROM now() - min(run_at)) FROM jobs WHERE queue = $1 AND run_at <= now()
                 AND (locked_until IS NULL OR locked_until < now()))::float8 AS oldest`,
      [queue],
    );
    stats.push({ queue, due: rows[0]!.due, oldestDueSeconds: Math.max(0, rows[0]!.oldest ?? 0) });
  }
  return stats;
}

export const QUEUES: readonly QueueName[] = [
  'deliver-email',
  'deliver-webhook',
  'broadcast-fan-out',
  'contact-import',
  'automation-event',
  'automation-step',
];
