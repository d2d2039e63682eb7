import type { Database, Queryable } from '../../platform/db/database.ts';
import { PermanentJobError, type FailedJobHook, type Job, type JobResult } from '../../queue/worker.ts';
import type { TopicChoice } from '../contact-topics.ts';
import type { ColumnMap, OnConflict } from './import-options.ts';
import {
  columnPositions,
  contactOfRow,
  csvRecords,
  describeCsvError,
  isCsvError,
  notCsvReason,
  storedFile,
  type ColumnPositions,
  type ContactFields,
  type RowError,
} from './csv-rows.ts';

// The 'contact-import' job: reads the stored file from where the import got to and writes its rows as
// contacts, BATCH_ROWS at a time. Each batch is one statement in one transaction with the import's
// progress and counts, so after a crash the job resumes after the last batch that committed, and a
// batch redone was rolled back the first time: no row is counted or applied twice. A batch checks first
// that the progress is still the one it started from (a second worker on the same import, after a lease
// ran out, stops there instead of writing the batch again).
//
// A row that cannot be a contact gets one error (contact_import_errors) and the rest go on. The same
// address twice in one file: the first row wins, later ones are errors naming it. Only a file that
// cannot be read fails the import: not text (binary, or not UTF-8), no header row, a column the map
// names missing, a CSV syntax error. Rows before a syntax error stay imported. Such a failure cannot
// change: the job fails at once (PermanentJobError) and is kept as failed. A job that fails for any
// other reason, MAILROOM_JOB_MAX_ATTEMPTS times, fails its import too (importFailed).
//
// An import emits no contact.created or contact.updated webhook events: a large file would be as many
// deliveries to every endpoint. Its progress and result are read with GET /contacts/imports/:id.

/** Rows (contacts and errors) written per statement. */
export const BATCH_ROWS = 1000;

interface ImportToRun {
  organization_id: string;
  column_map: ColumnMap | null;
  on_conflict: OnConflict;
  segment_ids: string[];
  topics: TopicChoice[];
  rows_done: number;
}

/**
 * The job handler: runs the import its payload names to the end (or to its failure). When the process
 * is stopping (`stopping()`), it stops after the batch being written and puts its job back, to go on
 * from there in this process's next start or in another process. A file that cannot be read fails the
 * job for good with the import's failure reason.
 */
export function contactImportHandler(db: Database, stopping: () => boolean): (job: Job) => Promise<JobResult> {
  return async (job) => {
    const outcome = await runImport(db, String(job.payload.import_id), { stopping });
    if (outcome === 'stopped') return { retryAt: new Date(), reason: 'the process stopped' };
    if (outcome !== 'finished') throw new PermanentJobError(outcome.failed);
    return { done: true };
  };
}

/**
 * The kind's hook for a job failed for good: its import is `failed` with the reason (unless it ended
 * already) and its file is dropped. Rows imported before stay.
 */
export const importFailed: FailedJobHook = async (tx, job, reason) => {
  const importId = String(job.payload.import_id);
  await tx.query(
    `UPDATE contact_imports SET status = 'failed', completed_at = now(), failure_reason = $2
      WHERE id = $1 AND status IN ('queued', 'in_progress')`,
    [importId, reason.slice(0, 1000)],
  );
  await tx.query('DELETE FROM contact_import_chunks WHERE import_id = $1', [importId]);
};

/** Another run of the same import (after this one's lease ran out) wrote a batch: this run stops. */
class ProgressMovedOn extends Error {}

/** The file could not be read: the import is failed with this reason. */
export interface ImportFailure {
  failed: string;
}

export async function runImport(
  db: Database,
  importId: string,
  { batchRows = BATCH_ROWS, stopping = () => false }: { batchRows?: number; stopping?: () => boolean } = {},
): Promise<'finished' | 'stopped' | ImportFailure> {
  const { rows } = await db.query<ImportToRun>(
    `UPDATE contact_imports SET status = 'in_progress', started_at = coalesce(started_at, now())
      WHERE id = $1 AND status IN ('queued', 'in_progress')
      RETURNING organization_id, column_map, on_conflict, segment_ids, topics, rows_done`,
    [importId],
  );
  const target = rows[0];
  if (!target) return 'finished'; // finished, failed, or deleted with its organization
  const resumeAfter = Number(target.rows_done);
  const batch = new Batch(db, importId, target, resumeAfter);
  let positions: ColumnPositions | undefined;
  if (resumeAfter === 0) {
    const notCsv = await notCsvReason(db, importId);
    if (notCsv) return await batch.fail(notCsv);
  }
  try {
    for await (const record of csvRecords(storedFile(db, importId))) {
      if (!positions) {
        const found = columnPositions(record.cells, target.column_map ?? undefined);
        if ('failure' in found) return await batch.fail(found.failure);
        positions = found;
        continue;
      }
      // The header is row 1: data row n is the file's row n + 1.
      const dataRow = record.row - 1;
      if (dataRow <= resumeAfter) continue;
      batch.add(contactOfRow(record, positions), dataRow, positions);
      if (batch.size >= batchRows) {
        await batch.write();
        if (stopping()) return 'stopped';
        // With the embedded database every step of the loop resolves without I/O: without a turn of
        // the event loop here, the process would answer no request until the import ended.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  } catch (error) {
    if (!isCsvError(error)) throw error;
    return await batch.fail(describeCsvError(error));
  }
  if (!positions) return await batch.fail('the file has no header row');
  await batch.write({ finish: 'completed' });
  return 'finished';
}

/** The rows read since the last write, and the write that records them with the import's progress. */
class Batch {
  private contacts: ContactFields[] = [];
  private errors: RowError[] = [];
  /** Address (lower case) → its row, for this batch: earlier batches are seen in the database. */
  private seen = new Map<string, number>();
  private emailColumn: string | null = null;
  private doneThrough: number;
  /** The last data row read. */
  lastRow: number;

  private readonly db: Database;
  private readonly importId: string;
  private readonly target: ImportToRun;

  constructor(db: Database, importId: string, target: ImportToRun, resumeAfter: number) {
    this.db = db;
    this.importId = importId;
    this.target = target;
    this.doneThrough = resumeAfter;
    this.lastRow = resumeAfter;
  }

  get size() {
    return this.contacts.length + this.errors.length;
  }

  add(contact: ContactFields | RowError, dataRow: number, positions: ColumnPositions) {
    this.lastRow = dataRow;
    this.emailColumn = positions.header[positions.email] ?? null;
    if ('message' in contact) {
      this.errors.push(contact);
      return;
    }
    const key = contact.email.toLowerCase();
    const first = this.seen.get(key);
    if (first !== undefined) {
      this.errors.push({
        row: contact.row,
        column: this.emailColumn,
        message: `duplicate: the address is on row ${first} already`,
      });
      return;
    }
    this.seen.set(key, contact.row);
    this.contacts.push(contact);
  }

  async fail(reason: string): Promise<ImportFailure> {
    await this.write({ finish: 'failed', reason });
    return { failed: reason };
  }

  /** Writes the rows read so far with the progress; `finish` also ends the import and drops its file. */
  async write(end?: { finish: 'completed' } | { finish: 'failed'; reason: string }): Promise<void> {
    const { contacts, errors } = this;
    const expected = this.doneThrough;
    await this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ rows_done: number }>(
        'SELECT rows_done FROM contact_imports WHERE id = $1 FOR UPDATE',
        [this.importId],
      );
      if (!rows[0] || Number(rows[0].rows_done) !== expected) {
        throw new ProgressMovedOn(`contact import ${this.importId}: its progress moved on elsewhere; this run stops`);
      }
      if (contacts.length + errors.length > 0) {
        await writeRows(tx, this.importId, this.target, contacts, errors, this.emailColumn, this.lastRow);
      }
      if (end) {
        await tx.query(
          `UPDATE contact_imports SET status = $2, failure_reason = $3, completed_at = now() WHERE id = $1`,
          [this.importId, end.finish, end.finish === 'failed' ? end.reason.slice(0, 1000) : null],
        );
        await tx.query('DELETE FROM contact_import_chunks WHERE import_id = $1', [this.importId]);
      }
    });
    this.doneThrough = this.lastRow;
    this.contacts = [];
    this.errors = [];
    this.seen.clear();
  }
}

/**
 * One statement: the batch's contacts (created, or for an address already there updated or skipped),
 * their segments and topics, the rows' errors, and the import's progress and counts. A contact already
 * marked with this import came from an earlier row of the file: its row is a duplicate, left as it is.
 */
async function writeRows(
  tx: Queryable,
  importId: string,
  target: ImportToRun,
  contacts: ContactFields[],
  errors: RowError[],
  emailColumn: string | null,
  rowsDone: number,
) {
  await tx.query(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($4::jsonb)
         AS r("row" bigint, email text, first_name text, last_name text, unsubscribed boolean, properties jsonb)
     ),
     written AS (
       INSERT INTO contacts AS c (organization_id, email, first_name, last_name, unsubscribed, properties,
                                  import_id, import_row)
       SELECT $1, i.email, i.first_name, i.last_name, coalesce(i.unsubscribed, false),
              coalesce(i.properties, '{}'::jsonb), $2, i."row"
         FROM input i
       ON CONFLICT (organization_id, lower(email)) DO UPDATE SET
         first_name = CASE WHEN $3 THEN coalesce(excluded.first_name, c.first_name) ELSE c.first_name END,
         last_name = CASE WHEN $3 THEN coalesce(excluded.last_name, c.last_name) ELSE c.last_name END,
         unsubscribed = CASE WHEN $3
           THEN coalesce((SELECT i.unsubscribed FROM input i WHERE i."row" = excluded.import_row), c.unsubscribed)
           ELSE c.unsubscribed END,
         properties = CASE WHEN $3 THEN c.properties || excluded.properties ELSE c.properties END,
         updated_at = CASE WHEN $3 THEN now() ELSE c.updated_at END,
         import_id = excluded.import_id,
         import_row = excluded.import_row
       WHERE c.import_id IS DISTINCT FROM excluded.import_id
       RETURNING c.id, c.import_row AS "row", (c.xmax = 0) AS created
     ),
     memberships AS (
       INSERT INTO contact_segments (contact_id, segment_id)
       SELECT w.id, s.id FROM written w CROSS JOIN segments s
        WHERE s.organization_id = $1 AND s.id = ANY ($5::uuid[]) AND (w.created OR $3)
       ON CONFLICT (contact_id, segment_id) DO NOTHING
     ),
     choices AS (
       INSERT INTO contact_topics (contact_id, topic_id, subscription)
       SELECT w.id, t.id, choice.subscription
         FROM written w
        CROSS JOIN jsonb_to_recordset($6::jsonb) AS choice (id uuid, subscription text)
         JOIN topics t ON t.id = choice.id AND t.organization_id = $1
        WHERE w.created OR $3
       ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscription = excluded.subscription,
          updated_at = CASE WHEN contact_topics.subscription = excluded.subscription
                            THEN contact_topics.updated_at ELSE now() END
     ),
     duplicates AS (
       SELECT i."row", c.import_row AS first_row
         FROM input i JOIN contacts c ON c.organization_id = $1 AND lower(c.email) = lower(i.email)
        WHERE NOT EXISTS (SELECT 1 FROM written w WHERE w."row" = i."row")
     ),
     row_errors AS (
       INSERT INTO contact_import_errors (import_id, "row", "column", message)
       SELECT $2, e."row", e."column", e.message
         FROM jsonb_to_recordset($7::jsonb) AS e("row" bigint, "column" text, message text)
       UNION ALL
       SELECT $2, d."row", $8::text, 'duplicate: the address is on row ' || d.first_row || ' already'
         FROM duplicates d
       ON CONFLICT (import_id, "row") DO NOTHING
       RETURNING 1
     )
     UPDATE contact_imports SET
       rows_done = $9,
       created = created + (SELECT count(*) FROM written WHERE created),
       updated = updated + CASE WHEN $3 THEN (SELECT count(*) FROM written WHERE NOT created) ELSE 0 END,
       skipped = skipped + CASE WHEN $3 THEN 0 ELSE (SELECT count(*) FROM written WHERE NOT created) END,
       failed = failed + (SELECT count(*) FROM row_errors)
     WHERE id = $2`,
    [
      target.organization_id,
      importId,
      target.on_conflict === 'upsert',
      // Rows are numbered in the file (the header is row 1), as errors and duplicates name them.
      JSON.stringify(contacts),
      target.segment_ids,
      JSON.stringify(target.topics),
      JSON.stringify(errors),
      emailColumn,
      rowsDone,
    ],
  );
}
