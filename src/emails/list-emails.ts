import { escapeLike } from '../platform/db/like-pattern.ts';
import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { addressKey } from '../platform/address-key.ts';
import type { EmailRecord } from './read-email.ts';
import { lastEventOf, lastEventSql, type LastEvent } from './last-event.ts';

// GET /emails: an organization's messages, newest first, a page at a time. Pages are cut by keyset on
// (created_at, id), the order of the index emails_list_idx, so a page is one index range scan whether the
// organization has a thousand messages or a million; `after` and `before` name the email a page starts
// past. Filters narrow that scan: `recipient` starts from the recipient index instead; `last_event`,
// `from`, `tag` and `search` are checked on each row the scan passes, so a filter that matches only a rare
// message reads further to fill its page (a search for a word no message has reads every message of the
// organization in the created range). `search` has no index of its own: a trigram index would cost every
// send two more index writes, on the path whose throughput matters most, to speed up a dashboard search.

export const LIST_LIMIT_DEFAULT = 20;
export const LIST_LIMIT_MAX = 100;

export interface EmailListQuery {
  limit: number;
  /** The page of messages older than this email (the previous page's last `id`). */
  after?: string;
  /** The page of messages newer than this email (the next page's first `id`). */
  before?: string;
  lastEvent?: LastEvent;
  /** Any recipient (to, cc or bcc), compared as addresses are. */
  recipient?: string;
  /** The sender's address (the address of `from`, whatever its display name). */
  from?: string;
  /** `name` or `name:value`: a tag the message was sent with. */
  tag?: string;
  /** Part of a recipient's address (to, cc or bcc) or of the subject, in any case. */
  search?: string;
  createdAfter?: Date;
  createdBefore?: Date;
}

/** The columns of a message that its list item shows. */
type ListedRow = Pick<
  EmailRecord,
  | 'id'
  | 'from'
  | 'to'
  | 'cc'
  | 'bcc'
  | 'reply_to'
  | 'subject'
  | 'topic_id'
  | 'message_id'
  | 'status'
  | 'scheduled_at'
  | 'created_at'
  | 'last_event'
>;

export async function listEmails(db: Queryable, organizationId: string, query: EmailListQuery) {
  if (query.after !== undefined && query.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  const cursorId = query.after ?? query.before;
  const cursorField = query.after !== undefined ? 'after' : 'before';
  if (cursorId !== undefined) {
    const { rowCount } = isUuid(cursorId)
      ? await db.query('SELECT 1 FROM emails WHERE id = $1 AND organization_id = $2', [cursorId, organizationId])
      : { rowCount: 0 };
    if (rowCount === 0) throw new ServiceError('validation_error', `${cursorField}: no email ${cursorId}`, cursorField);
  }
  const newerFirst = query.before === undefined;

  // Only the conditions asked for are in the statement, so that each combination is planned on its own
  // and the keyset condition is always an index bound (never hidden behind "$n IS NULL OR …").
  const params: unknown[] = [organizationId];
  const param = (value: unknown) => `$${params.push(value)}`;
  const where = ['e.organization_id = $1'];
  if (cursorId !== undefined) {
    // The cursor's created_at is read in SQL: a JavaScript Date would drop its microseconds.
    where.push(
      `(e.created_at, e.id) ${newerFirst ? '<' : '>'} (SELECT c.created_at, c.id FROM emails c WHERE c.id = ${param(cursorId)}::uuid)`,
    );
  }
  if (query.lastEvent !== undefined) {
    where.push(`${lastEventSql('e.status', 'last.type')} = ${param(query.lastEvent)}`);
  }
  if (query.recipient !== undefined) {
    where.push(
      `e.id IN (SELECT email_id FROM email_recipients WHERE lower(address) = ${param(addressKey(query.recipient.trim()))})`,
    );
  }
  if (query.from !== undefined) {
    const from = param(addressKey(query.from.trim()));
    where.push(`(lower(e."from") = ${from} OR right(lower(e."from"), length(${from}) + 2) = '<' || ${from} || '>')`);
  }
  if (query.tag !== undefined) where.push(tagCondition(query.tag, param));
  if (query.search !== undefined && query.search.trim() !== '') {
    // Lower-cased by the database on both sides, so that "any case" is the database's own idea of it.
    const pattern = `lower(${param(`%${escapeLike(query.search.trim())}%`)})`;
    where.push(`(lower(e.subject) LIKE ${pattern} ESCAPE '\\'
      OR EXISTS (SELECT 1 FROM email_recipients r
                  WHERE r.email_id = e.id AND lower(r.address) LIKE ${pattern} ESCAPE '\\'))`);
  }
  if (query.createdAfter !== undefined) where.push(`e.created_at >= ${param(query.createdAfter)}`);
  if (query.createdBefore !== undefined) where.push(`e.created_at < ${param(query.createdBefore)}`);
  const order = newerFirst ? 'DESC' : 'ASC';

  const { rows } = await db.query<ListedRow>(
    `SELECT e.id, e."from", e."to", e.cc, e.bcc, e.reply_to, e.subject, e.topic_id, e.message_id, e.status,
            e.scheduled_at, e.created_at, last.type AS last_event
       FROM emails e
       LEFT JOIN LATERAL (SELECT type FROM email_events WHERE email_id = e.id
                           ORDER BY created_at DESC, seq DESC LIMIT 1) last ON true
      WHERE ${where.join(' AND ')}
      ORDER BY e.created_at ${order}, e.id ${order}
      LIMIT ${param(query.limit + 1)}`,
    params,
  );
  const page = rows.slice(0, query.limit);
  if (!newerFirst) page.reverse();
  return { object: 'list' as const, has_more: rows.length > query.limit, data: page.map(listItem) };
}

/**
 * A tag as sent: `{ "name": "value" }`, or a list of `{ name, value }` objects or of bare names. `name`
 * matches a tag of that name whatever its value; `name:value` matches that value (compared as text).
 */
function tagCondition(tag: string, param: (value: unknown) => string): string {
  const colon = tag.indexOf(':');
  const name = param(colon < 0 ? tag : tag.slice(0, colon));
  if (colon < 0) {
    return `CASE jsonb_typeof(e.tags)
      WHEN 'object' THEN e.tags ? ${name}
      WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements(e.tags) tag
                                 WHERE tag #>> '{}' = ${name} OR tag ->> 'name' = ${name})
      ELSE false END`;
  }
  const value = param(tag.slice(colon + 1));
  return `CASE jsonb_typeof(e.tags)
      WHEN 'object' THEN e.tags ->> ${name} = ${value}
      WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements(e.tags) tag
                                 WHERE tag ->> 'name' = ${name} AND tag ->> 'value' = ${value})
      ELSE false END`;
}

/** Resend's list item: the message as read by GET /emails/:id, without its bodies, tags and headers. */
function listItem(row: ListedRow) {
  return {
    id: row.id,
    from: row.from,
    to: row.to,
    cc: row.cc,
    bcc: row.bcc,
    reply_to: row.reply_to,
    subject: row.subject,
    topic_id: row.topic_id,
    message_id: row.message_id,
    created_at: row.created_at.toISOString(),
    scheduled_at: row.scheduled_at?.toISOString() ?? null,
    last_event: lastEventOf(row.status, row.last_event),
  };
}
