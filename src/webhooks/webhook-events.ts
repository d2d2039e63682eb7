import type { Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { requireEndpoint } from './endpoints.ts';
import { WEBHOOK_QUEUE } from './delivery-jobs.ts';

// Resend's SDK's view of an endpoint's deliveries (resend.webhooks.events.*): each delivery is a
// "webhook event" named by the delivery's id, with its status in the SDK's words, the body it sends and
// its attempts. A replay is a new delivery, so a new "event" with its own id (the body's evt_ id stays).

export const EVENT_PAGE_DEFAULT = 20;
export const EVENT_PAGE_MAX = 100;

type LogStatus = 'success' | 'pending' | 'failed' | 'attempting';

interface DeliveryRow {
  id: string;
  event_type: string;
  status: string;
  attempts: number;
  created_at: Date;
}

/** pending before the first attempt, attempting between retries, then success or failed. */
function logStatus(row: DeliveryRow): LogStatus {
  if (row.status === 'succeeded') return 'success';
  if (row.status === 'failed') return 'failed';
  return row.attempts === 0 ? 'pending' : 'attempting';
}

const logItem = (row: DeliveryRow) => ({
  id: row.id,
  type: row.event_type,
  created_at: row.created_at.toISOString(),
  status: logStatus(row),
});

interface Page {
  limit: number;
  after?: string;
  before?: string;
}

function cursorOf(page: Page): { cursor: string | undefined; field: 'after' | 'before' } {
  if (page.after !== undefined && page.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  return { cursor: page.after ?? page.before, field: page.after !== undefined ? 'after' : 'before' };
}

/** GET /webhooks/:id/events: the endpoint's deliveries, newest first, cut by keyset on (created_at, id). */
export async function listWebhookEvents(db: Queryable, organizationId: string, endpointId: string, page: Page) {
  await requireEndpoint(db, organizationId, endpointId);
  const { cursor, field } = cursorOf(page);
  if (cursor !== undefined && !(await deliveryExists(db, endpointId, cursor))) {
    throw new ServiceError('validation_error', `${field}: no event ${cursor} of this webhook`, field);
  }
  const newerFirst = page.before === undefined;
  const order = newerFirst ? 'DESC' : 'ASC';
  const { rows } = await db.query<DeliveryRow>(
    `SELECT id, event_type, status, attempts, created_at FROM webhook_deliveries
      WHERE endpoint_id = $1
        AND ($2::uuid IS NULL OR (created_at, id) ${newerFirst ? '<' : '>'}
             (SELECT c.created_at, c.id FROM webhook_deliveries c WHERE c.id = $2::uuid))
      ORDER BY created_at ${order}, id ${order} LIMIT $3`,
    [endpointId, cursor ?? null, page.limit + 1],
  );
  const data = rows.slice(0, page.limit);
  if (!newerFirst) data.reverse();
  return { object: 'list' as const, has_more: rows.length > page.limit, data: data.map(logItem) };
}

/**
 * GET /webhooks/:id/events/:event_id: one delivery with the body it sends and when it is tried next. A
 * job failed for good is due never (run_at 'infinity', read as the number Infinity, not a Date): it is no
 * next attempt.
 */
export async function getWebhookEvent(db: Queryable, organizationId: string, endpointId: string, eventId: string) {
  await requireEndpoint(db, organizationId, endpointId);
  if (!isUuid(eventId)) throw notFound('Webhook event');
  const { rows } = await db.query<DeliveryRow & { payload: unknown; next_attempt_at: Date | null }>(
    `SELECT d.id, d.event_type, d.status, d.attempts, d.created_at, d.payload,
            (SELECT min(j.run_at) FROM jobs j
              WHERE j.queue = $3 AND j.group_key = d.endpoint_id::text AND j.payload ->> 'delivery_id' = d.id::text
                AND d.status = 'pending' AND j.failed_at IS NULL) AS next_attempt_at
       FROM webhook_deliveries d WHERE d.id = $1 AND d.endpoint_id = $2`,
    [eventId, endpointId, WEBHOOK_QUEUE],
  );
  const row = rows[0];
  if (!row) throw notFound('Webhook event');
  return {
    object: 'webhook_event' as const,
    ...logItem(row),
    next_attempt_at: row.next_attempt_at?.toISOString() ?? null,
    payload: row.payload,
  };
}

interface AttemptRow {
  attempt: number;
  request_id: string;
  status_code: number | null;
  response: string | null;
  error: string | null;
  created_at: Date;
}

/**
 * GET /webhooks/:id/events/:event_id/attempts: newest first. An attempt that got no HTTP answer reads
 * http_status_code 0 and its error as the response (the SDK types both as always present).
 */
export async function listWebhookEventAttempts(
  db: Queryable,
  organizationId: string,
  endpointId: string,
  eventId: string,
  page: Page,
) {
  await requireEndpoint(db, organizationId, endpointId);
  if (!isUuid(eventId) || !(await deliveryExists(db, endpointId, eventId))) throw notFound('Webhook event');
  const { cursor, field } = cursorOf(page);
  let from: number | null = null;
  if (cursor !== undefined) {
    const { rows } = isUuid(cursor)
      ? await db.query<{ attempt: number }>(
          'SELECT attempt FROM webhook_attempts WHERE delivery_id = $1 AND request_id = $2',
          [eventId, cursor],
        )
      : { rows: [] };
    if (!rows[0]) throw new ServiceError('validation_error', `${field}: no attempt ${cursor} of this event`, field);
    from = rows[0].attempt;
  }
  const newerFirst = page.before === undefined;
  const order = newerFirst ? 'DESC' : 'ASC';
  const { rows } = await db.query<AttemptRow>(
    `SELECT attempt, request_id, status_code, response, error, created_at FROM webhook_attempts
      WHERE delivery_id = $1 AND ($2::int IS NULL OR attempt ${newerFirst ? '<' : '>'} $2::int)
      ORDER BY attempt ${order} LIMIT $3`,
    [eventId, from, page.limit + 1],
  );
  const data = rows.slice(0, page.limit);
  if (!newerFirst) data.reverse();
  return {
    object: 'list' as const,
    has_more: rows.length > page.limit,
    data: data.map((row) => ({
      id: row.request_id,
      attempt: row.attempt,
      http_status_code: row.status_code ?? 0,
      response: row.status_code === null ? (row.error ?? '') : (row.response ?? ''),
      error: row.error,
      sent_at: row.created_at.toISOString(),
    })),
  };
}

async function deliveryExists(db: Queryable, endpointId: string, id: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  const { rowCount } = await db.query('SELECT 1 FROM webhook_deliveries WHERE id = $1 AND endpoint_id = $2', [
    id,
    endpointId,
  ]);
  return (rowCount ?? 0) > 0;
}
