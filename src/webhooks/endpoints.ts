import { randomBytes, randomUUID } from 'node:crypto';
import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage } from '../platform/db/keyset-page.ts';
import { parseEndpointUrl } from './endpoint-address.ts';
import { isEventType } from './event-types.ts';
import { cancelGroupJobs, groupChanged } from '../queue/jobs.ts';
import { queueDeliveriesFrom, WEBHOOK_QUEUE } from './delivery-jobs.ts';
import { sampleEventData } from './test-events.ts';

// Webhook endpoints of an organization. The signing secret is in the answer to creating, reading and
// rotating an endpoint, never in listings. A rotation keeps the previous secret signing too for 24 hours,
// so receivers can switch without losing a delivery.
//
// A disabled endpoint gets no new deliveries: events are not fanned out to it, and disabling it fails
// its pending deliveries (failure "endpoint_disabled", their jobs removed) in the same transaction, so
// that nothing waits for ever and "replay all failed since" can send them once it is enabled again.

interface EndpointRow {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  created_at: Date;
}

export type EndpointStatus = 'enabled' | 'disabled';

const COLUMNS = 'id, url, events, enabled, created_at';

/** Endpoints a list answer holds at most, and when no limit is asked for. */
export const ENDPOINT_PAGE_MAX = 100;
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

export function toView(row: EndpointRow) {
  return {
    object: 'webhook' as const,
    id: row.id,
    endpoint: row.url,
    events: row.events,
    status: row.enabled ? ('enabled' as const) : ('disabled' as const),
    created_at: row.created_at.toISOString(),
  };
}

function checkEvents(events: string[]): string[] {
  const unknown = events.filter((event) => !isEventType(event));
  if (unknown.length > 0) {
    throw new ServiceError('validation_error', `Unknown event type(s): ${unknown.join(', ')}`, 'events');
  }
  return [...new Set(events)];
}

export async function createEndpoint(
  db: Queryable,
  config: Config,
  organizationId: string,
  input: { endpoint: string; events: string[] },
) {
  const url = await parseEndpointUrl(input.endpoint, config);
  const events = checkEvents(input.events);
  const secret = newSecret();
  const { rows } = await db.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (organization_id, url, events, signing_secret) VALUES ($1, $2, $3::jsonb, $4)
     RETURNING ${COLUMNS}`,
    [organizationId, url.toString(), JSON.stringify(events), secret],
  );
  return { ...toView(rows[0]!), signing_secret: secret };
}

/**
 * Newest first, `limit` at a time, cut by keyset on (created_at, id): `after` names the last endpoint of
 * the previous page (older ones follow), `before` the first of the next page (newer ones).
 */
export async function listEndpoints(
  db: Queryable,
  organizationId: string,
  page: { limit: number; after?: string; before?: string },
) {
  const listed = await keysetPage<EndpointRow>(
    db,
    { table: 'webhook_endpoints', columns: COLUMNS, organizationId, newestFirst: true },
    page,
  );
  return { ...listed, data: listed.data.map(toView) };
}

/** One endpoint with its signing secret (Resend's shape: the SDK's GetWebhookResponse has it). */
export async function getEndpoint(db: Queryable, organizationId: string, id: string) {
  if (!isUuid(id)) throw notFound('Webhook');
  const { rows } = await db.query<EndpointRow & { signing_secret: string }>(
    `SELECT ${COLUMNS}, signing_secret FROM webhook_endpoints WHERE id = $1 AND organization_id = $2`,
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Webhook');
  return { ...toView(rows[0]), signing_secret: rows[0].signing_secret };
}

export async function updateEndpoint(
  db: Database,
  config: Config,
  organizationId: string,
  id: string,
  changes: { endpoint?: string; events?: string[]; status?: EndpointStatus },
) {
  await requireEndpoint(db, organizationId, id);
  const url = changes.endpoint === undefined ? null : (await parseEndpointUrl(changes.endpoint, config)).toString();
  const events = changes.events === undefined ? null : JSON.stringify(checkEvents(changes.events));
  const enabled = changes.status === undefined ? null : changes.status === 'enabled';
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<EndpointRow>(
      `UPDATE webhook_endpoints SET url = coalesce($3, url), events = coalesce($4::jsonb, events),
              enabled = coalesce($5, enabled)
        WHERE id = $1 AND organization_id = $2 RETURNING ${COLUMNS}`,
      [id, organizationId, url, events, enabled],
    );
    if (!rows[0]) throw notFound('Webhook');
    if (enabled === false) {
      await cancelGroupJobs(tx, WEBHOOK_QUEUE, id);
      await tx.query(
        `UPDATE webhook_deliveries SET status = 'failed', failure = 'endpoint_disabled', updated_at = now()
          WHERE endpoint_id = $1 AND status = 'pending'`,
        [id],
      );
    } else {
      await groupChanged(tx, WEBHOOK_QUEUE, id);
    }
    return toView(rows[0]);
  });
}

/** Deletes the endpoint; its deliveries (cascade) and their queued jobs go with it, in one transaction. */
export async function deleteEndpoint(db: Database, organizationId: string, id: string): Promise<void> {
  if (!isUuid(id)) throw notFound('Webhook');
  await db.transaction(async (tx) => {
    const { rowCount } = await tx.query('DELETE FROM webhook_endpoints WHERE id = $1 AND organization_id = $2', [
      id,
      organizationId,
    ]);
    if (rowCount === 0) throw notFound('Webhook');
    await cancelGroupJobs(tx, WEBHOOK_QUEUE, id);
  });
}

export async function rotateSecret(db: Queryable, organizationId: string, id: string) {
  await requireEndpoint(db, organizationId, id);
  const secret = newSecret();
  await db.query(
    `UPDATE webhook_endpoints SET previous_secret = signing_secret,
            previous_secret_expires_at = now() + interval '24 hours', signing_secret = $3
      WHERE id = $1 AND organization_id = $2`,
    [id, organizationId, secret],
  );
  await groupChanged(db, WEBHOOK_QUEUE, id);
  return { object: 'webhook' as const, id, signing_secret: secret };
}

interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  status: string;
  failure: string | null;
  replay_of: string | null;
  test: boolean;
  payload: unknown;
  attempts: unknown;
  created_at: Date;
}

/**
 * The endpoint's last 100 deliveries, newest first: each with the JSON body it sends (`payload`) and its
 * attempts, each attempt with the status and the first 1 KiB of the answer it got (or its error).
 */
export async function listDeliveries(db: Queryable, organizationId: string, endpointId: string) {
  await requireEndpoint(db, organizationId, endpointId);
  const { rows } = await db.query<DeliveryRow>(
    `SELECT d.id, d.event_id, d.event_type, d.status, d.failure, d.replay_of, d.test, d.payload, d.created_at,
            coalesce((SELECT jsonb_agg(jsonb_build_object('attempt', a.attempt, 'delivery_id', a.request_id,
                         'status_code', a.status_code, 'duration_ms', a.duration_ms, 'response', a.response,
                         'error', a.error, 'created_at', a.created_at) ORDER BY a.attempt)
                        FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]'::jsonb) AS attempts
       FROM webhook_deliveries d WHERE d.endpoint_id = $1 ORDER BY d.created_at DESC, d.id LIMIT 100`,
    [endpointId],
  );
  return {
    object: 'list' as const,
    data: rows.map((row) => ({
      object: 'webhook_delivery' as const,
      id: row.id,
      event_id: `evt_${row.event_id}`,
      type: row.event_type,
      status: row.status,
      failure: row.failure,
      replay_of: row.replay_of,
      test: row.test,
      payload: row.payload,
      attempts: row.attempts,
      created_at: row.created_at.toISOString(),
    })),
  };
}

/**
 * Locks the endpoint for the rest of the transaction (replays of one endpoint take turns, so two at once
 * cannot both send the same failed delivery again) and checks that it may get new deliveries.
 */
async function lockEnabledEndpoint(tx: Queryable, organizationId: string, id: string): Promise<void> {
  if (!isUuid(id)) throw notFound('Webhook');
  const { rows } = await tx.query<{ enabled: boolean }>(
    'SELECT enabled FROM webhook_endpoints WHERE id = $1 AND organization_id = $2 FOR UPDATE',
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Webhook');
  if (!rows[0].enabled) {
    throw new ServiceError('invalid_state', 'The endpoint is disabled: enable it before sending it events');
  }
}

/** Sends one delivery's event again, as a new delivery with the same event id (receivers deduplicate on it). */
export async function replayDelivery(db: Database, organizationId: string, endpointId: string, deliveryId: string) {
  return db.transaction(async (tx) => {
    await lockEnabledEndpoint(tx, organizationId, endpointId);
    if (!isUuid(deliveryId)) throw notFound('Delivery');
    const { rows } = await tx.query<{ id: string }>(
      `WITH deliveries AS (
         INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload, test, replay_of)
         SELECT organization_id, endpoint_id, event_id, event_type, payload, test, id FROM webhook_deliveries
          WHERE id = $1 AND endpoint_id = $2 RETURNING id, endpoint_id
       ),
       queued AS (${queueDeliveriesFrom('deliveries')})
       SELECT id FROM deliveries`,
      [deliveryId, endpointId],
    );
    if (!rows[0]) throw notFound('Delivery');
    return { object: 'webhook_delivery' as const, id: rows[0].id };
  });
}

/**
 * Sends again every failed delivery of the endpoint created at or after `since` that has not been sent
 * again already (by this or by a single replay): each becomes a new delivery with the same event id.
 * A second request finds them replayed and sends nothing; a replay that fails in turn is a failed
 * delivery itself, which the next request sends again.
 *
 * One request replays at most `limit` deliveries, oldest first, in one transaction, and says with
 * `has_more` whether failed ones remain: a second request takes the next ones (it passes over what the
 * first replayed), so an endpoint that was down for days never becomes one unbounded transaction.
 */
export const REPLAY_BATCH_SIZE = 1_000;

export async function replayFailedSince(
  db: Database,
  organizationId: string,
  endpointId: string,
  since: Date,
  limit = REPLAY_BATCH_SIZE,
) {
  return db.transaction(async (tx) => {
    await lockEnabledEndpoint(tx, organizationId, endpointId);
    // One more than the batch is looked at, only to tell whether any remain.
    const { rows } = await tx.query<{ replayed: number; failed: number }>(
      `WITH failed AS (
         SELECT d.id, row_number() OVER (ORDER BY d.created_at, d.id) AS n FROM webhook_deliveries d
          WHERE d.endpoint_id = $1 AND d.created_at >= $2 AND d.status = 'failed'
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries r WHERE r.replay_of = d.id)
          ORDER BY d.created_at, d.id
          LIMIT $3 + 1
       ),
       deliveries AS (
         INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload, test, replay_of)
         SELECT d.organization_id, d.endpoint_id, d.event_id, d.event_type, d.payload, d.test, d.id
           FROM webhook_deliveries d JOIN failed f ON f.id = d.id
          WHERE f.n <= $3
         RETURNING id, endpoint_id
       ),
       queued AS (${queueDeliveriesFrom('deliveries')})
       SELECT (SELECT count(*)::int FROM deliveries) AS replayed, (SELECT count(*)::int FROM failed) AS failed`,
      [endpointId, since, limit],
    );
    const { replayed, failed } = rows[0]!;
    return { object: 'webhook_replay' as const, since: since.toISOString(), replayed, has_more: failed > replayed };
  });
}

/**
 * Sends the endpoint a test event of `type` with sample data (test-events.ts), signed like any other, its
 * body marked "test": true. It is a delivery like the others: listed, retried, replayable.
 */
export async function sendTestEvent(db: Database, organizationId: string, endpointId: string, type: string) {
  if (!isEventType(type)) throw new ServiceError('validation_error', `Unknown event type: ${type}`, 'type');
  return db.transaction(async (tx) => {
    await lockEnabledEndpoint(tx, organizationId, endpointId);
    const eventId = randomUUID();
    const createdAt = new Date().toISOString();
    const payload = {
      id: `evt_${eventId}`,
      type,
      created_at: createdAt,
      test: true,
      data: sampleEventData(type, createdAt),
    };
    const { rows } = await tx.query<{ id: string }>(
      `WITH deliveries AS (
         INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload, test)
         VALUES ($1, $2, $3, $4, $5::jsonb, true) RETURNING id, endpoint_id
       ),
       queued AS (${queueDeliveriesFrom('deliveries')})
       SELECT id FROM deliveries`,
      [organizationId, endpointId, eventId, type, JSON.stringify(payload)],
    );
    return { object: 'webhook_delivery' as const, id: rows[0]!.id, event_id: payload.id, type, test: true };
  });
}

export async function requireEndpoint(db: Queryable, organizationId: string, id: string): Promise<EndpointRow> {
  if (!isUuid(id)) throw notFound('Webhook');
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${COLUMNS} FROM webhook_endpoints WHERE id = $1 AND organization_id = $2`,
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Webhook');
  return rows[0];
}
