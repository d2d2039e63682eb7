import { isDataRefusal, notifyAfterCommitTag, type Database, type Queryable } from '../platform/db/database.ts';
import { listenOrPoll } from '../platform/db/listening.ts';
import { rememberedRows, rememberResultsFrom } from '../platform/idempotency.ts';
import type { Logger } from '../platform/logger.ts';
import { jobsFailed, type QueueStats } from '../platform/metrics.ts';
import type { App } from '../platform/http/app-types.ts';
import { writeStoredRows, type StoreOptions, type StoredRows } from './store-messages.ts';

// The accept path's intake. Under load the group commit (group-commit.ts) writes each send as one row of
// email_intake, the rows its messages will be stored as, in the statement that charges the quota and
// remembers the idempotent result: one row a request instead of a message row, its recipients, its
// timeline entry, its webhook deliveries and its delivery job, each with their indexes. A sent message
// is as durable either way: the answer follows the commit. Then the rows are stored for good:
// - by the intake worker (startIntake), which takes the oldest rows not being stored elsewhere, stores
//   their messages as the group commit would have (with the time they were accepted) and deletes them,
//   all in one transaction, as soon as it hears of them;
// - before any other request of the organization (installIntakeReads): every route that is not a send
//   first stores the organization's rows (waiting for those another process is storing), so a message
//   is readable, cancelable and listed as soon as its send was answered.
// Under no load a group is written in full at once and the intake stays empty.

export const INTAKE_CHANNEL = 'mailroom_intake';
const WAKE = notifyAfterCommitTag(INTAKE_CHANNEL);

/** Rows (sends) stored in one transaction at most, and about how many bytes of them (at least one row). */
const ROWS_PER_TRANSACTION = 200;
const BYTES_PER_TRANSACTION = 32 * 1024 * 1024;
/** How often the intake worker looks without being told (a lost notification, another process's rows). */
const POLL_INTERVAL_MS = 250;

/** One send for the intake: its organization and the rows its accepted messages are stored as. */
export interface IntakeRow {
  organizationId: string;
  stored: StoredRows;
}

/**
 * Writes sends to the intake in one statement, with the results to remember under their idempotency
 * keys and the guard's quota check and charge (store-messages.ts). Says whether it wrote them (false
 * when the guard's condition did not hold: nothing is written).
 */
export async function writeIntake(db: Queryable, sends: IntakeRow[], options: StoreOptions): Promise<boolean> {
  const values: unknown[] = [
    JSON.stringify(sends.map((s) => ({ organization_id: s.organizationId, rows: s.stored }))),
    JSON.stringify(rememberedRows(options.remember)),
  ];
  const guard = options.guard ? options.guard.ctes(values.length + 1) : 'quota_ok AS (SELECT true AS ok)';
  if (options.guard) values.push(...options.guard.values);
  const { rows } = await db.query<{ ok: boolean }>(
    `${WAKE} WITH ${guard},
     taken AS (
       INSERT INTO email_intake (organization_id, rows)
       SELECT s.organization_id, s.rows FROM jsonb_to_recordset($1::jsonb) AS s(organization_id uuid, rows jsonb)
        WHERE (SELECT ok FROM quota_ok)
     ),
     remembered AS (${rememberResultsFrom('$2::jsonb')} AND (SELECT ok FROM quota_ok))
     SELECT ok FROM quota_ok`,
    values,
  );
  return rows[0]!.ok;
}

type Scope = { organizationId: string; upTo: string } | { oldest: number } | { id: string };

/** The rows of a scope not set aside (a condition, its parameters, how many at most): see storeIntakeRows. */
function rowsOf(scope: Scope): [string, unknown[], number] {
  if ('organizationId' in scope) {
    return [
      'organization_id = $1 AND id <= $2 AND failed_at IS NULL',
      [scope.organizationId, scope.upTo],
      ROWS_PER_TRANSACTION,
    ];
  }
  if ('oldest' in scope) return ['failed_at IS NULL', [], scope.oldest];
  return ['id = $1 AND failed_at IS NULL', [scope.id], 1];
}

/**
 * Stores intake rows for good and deletes them, in one transaction; says how many rows it took, the
 * oldest first, up to ROWS_PER_TRANSACTION or about BYTES_PER_TRANSACTION (at least one). An
 * organization's (up to a row): after waiting for those another transaction is storing. The oldest,
 * or one row: leaving those another transaction is storing.
 */
async function storeIntakeRows(db: Database, scope: Scope): Promise<number> {
  const [which, parameters, limit] = rowsOf(scope);
  const lock = 'organizationId' in scope ? 'FOR UPDATE' : 'FOR UPDATE SKIP LOCKED';
  return db.transaction(async (tx) => {
    // Sizes as stored (pg_column_size: compressed, read without the value): a row of a send with large
    // attachments counts for what it is, so a transaction never holds a process's memory hostage.
    const { rows } = await tx.query<{ id: string; accepted_at: string; rows: StoredRows }>(
      `DELETE FROM email_intake WHERE id IN (
         SELECT id FROM email_intake WHERE id IN (
           SELECT id FROM (
             SELECT id, sum(size) OVER (ORDER BY id) - size AS before
               FROM (SELECT id, pg_column_size(rows) AS size FROM email_intake WHERE ${which}
                      ORDER BY id LIMIT ${limit}) oldest
           ) sized WHERE before < ${BYTES_PER_TRANSACTION}
         ) ORDER BY id ${lock}
       )
       RETURNING id::text, accepted_at::text, rows`,
      parameters,
    );
    if (rows.length === 0) return 0;
    rows.sort((a, b) => Number(a.id) - Number(b.id));
    const at =
      (row: (typeof rows)[number]) =>
      <R>(r: R) => ({ ...r, created_at: row.accepted_at });
    await writeStoredRows(
      tx,
      {
        messages: rows.flatMap((row) => row.rows.messages.map(at(row))),
        entries: rows.flatMap((row) => row.rows.entries.map(at(row))),
        attachments: rows.flatMap((row) => row.rows.attachments),
      },
      { remember: [], fromIntake: true },
    );
    return rows.length;
  });
}

/**
 * Stores the rows of `scope`, and says how many rows it took. When the database refuses the rows' data
 * (a data or integrity error), each row alone, so that the row at fault does not hold back the others:
 * that one is set aside (failed_at, failure), logged and counted as a job failed for good, for an
 * operator to look at, and never tried again on its own. Any other error (the database away, a lock or
 * statement that waited too long, a deadlock) says nothing of the rows: it is the caller's, and the
 * rows are tried again later.
 */
async function storeOrIsolate(db: Database, scope: Scope, log: Pick<Logger, 'error'>): Promise<number> {
  try {
    return await storeIntakeRows(db, scope);
  } catch (error) {
    if (!isDataRefusal(error) || 'id' in scope) throw error;
    const [which, parameters, limit] = rowsOf(scope);
    const { rows } = await db.query<{ id: string }>(
      `SELECT id::text FROM email_intake WHERE ${which} ORDER BY id LIMIT ${limit}`,
      parameters,
    );
    let taken = 0;
    for (const { id } of rows) {
      try {
        taken += await storeIntakeRows(db, { id });
      } catch (alone) {
        if (!isDataRefusal(alone)) throw alone;
        const failure = alone instanceof Error ? alone.message : String(alone);
        const { rows: setAside } = await db.query(
          'UPDATE email_intake SET failed_at = now(), failure = $2 WHERE id = $1 AND failed_at IS NULL RETURNING id',
          [id, failure],
        );
        if (setAside.length === 0) continue;
        jobsFailed.inc({ kind: 'intake', cause: 'permanent' });
        log.error(
          { err: alone, intakeId: id },
          'an accepted send could not be stored from the intake; it is kept there, set aside',
        );
        taken += 1;
      }
    }
    return taken;
  }
}

/**
 * Stores the organization's intake rows accepted so far, if it has any: called before reading its
 * messages. A transaction at a time, each taking what the one before left (waiting for what another
 * holds), until none of those rows is left; sends accepted meanwhile are not waited for.
 */
export async function storeIntakeOf(db: Database, organizationId: string, log: Pick<Logger, 'error'>): Promise<void> {
  const last = async (upTo?: string) =>
    (
      await db.query<{ id: string | null }>(
        `SELECT max(id)::text AS id FROM email_intake
          WHERE organization_id = $1 AND failed_at IS NULL${upTo ? ' AND id <= $2' : ''}`,
        upTo ? [organizationId, upTo] : [organizationId],
      )
    ).rows[0]!.id;
  const upTo = await last();
  if (upTo === null) return;
  do await storeOrIsolate(db, { organizationId, upTo }, log);
  while ((await last(upTo)) !== null);
}

/**
 * Every authenticated route that is not a send (access `send`: it only writes) first stores its
 * organization's intake rows, so that what it reads includes every message accepted before it.
 */
export function installIntakeReads(app: App): void {
  app.addHook('preHandler', async (request) => {
    const access = request.routeOptions.config.access;
    if (!access || access === 'public' || access === 'send' || !request.principal) return;
    await storeIntakeOf(app.db, request.principal.organizationId, app.log);
  });
}

/**
 * The intake as a queue for the metrics and readiness (`intake`): sends waiting (counted up to 100,000)
 * and how long the oldest has waited.
 */
export async function intakeStats(db: Queryable): Promise<QueueStats> {
  const { rows } = await db.query<{ due: number; oldest: number | null }>(
    `SELECT (SELECT count(*) FROM (SELECT 1 FROM email_intake WHERE failed_at IS NULL LIMIT 100000) waiting)::int AS due,
            (SELECT extract(epoch FROM now() - accepted_at) FROM email_intake WHERE failed_at IS NULL
              ORDER BY id LIMIT 1)::float8 AS oldest`,
  );
  return { queue: 'intake', due: rows[0]!.due, oldestDueSeconds: Math.max(0, rows[0]!.oldest ?? 0) };
}

export interface IntakeWorker {
  /** Stores what is in the intake now (tests, and a process about to stop). */
  drain(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts this process's intake worker: it stores the intake's rows as they come. */
export async function startIntake(db: Database, log: Pick<Logger, 'error' | 'warn'>): Promise<IntakeWorker> {
  let running: Promise<void> | undefined;
  let again = false;
  let stopping = false;
  const pass = async () => {
    while (!stopping && (await storeOrIsolate(db, { oldest: ROWS_PER_TRANSACTION }, log)) > 0);
  };
  const run = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = pass()
      .catch((error: unknown) => log.warn({ err: error }, 'could not store the intake; trying again shortly'))
      .finally(() => {
        running = undefined;
        if (again && !stopping) {
          again = false;
          void run();
        }
      });
    return running;
  };
  const unlisten = await listenOrPoll(db, INTAKE_CHANNEL, () => void run());
  const timer = setInterval(() => void run(), POLL_INTERVAL_MS);
  void run();
  return {
    async drain() {
      await run();
      while (running) await running;
      await pass();
    },
    async stop() {
      stopping = true;
      clearInterval(timer);
      await unlisten();
      await running;
    },
  };
}
