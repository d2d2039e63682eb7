import { escapeLike } from '../platform/db/like-pattern.ts';
import type { Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';

// The stored request log: entries written many at a time by the recorder (recorder.ts), read back by
// GET /logs, newest first, a page at a time by keyset on (created_at, id) like GET /emails.

export interface RequestLogEntry {
  id: string;
  organizationId: string;
  apiKeyId: string;
  method: string;
  /** The path and query string as requested. */
  endpoint: string;
  status: number;
  durationMs: number;
  userAgent: string | null;
  /** The bodies as kept (redact.ts), as JSON text. */
  requestBody: string | null;
  responseBody: string | null;
  createdAt: Date;
}

/** Writes entries with one statement, whatever their number (not those of an organization since deleted). */
export async function insertRequestLogs(db: Queryable, entries: RequestLogEntry[]): Promise<void> {
  // The bodies are JSON text already: spliced in as they are rather than parsed and serialized again.
  const rows = entries.map((entry) => {
    const columns = JSON.stringify({
      id: entry.id,
      organization_id: entry.organizationId,
      api_key_id: entry.apiKeyId,
      method: entry.method,
      endpoint: entry.endpoint,
      response_status: entry.status,
      duration_ms: entry.durationMs,
      user_agent: entry.userAgent,
      created_at: entry.createdAt.toISOString(),
    });
    return `${columns.slice(0, -1)},"request_body":${entry.requestBody ?? 'null'},"response_body":${entry.responseBody ?? 'null'}}`;
  });
  await db.query(
    `INSERT INTO request_logs (id, organization_id, api_key_id, method, endpoint, response_status, duration_ms,
                               user_agent, request_body, response_body, created_at)
     SELECT id, organization_id, api_key_id, method, endpoint, response_status, duration_ms,
            user_agent, request_body, response_body, created_at
       FROM json_to_recordset($1::json) AS r(id uuid, organization_id uuid, api_key_id uuid, method text,
            endpoint text, response_status integer, duration_ms integer, user_agent text, request_body json,
            response_body json, created_at timestamptz)
      -- No foreign key checks the organization (migration 0041): an entry of one deleted meanwhile is left out.
      WHERE EXISTS (SELECT 1 FROM organizations o WHERE o.id = r.organization_id)`,
    [`[${rows.join(',')}]`],
  );
}

export const LOG_LIMIT_DEFAULT = 20;
export const LOG_LIMIT_MAX = 100;

export interface LogListQuery {
  limit: number;
  /** The page of older entries after this log id (the previous page's last). */
  after?: string;
  /** The page of newer entries before this log id (the next page's first). */
  before?: string;
  /** `2xx`, `4xx` … or one status code (`429`). */
  status?: string;
  /** Entries whose endpoint starts with this (`/emails`). */
  endpoint?: string;
  apiKeyId?: string;
}

interface LogRow {
  id: string;
  created_at: Date;
  endpoint: string;
  method: string;
  response_status: number;
  user_agent: string | null;
  duration_ms: number;
  api_key_id: string | null;
  api_key_name: string | null;
  request_body?: Record<string, unknown> | null;
  response_body?: Record<string, unknown> | null;
}

const COLUMNS = `l.id, l.created_at, l.endpoint, l.method, l.response_status, l.user_agent, l.duration_ms,
                 l.api_key_id, k.name AS api_key_name`;

/** Resend's list item, with Mailroom's `duration_ms` and `api_key`. */
function summary(row: LogRow) {
  return {
    id: row.id,
    created_at: row.created_at.toISOString(),
    endpoint: row.endpoint,
    method: row.method,
    response_status: row.response_status,
    user_agent: row.user_agent,
    duration_ms: row.duration_ms,
    api_key: row.api_key_id === null ? null : { id: row.api_key_id, name: row.api_key_name },
  };
}

export async function listRequestLogs(db: Queryable, organizationId: string, query: LogListQuery) {
  if (query.after !== undefined && query.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  const cursorId = query.after ?? query.before;
  const cursorField = query.after !== undefined ? 'after' : 'before';
  if (cursorId !== undefined) {
    const { rowCount } = isUuid(cursorId)
      ? await db.query('SELECT 1 FROM request_logs WHERE id = $1 AND organization_id = $2', [cursorId, organizationId])
      : { rowCount: 0 };
    if (rowCount === 0) throw new ServiceError('validation_error', `${cursorField}: no log ${cursorId}`, cursorField);
  }
  const newerFirst = query.before === undefined;

  // Only the conditions asked for are in the statement, so the keyset condition stays an index bound.
  const params: unknown[] = [organizationId];
  const param = (value: unknown) => `$${params.push(value)}`;
  const where = ['l.organization_id = $1'];
  if (cursorId !== undefined) {
    // The cursor's created_at is read in SQL: a JavaScript Date would drop its microseconds.
    where.push(
      `(l.created_at, l.id) ${newerFirst ? '<' : '>'} (SELECT c.created_at, c.id FROM request_logs c WHERE c.id = ${param(cursorId)}::uuid)`,
    );
  }
  if (query.status !== undefined) {
    const hundreds = Number(query.status[0]) * 100;
    if (query.status.endsWith('xx')) {
      where.push(`l.response_status >= ${param(hundreds)} AND l.response_status < ${param(hundreds + 100)}`);
    } else {
      where.push(`l.response_status = ${param(Number(query.status))}`);
    }
  }
  if (query.endpoint !== undefined) {
    // A prefix: LIKE's wildcards in it are meant literally.
    where.push(`l.endpoint LIKE ${param(`${escapeLike(query.endpoint)}%`)}`);
  }
  if (query.apiKeyId !== undefined) {
    if (!isUuid(query.apiKeyId)) return { object: 'list' as const, has_more: false, data: [] };
    where.push(`l.api_key_id = ${param(query.apiKeyId)}`);
  }
  const order = newerFirst ? 'DESC' : 'ASC';
  const { rows } = await db.query<LogRow>(
    `SELECT ${COLUMNS}
       FROM request_logs l LEFT JOIN api_keys k ON k.id = l.api_key_id
      WHERE ${where.join(' AND ')}
      ORDER BY l.created_at ${order}, l.id ${order}
      LIMIT ${param(query.limit + 1)}`,
    params,
  );
  const page = rows.slice(0, query.limit);
  if (!newerFirst) page.reverse();
  return { object: 'list' as const, has_more: rows.length > query.limit, data: page.map(summary) };
}

/** One entry with its (redacted) bodies; another organization's is not found. */
export async function getRequestLog(db: Queryable, organizationId: string, id: string) {
  const { rows } = isUuid(id)
    ? await db.query<LogRow>(
        `SELECT ${COLUMNS}, l.request_body, l.response_body
           FROM request_logs l LEFT JOIN api_keys k ON k.id = l.api_key_id
          WHERE l.id = $1 AND l.organization_id = $2`,
        [id, organizationId],
      )
    : { rows: [] };
  const row = rows[0];
  if (!row) throw notFound('Log');
  return {
    object: 'log' as const,
    ...summary(row),
    request_body: row.request_body ?? null,
    response_body: row.response_body ?? null,
  };
}
