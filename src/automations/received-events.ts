import { Type, type Static } from 'typebox';
import type { Queryable } from '../platform/db/database.ts';
import { PAGE_LIMIT_MAX, type Page } from '../platform/db/keyset-page.ts';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';

// The events an organization has sent (GET /received-events, Mailroom's own, for the dashboard): newest
// first, optionally of one name, a page at a time. Pages are cut by keyset on (received_at, id), one
// range of an index; `after` names the last event of the previous page. There can be many, so a page
// has DEFAULT_LIMIT events unless `limit` says otherwise.

export const DEFAULT_LIMIT = 50;

export const ReceivedEventsQuery = Type.Object(
  {
    event: Type.Optional(Type.String({ maxLength: 200, description: 'Only events of this name' })),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: PAGE_LIMIT_MAX, description: `1 to 100; ${DEFAULT_LIMIT} without it` }),
    ),
    after: Type.Optional(Type.String({ maxLength: 100, description: 'An id: the page of events after it' })),
  },
  { additionalProperties: false },
);
export type ReceivedEventsRequest = Static<typeof ReceivedEventsQuery>;

interface ReceivedEventRow {
  id: string;
  name: string;
  contact_id: string | null;
  email: string | null;
  payload: Record<string, unknown>;
  received_at: Date;
  processed_at: Date | null;
}

export interface ReceivedEventView {
  object: 'received_event';
  id: string;
  event: string;
  /** The contact it is about: the one named when sent, else the one the worker found or created. */
  contact_id: string | null;
  email: string | null;
  payload: Record<string, unknown>;
  received_at: string;
  /** When automations acted on it; null while it waits. */
  processed_at: string | null;
}

export async function listReceivedEvents(
  db: Queryable,
  organizationId: string,
  query: ReceivedEventsRequest,
): Promise<Page<ReceivedEventView>> {
  const limit = query.limit ?? DEFAULT_LIMIT;
  const params: unknown[] = [organizationId];
  let where = 'organization_id = $1';
  if (query.event !== undefined) where += ` AND name = $${params.push(query.event)}`;
  if (query.after !== undefined) {
    const cursor = `$${params.push(query.after)}::uuid`;
    const found = isUuid(query.after)
      ? await db.query('SELECT 1 FROM received_events WHERE organization_id = $1 AND id = $2', [
          organizationId,
          query.after,
        ])
      : { rowCount: 0 };
    if (found.rowCount === 0)
      throw new ServiceError('validation_error', `after: no such event ${query.after}`, 'after');
    where += ` AND (received_at, id) < (SELECT c.received_at, c.id FROM received_events c WHERE c.id = ${cursor})`;
  }
  const { rows } = await db.query<ReceivedEventRow>(
    `SELECT id, name, contact_id, email, payload, received_at, processed_at FROM received_events
      WHERE ${where} ORDER BY received_at DESC, id DESC LIMIT $${params.push(limit + 1)}`,
    params,
  );
  const hasMore = rows.length > limit;
  return { object: 'list', has_more: hasMore, data: rows.slice(0, limit).map(toView) };
}

function toView(row: ReceivedEventRow): ReceivedEventView {
  return {
    object: 'received_event',
    id: row.id,
    event: row.name,
    contact_id: row.contact_id,
    email: row.email,
    payload: row.payload,
    received_at: new Date(row.received_at).toISOString(),
    processed_at: row.processed_at === null ? null : new Date(row.processed_at).toISOString(),
  };
}
