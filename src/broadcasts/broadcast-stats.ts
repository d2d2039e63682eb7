import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { addressKey } from '../platform/address-key.ts';
import { findUnstorableText } from '../platform/text.ts';
import type { BroadcastRow } from './broadcasts.ts';

// What became of a broadcast's copies, read from what the rest of Mailroom records for any message: each
// copy is a row of `emails` with broadcast_id, sent to its one contact (email_recipients: delivered,
// bounced, failed, or no outcome yet), with opens, clicks and complaints in its timeline (email_events,
// each kept once per recipient, a click once per recipient and link). The audience and those left out
// of it are the counts the snapshot stored on the broadcast; contacts still waiting for their copy are
// the snapshot's pending rows.
//
// Every statement starts from the broadcast's own rows through an index (emails_broadcast_idx,
// broadcast_recipients' primary key and its partial pending index), so a broadcast of 100,000 copies is
// aggregated in one pass over its copies, never over the organization's mail.

export interface BroadcastStats {
  /** Contacts of the segment when the audience was taken. */
  audience: number;
  /** Left out: unsubscribed from everything. */
  skipped_unsubscribed: number;
  /** Left out: opted out of the broadcast's topic. */
  skipped_topic: number;
  /** Left out: on the suppression list. */
  skipped_suppressed: number;
  /** Contacts still waiting for their copy to be made. */
  pending: number;
  /** Copies made, with no outcome yet. */
  queued: number;
  /** Copies the receiving server took (delivered, or bounced after it was sent). */
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  complained: number;
  /** Contacts of the audience who unsubscribed (everything, or the topic) after it was taken. */
  unsubscribed: number;
  /** Copies never delivered for a reason of Mailroom's (suppressed at send time, refused, retries exhausted). */
  failed: number;
}

/**
 * Whether the contact of a broadcast_recipients row `br` of broadcast `b` (aliases in the caller's SQL)
 * has unsubscribed since the audience was taken (sent_at): from everything, or from the broadcast's
 * topic. Mailroom keeps a contact's current choice and when it was made, not which link made it, so
 * this counts those who left afterwards, by the broadcast's link or otherwise.
 */
const UNSUBSCRIBED_SINCE = `(
  EXISTS (SELECT 1 FROM contacts c WHERE c.id = br.contact_id AND c.unsubscribed AND c.updated_at >= b.sent_at)
  OR EXISTS (SELECT 1 FROM contact_topics ct
              WHERE ct.contact_id = br.contact_id AND ct.topic_id = b.topic_id
                AND ct.subscription = 'opt_out' AND ct.updated_at >= b.sent_at))`;

/** The broadcast's figures, in one statement. */
export async function broadcastStats(db: Queryable, broadcast: BroadcastRow): Promise<BroadcastStats> {
  const { rows } = await db.query<Omit<BroadcastStats, 'audience' | `skipped_${string}`>>(
    `WITH b AS (SELECT id, topic_id, sent_at FROM broadcasts WHERE id = $1),
     outcomes AS (
       SELECT count(*) FILTER (WHERE r.status = 'pending' AND e.status <> 'canceled')::int AS queued,
              count(*) FILTER (WHERE r.status IN ('delivered', 'bounced'))::int AS sent,
              count(*) FILTER (WHERE r.status = 'delivered')::int AS delivered,
              count(*) FILTER (WHERE r.status = 'bounced')::int AS bounced,
              count(*) FILTER (WHERE r.status = 'failed')::int AS failed
         FROM emails e JOIN email_recipients r ON r.email_id = e.id
        WHERE e.broadcast_id = $1
     ),
     engagement AS (
       SELECT count(DISTINCT ev.email_id) FILTER (WHERE ev.type = 'opened')::int AS opened,
              count(DISTINCT ev.email_id) FILTER (WHERE ev.type = 'clicked')::int AS clicked,
              count(DISTINCT ev.email_id) FILTER (WHERE ev.type = 'complained')::int AS complained
         FROM emails e JOIN email_events ev ON ev.email_id = e.id
        WHERE e.broadcast_id = $1 AND ev.type IN ('opened', 'clicked', 'complained')
     )
     SELECT (SELECT count(*)::int FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'pending') AS pending,
            outcomes.*, engagement.*,
            (SELECT count(*)::int FROM broadcast_recipients br, b
              WHERE br.broadcast_id = $1 AND br.status = 'queued' AND ${UNSUBSCRIBED_SINCE}) AS unsubscribed
       FROM outcomes, engagement`,
    [broadcast.id],
  );
  const row = rows[0]!;
  return {
    audience: broadcast.audience_count,
    skipped_unsubscribed: broadcast.skipped_unsubscribed,
    skipped_topic: broadcast.skipped_topic,
    skipped_suppressed: broadcast.skipped_suppressed,
    pending: row.pending,
    queued: row.queued,
    sent: row.sent,
    delivered: row.delivered,
    opened: row.opened,
    clicked: row.clicked,
    bounced: row.bounced,
    complained: row.complained,
    unsubscribed: row.unsubscribed,
    failed: row.failed,
  };
}

export const RECIPIENT_TYPES = [
  'sent',
  'delivered',
  'opened',
  'clicked',
  'bounced',
  'complained',
  'unsubscribed',
  'suppressed',
] as const;
export type RecipientType = (typeof RECIPIENT_TYPES)[number];
export const BOUNCE_TYPES = ['permanent', 'transient', 'undetermined'] as const;
export type BounceType = (typeof BOUNCE_TYPES)[number];

/** Largest page of recipients or links; also the page size when none is asked for (the lists may be long). */
export const LIST_LIMIT_MAX = 100;

export interface ListQuery {
  limit?: number;
  after?: string;
  before?: string;
}

export interface BroadcastRecipient {
  /** An opaque cursor for this row (for `after` and `before`). */
  id: string;
  contact_id: string | null;
  email: string;
  count?: number;
  clicked_links?: Array<{ url: string; clicks: number }>;
  bounce_type?: BounceType;
}

/** The bounce type as Resend names it, from a bounce's kind (hard, soft, anything else). */
const BOUNCE_TYPE_SQL = `(SELECT CASE ev.data #>> '{bounce,type}' WHEN 'hard' THEN 'permanent'
                                      WHEN 'soft' THEN 'transient' ELSE 'undetermined' END
                           FROM email_events ev WHERE ev.email_id = br.email_id AND ev.type = 'bounced'
                          ORDER BY ev.created_at LIMIT 1)`;

/** Which snapshot rows (`br`, their copy's recipient `r`, the broadcast `b`) each type lists. */
const RECIPIENT_CONDITIONS: Record<RecipientType, string> = {
  sent: `r.status IN ('delivered', 'bounced')`,
  delivered: `r.status = 'delivered'`,
  opened: `EXISTS (SELECT 1 FROM email_events ev WHERE ev.email_id = br.email_id AND ev.type = 'opened')`,
  clicked: `EXISTS (SELECT 1 FROM email_events ev WHERE ev.email_id = br.email_id AND ev.type = 'clicked')`,
  bounced: `r.status = 'bounced'`,
  complained: `EXISTS (SELECT 1 FROM email_events ev WHERE ev.email_id = br.email_id AND ev.type = 'complained')`,
  unsubscribed: `(br.status = 'skipped' AND br.skip_reason IN ('unsubscribed', 'topic'))
                  OR (br.status = 'queued' AND ${UNSUBSCRIBED_SINCE})`,
  suppressed: `(br.status = 'skipped' AND br.skip_reason = 'suppressed')
                OR (r.status = 'failed' AND r.failure_reason = 'suppressed')`,
};

/** What each type adds to a row. */
const RECIPIENT_EXTRAS: Partial<Record<RecipientType, string>> = {
  opened: `, (SELECT count(*)::int FROM email_events ev WHERE ev.email_id = br.email_id AND ev.type = 'opened') AS count`,
  clicked: `, (SELECT count(*)::int FROM email_events ev WHERE ev.email_id = br.email_id AND ev.type = 'clicked') AS count,
              (SELECT coalesce(jsonb_agg(jsonb_build_object('url', link.url, 'clicks', link.clicks) ORDER BY link.url), '[]')
                 FROM (SELECT ev.data #>> '{click,link}' AS url, count(*)::int AS clicks
                         FROM email_events ev WHERE ev.email_id = br.email_id AND ev.type = 'clicked'
                        GROUP BY 1) link) AS clicked_links`,
  bounced: `, ${BOUNCE_TYPE_SQL} AS bounce_type`,
};

/** The largest PostgreSQL int, the type of the counts a clicked-links cursor carries. */
const INT_MAX = 2 ** 31 - 1;

const encodeCursor = (value: string) => Buffer.from(value, 'utf8').toString('base64url');
function decodeCursor(value: string, field: string): string {
  const decoded = /^[A-Za-z0-9_-]+$/.test(value) ? Buffer.from(value, 'base64url').toString('utf8') : '';
  if (decoded === '' || encodeCursor(decoded) !== value) {
    throw new ServiceError('validation_error', `${field}: not a cursor of this list: ${value}`, field);
  }
  return decoded;
}

function cursorOf(query: ListQuery): { field: 'after' | 'before'; value: string } | undefined {
  if (query.after !== undefined && query.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  if (query.after !== undefined) return { field: 'after', value: decodeCursor(query.after, 'after') };
  if (query.before !== undefined) return { field: 'before', value: decodeCursor(query.before, 'before') };
  return undefined;
}

/**
 * GET /broadcasts/:id/recipients: the contacts of the audience an event type applies to, in contact id
 * order (the snapshot's key), a page at a time. `email` narrows to one address.
 */
export async function listBroadcastRecipients(
  db: Queryable,
  broadcast: BroadcastRow,
  query: ListQuery & { type: RecipientType; email?: string; bounce_type?: BounceType },
): Promise<{ object: 'list'; has_more: boolean; data: BroadcastRecipient[] }> {
  if (query.bounce_type !== undefined && query.type !== 'bounced') {
    throw new ServiceError('validation_error', 'bounce_type applies only to type=bounced', 'bounce_type');
  }
  const cursor = cursorOf(query);
  if (cursor && !isUuid(cursor.value)) {
    throw new ServiceError('validation_error', `${cursor.field}: not a cursor of this list`, cursor.field);
  }
  const limit = query.limit ?? LIST_LIMIT_MAX;
  const params: unknown[] = [broadcast.id];
  const where = [`br.broadcast_id = $1`, `(${RECIPIENT_CONDITIONS[query.type]})`];
  if (query.email !== undefined) where.push(`lower(br.email) = $${params.push(addressKey(query.email.trim()))}`);
  if (query.bounce_type !== undefined) where.push(`${BOUNCE_TYPE_SQL} = $${params.push(query.bounce_type)}`);
  const forward = cursor?.field !== 'before';
  if (cursor) where.push(`br.contact_id ${forward ? '>' : '<'} $${params.push(cursor.value)}::uuid`);
  const order = forward ? 'ASC' : 'DESC';
  const { rows } = await db.query<{
    key: string;
    contact_id: string | null;
    email: string;
    count?: number;
    clicked_links?: Array<{ url: string; clicks: number }>;
    bounce_type?: BounceType;
  }>(
    `SELECT br.contact_id AS key,
            (SELECT c.id FROM contacts c WHERE c.id = br.contact_id) AS contact_id,
            coalesce(r.address, br.email) AS email${RECIPIENT_EXTRAS[query.type] ?? ''}
       FROM broadcast_recipients br
       JOIN broadcasts b ON b.id = br.broadcast_id
       LEFT JOIN email_recipients r ON r.email_id = br.email_id
      WHERE ${where.join(' AND ')}
      ORDER BY br.contact_id ${order}
      LIMIT $${params.push(limit + 1)}`,
    params,
  );
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  if (!forward) page.reverse();
  return {
    object: 'list',
    has_more: hasMore,
    data: page.map((row) => ({
      id: encodeCursor(row.key),
      // The snapshot outlives a deleted contact, which then reads as none (Resend's "if one exists").
      contact_id: row.contact_id,
      email: row.email,
      ...(row.count !== undefined ? { count: row.count } : {}),
      ...(row.clicked_links !== undefined ? { clicked_links: row.clicked_links } : {}),
      ...(row.bounce_type !== undefined ? { bounce_type: row.bounce_type } : {}),
    })),
  };
}

export interface ClickedLink {
  /** An opaque cursor for this row (for `after` and `before`); it names nothing else. */
  id: string;
  url: string;
  /** Clicks on the link: Mailroom records one per recipient and link, so this equals unique_clicks. */
  clicks: number;
  /** Recipients who clicked the link. */
  unique_clicks: number;
}

/**
 * GET /broadcasts/:id/clicked-links: each link its copies' recipients clicked, most clicked first (then by
 * URL), a page at a time. The cursor carries the row's place in that order.
 */
export async function listClickedLinks(
  db: Queryable,
  broadcast: BroadcastRow,
  query: ListQuery,
): Promise<{ object: 'list'; has_more: boolean; data: ClickedLink[] }> {
  const cursor = cursorOf(query);
  let place: [number, string] | undefined;
  if (cursor) {
    try {
      const parsed: unknown = JSON.parse(cursor.value);
      // Exactly what a row's id carries: a count PostgreSQL reads as an int, and a URL it can compare
      // (no NUL, no lone surrogate, which a JSON escape can spell).
      if (
        Array.isArray(parsed) &&
        parsed.length === 2 &&
        Number.isSafeInteger(parsed[0]) &&
        (parsed[0] as number) >= 0 &&
        (parsed[0] as number) <= INT_MAX &&
        typeof parsed[1] === 'string' &&
        findUnstorableText(parsed[1]) === undefined
      ) {
        place = [parsed[0] as number, parsed[1]];
      }
    } catch {
      // Not JSON: refused below.
    }
    if (!place) throw new ServiceError('validation_error', `${cursor.field}: not a cursor of this list`, cursor.field);
  }
  const limit = query.limit ?? LIST_LIMIT_MAX;
  const forward = cursor?.field !== 'before';
  const params: unknown[] = [broadcast.id];
  let past = '';
  if (place) {
    const clicks = `$${params.push(place[0])}::int`;
    const url = `$${params.push(place[1])}::text`;
    // Forward: fewer clicks, or as many with a later URL; backward the reverse.
    past = forward
      ? `WHERE clicks < ${clicks} OR (clicks = ${clicks} AND url > ${url})`
      : `WHERE clicks > ${clicks} OR (clicks = ${clicks} AND url < ${url})`;
  }
  const { rows } = await db.query<{ url: string; clicks: number; unique_clicks: number }>(
    `SELECT url, clicks, unique_clicks FROM (
       SELECT ev.data #>> '{click,link}' AS url, count(*)::int AS clicks,
              count(DISTINCT (ev.email_id, ev.recipient))::int AS unique_clicks
         FROM emails e JOIN email_events ev ON ev.email_id = e.id
        WHERE e.broadcast_id = $1 AND ev.type = 'clicked' AND ev.data #>> '{click,link}' IS NOT NULL
        GROUP BY 1) links
     ${past}
     ORDER BY clicks ${forward ? 'DESC' : 'ASC'}, url ${forward ? 'ASC' : 'DESC'}
     LIMIT $${params.push(limit + 1)}`,
    params,
  );
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  if (!forward) page.reverse();
  return {
    object: 'list',
    has_more: hasMore,
    data: page.map((row) => ({ id: encodeCursor(JSON.stringify([row.clicks, row.url])), ...row })),
  };
}
