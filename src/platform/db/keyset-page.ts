import { Type, type Static } from 'typebox';
import type { Queryable } from './database.ts';
import { ServiceError } from '../errors.ts';
import { isUuid } from '../ids.ts';

// Resend's list pages for an organization's resources (domains, API keys, templates, topics): `limit`,
// and `after` or `before` naming the item a page starts past. Pages are cut by keyset on (created_at,
// id), so a page is one index range; a cursor is read in SQL, since a JavaScript Date drops microseconds.
// Without `limit` the whole list comes back in one answer (has_more false), as Resend's do, so a client
// written before Resend paged these lists still sees every item.

export const PAGE_LIMIT_MAX = 100;

export const PageQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: PAGE_LIMIT_MAX, description: '1 to 100; without it, every item' }),
    ),
    after: Type.Optional(Type.String({ maxLength: 100, description: 'An id: the page of items after it' })),
    before: Type.Optional(Type.String({ maxLength: 100, description: 'An id: the page of items before it' })),
  },
  { additionalProperties: false },
);
export type PageRequest = Static<typeof PageQuery>;

export interface Page<T> {
  object: 'list';
  has_more: boolean;
  data: T[];
}

export interface PageSource {
  /** The table, with organization_id, created_at and a uuid id. */
  table: string;
  /** The columns to read (of `table`, unqualified). */
  columns: string;
  organizationId: string;
  /** Newest first (Resend's order), or oldest first. */
  newestFirst: boolean;
  /** A further condition on the rows listed (e.g. not revoked); a cursor must satisfy it too. */
  where?: string;
}

/** One page of an organization's rows; a cursor that names no listed row is a 400 on that field. */
export async function keysetPage<Row>(db: Queryable, source: PageSource, page: PageRequest): Promise<Page<Row>> {
  if (page.after !== undefined && page.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  const listed = `organization_id = $1${source.where ? ` AND (${source.where})` : ''}`;
  const cursor = page.after ?? page.before;
  const field = page.after !== undefined ? 'after' : 'before';
  if (cursor !== undefined) {
    const { rowCount } = isUuid(cursor)
      ? await db.query(`SELECT 1 FROM ${source.table} WHERE ${listed} AND id = $2`, [source.organizationId, cursor])
      : { rowCount: 0 };
    if (rowCount === 0) throw new ServiceError('validation_error', `${field}: no such item ${cursor}`, field);
  }
  // `before` walks the other way from the cursor, then the page is turned back into list order.
  const forward = page.before === undefined;
  const descending = source.newestFirst === forward;
  const order = descending ? 'DESC' : 'ASC';
  const params: unknown[] = [source.organizationId];
  let where = listed;
  if (cursor !== undefined) {
    params.push(cursor);
    where += ` AND (created_at, id) ${descending ? '<' : '>'} (SELECT c.created_at, c.id FROM ${source.table} c WHERE c.id = $2::uuid)`;
  }
  let limit = '';
  if (page.limit !== undefined) limit = `LIMIT $${params.push(page.limit + 1)}`;
  const { rows } = await db.query<Row>(
    `SELECT ${source.columns} FROM ${source.table} WHERE ${where} ORDER BY created_at ${order}, id ${order} ${limit}`,
    params,
  );
  const hasMore = page.limit !== undefined && rows.length > page.limit;
  const data = hasMore ? rows.slice(0, page.limit) : rows;
  if (!forward) data.reverse();
  return { object: 'list', has_more: hasMore, data };
}
