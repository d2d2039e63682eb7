import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Database, Queryable } from '../../platform/db/database.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { isUuid } from '../../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../../platform/db/keyset-page.ts';
import {
  claimIdempotencyKey,
  idempotencyKey,
  releaseIdempotencyKey,
  rememberResult,
} from '../../platform/idempotency.ts';
import { enqueueJob, type QueueName } from '../../queue/jobs.ts';
import { checkedImportOptions, storedOptions, type ImportFields } from './import-options.ts';

// A contact import as the API sees it (Resend's ContactImport, with Mailroom's progress and per-row
// errors), and the upload that creates one. The upload streams into contact_import_chunks as it
// arrives (about 1 MiB a row), under an import in status 'uploading' that nothing lists; once the
// whole request is read and its fields checked, one transaction makes it 'queued', adds its job and
// remembers the answer under the Idempotency-Key. Only then is 201 sent, so an import answered is
// stored whole and will run.

export const IMPORT_QUEUE: QueueName = 'contact-import';
/** Resend's limit on the file. */
export const MAX_FILE_BYTES = 50 * 1024 * 1024;
/** The size of a stored chunk of the file. */
const CHUNK_BYTES = 1024 * 1024;
/** An upload still 'uploading' after this was left by a crash (no request lasts so long): removed. */
const ABANDONED_UPLOAD = "interval '1 hour'";

export type ImportStatus = 'queued' | 'in_progress' | 'completed' | 'failed';

export interface ContactImportView {
  object: 'contact_import';
  id: string;
  status: ImportStatus;
  created_at: string;
  completed_at: string | null;
  counts: { total: number; created: number; updated: number; skipped: number; failed: number };
  /** Mailroom's own: data rows read so far, and why a failed import failed. */
  progress: { rows_processed: number; file_bytes: number };
  failure_reason: string | null;
  on_conflict: 'upsert' | 'skip';
}

interface ImportRow {
  id: string;
  status: ImportStatus;
  on_conflict: 'upsert' | 'skip';
  file_bytes: number;
  rows_done: number;
  created: number;
  updated: number;
  skipped: number;
  failed: number;
  failure_reason: string | null;
  created_at: Date;
  completed_at: Date | null;
}

const COLUMNS =
  'id, status, on_conflict, file_bytes, rows_done, created, updated, skipped, failed, failure_reason, created_at, completed_at';

function toView(row: ImportRow): ContactImportView {
  const counts = {
    created: Number(row.created),
    updated: Number(row.updated),
    skipped: Number(row.skipped),
    failed: Number(row.failed),
  };
  return {
    object: 'contact_import',
    id: row.id,
    status: row.status,
    created_at: new Date(row.created_at).toISOString(),
    completed_at: row.completed_at === null ? null : new Date(row.completed_at).toISOString(),
    // Every row read ends in exactly one of the four.
    counts: { total: counts.created + counts.updated + counts.skipped + counts.failed, ...counts },
    progress: { rows_processed: Number(row.rows_done), file_bytes: Number(row.file_bytes) },
    failure_reason: row.failure_reason,
    on_conflict: row.on_conflict,
  };
}

/** Starts an upload: an import nobody sees yet, whose chunks `storeFile` writes. */
export async function beginUpload(db: Queryable, organizationId: string): Promise<string> {
  // Uploads a crash left behind are cleared here, by the next upload of any organization.
  await db.query(`DELETE FROM contact_imports WHERE status = 'uploading' AND created_at < now() - ${ABANDONED_UPLOAD}`);
  const { rows } = await db.query<{ id: string }>(
    'INSERT INTO contact_imports (organization_id) VALUES ($1) RETURNING id',
    [organizationId],
  );
  return rows[0]!.id;
}

/**
 * Writes the file into the import's chunks as it arrives, a chunk at a time (reading waits while a chunk
 * is written). Returns its size and SHA-256 (the Idempotency-Key's fingerprint includes it).
 */
export async function storeFile(
  db: Queryable,
  importId: string,
  file: Readable,
): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let seq = 0;
  let bytes = 0;
  const flush = async () => {
    if (pendingBytes === 0) return;
    const data = Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    await db.query('INSERT INTO contact_import_chunks (import_id, seq, data) VALUES ($1, $2, $3)', [
      importId,
      seq++,
      data,
    ]);
  };
  for await (const chunk of file as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
    if (bytes > MAX_FILE_BYTES) {
      throw new ServiceError('payload_too_large', `file: at most ${MAX_FILE_BYTES / 1024 / 1024} MB`, 'file');
    }
    pending.push(chunk);
    pendingBytes += chunk.length;
    if (pendingBytes >= CHUNK_BYTES) await flush();
  }
  await flush();
  return { bytes, sha256: hash.digest('hex') };
}

/** Removes an upload that will not be answered 201 (refused, or its request broke off). */
export async function abandonUpload(db: Queryable, importId: string): Promise<void> {
  await db.query("DELETE FROM contact_imports WHERE id = $1 AND status = 'uploading'", [importId]);
}

/**
 * Finishes an upload: checks its fields, then queues it. With an Idempotency-Key, a request already
 * answered (same key, same file and fields) gets that answer again and this upload is dropped.
 */
export async function queueUpload(
  db: Database,
  organizationId: string,
  upload: {
    importId: string;
    bytes: number;
    sha256: string;
    fields: ImportFields;
    idempotencyKey?: string;
    path: string;
  },
): Promise<{ object: 'contact_import'; id: string }> {
  if (upload.bytes === 0) throw new ServiceError('validation_error', 'file: the file is empty', 'file');
  const options = await checkedImportOptions(db, organizationId, upload.fields);
  const key =
    upload.idempotencyKey === undefined
      ? undefined
      : idempotencyKey(organizationId, upload.idempotencyKey, {
          kind: 'POST',
          target: upload.path,
          body: { file_sha256: upload.sha256, ...upload.fields },
        });
  if (key) {
    const claim = await claimIdempotencyKey(db, key);
    if (!claim.claimed) {
      await abandonUpload(db, upload.importId);
      return claim.result as { object: 'contact_import'; id: string };
    }
  }
  const result = { object: 'contact_import' as const, id: upload.importId };
  const stored = storedOptions(options);
  try {
    await db.transaction(async (tx) => {
      await tx.query(
        `UPDATE contact_imports SET status = 'queued', column_map = $3::jsonb, on_conflict = $4,
                segment_ids = $5::uuid[], topics = $6::jsonb, file_bytes = $7, created_at = now()
          WHERE id = $1 AND organization_id = $2 AND status = 'uploading'`,
        [
          upload.importId,
          organizationId,
          JSON.stringify(stored.column_map),
          stored.on_conflict,
          stored.segment_ids,
          JSON.stringify(stored.topics),
          upload.bytes,
        ],
      );
      await enqueueJob(tx, {
        queue: IMPORT_QUEUE,
        payload: { import_id: upload.importId },
        shareKey: organizationId,
      });
      if (key) await rememberResult(tx, key, result);
    });
  } catch (error) {
    if (key) await releaseIdempotencyKey(db, key).catch(() => {});
    throw error;
  }
  return result;
}

export async function getContactImport(db: Queryable, organizationId: string, id: string): Promise<ContactImportView> {
  if (!isUuid(id)) throw notFound('Contact import');
  const { rows } = await db.query<ImportRow>(
    `SELECT ${COLUMNS} FROM contact_imports WHERE id = $2 AND organization_id = $1 AND status <> 'uploading'`,
    [organizationId, id],
  );
  if (!rows[0]) throw notFound('Contact import');
  return toView(rows[0]);
}

/** Newest first (Resend's order), optionally of one status. */
export async function listContactImports(
  db: Queryable,
  organizationId: string,
  page: PageRequest & { status?: ImportStatus },
): Promise<Page<ContactImportView>> {
  const { status, ...cursor } = page;
  const listed = await keysetPage<ImportRow>(
    db,
    {
      table: 'contact_imports',
      columns: COLUMNS,
      organizationId,
      newestFirst: true,
      // The status is one of four literals (the route's schema), never free text.
      where: status === undefined ? "status <> 'uploading'" : `status = '${status}'`,
    },
    cursor,
  );
  return { ...listed, data: listed.data.map(toView) };
}

export interface ImportErrorView {
  row: number;
  column: string | null;
  message: string;
}

/** The import's row errors in row order, `limit` at a time after row `after`. */
export async function listImportErrors(
  db: Queryable,
  organizationId: string,
  id: string,
  page: { limit: number; after?: number },
): Promise<{ object: 'list'; has_more: boolean; data: ImportErrorView[] }> {
  await getContactImport(db, organizationId, id);
  const { rows } = await db.query<{ row: number; column: string | null; message: string }>(
    `SELECT "row", "column", message FROM contact_import_errors
      WHERE import_id = $1 AND "row" > $2 ORDER BY "row" LIMIT $3`,
    [id, page.after ?? 0, page.limit + 1],
  );
  return {
    object: 'list',
    has_more: rows.length > page.limit,
    data: rows.slice(0, page.limit).map((row) => ({ row: Number(row.row), column: row.column, message: row.message })),
  };
}
