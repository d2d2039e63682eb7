import { randomBytes } from 'node:crypto';
import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { parseEndpointUrl } from './endpoint-address.ts';
import { isEventType } from './event-types.ts';
import { cancelGroupJobs, groupChanged } from '../queue/jobs.ts';
import { queueDeliveriesFrom, WEBHOOK_QUEUE } from './delivery-jobs.ts';

// Webhook endpoints of an organization. The signing secret is shown when the endpoint is created (and
// when it is rotated), never in listings. A rotation keeps the previous secret signing too for 24 hours,
// so receivers can switch without losing a delivery.

interface EndpointRow {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  created_at: Date;
}

const COLUMNS = 'id, url, events, enabled, created_at';
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

export async function listEndpoints(db: Queryable, organizationId: string) {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${COLUMNS} FROM webhook_endpoints WHERE organization_id = $1 ORDER BY created_at DESC, id`,
    [organizationId],
  );
  return rows.map(toView);
}

export async function getEndpoint(db: Queryable, organizationId: string, id: string) {
  return toView(await requireEndpoint(db, organizationId, id));
}

export async function updateEndpoint(
  db: Queryable,
  config: Config,
  organizationId: string,
  id: string,
  changes: { endpoint?: string; events?: string[]; enabled?: boolean },
) {
  await requireEndpoint(db, organizationId, id);
  const url = changes.endpoint === undefined ? null : (await parseEndpointUrl(changes.endpoint, config)).toString();
  const events = changes.events === undefined ? null : JSON.stringify(checkEvents(changes.events));
  const { rows } = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints SET url = coalesce($3, url), events = coalesce($4::jsonb, events),
            enabled = coalesce($5, enabled)
      WHERE id = $1 AND organization_id = $2 RETURNING ${COLUMNS}`,
    [id, organizationId, url, events, changes.enabled ?? null],
  );
  if (!rows[0]) throw notFound('Webhook');
  await groupChanged(db, WEBHOOK_QUEUE, id);
  return toView(rows[0]);
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

export async function listDeliveries(db: Queryable, organizationId: string, endpointId: string) {
  await requireEndpoint(db, organizationId, endpointId);
  const { rows } = await db.query<{
    id: string;
    event_id: string;
    event_type: string;
    status: string;
    attempts: unknown;
    created_at: Date;
  }>(
    `SELECT d.id, d.event_id, d.event_type, d.status, d.created_at,
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
      attempts: row.attempts,
      created_at: row.created_at.toISOString(),
    })),
  };
}

/** Sends one delivery's event again, as a new delivery with the same event id (receivers deduplicate on it). */
export async function replayDelivery(db: Database, organizationId: string, endpointId: string, deliveryId: string) {
  await requireEndpoint(db, organizationId, endpointId);
  if (!isUuid(deliveryId)) throw notFound('Delivery');
  const { rows } = await db.query<{ id: string }>(
    `WITH deliveries AS (
       INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload)
       SELECT organization_id, endpoint_id, event_id, event_type, payload FROM webhook_deliveries
        WHERE id = $1 AND endpoint_id = $2 RETURNING id, endpoint_id
     ),
     queued AS (${queueDeliveriesFrom('deliveries')})
     SELECT id FROM deliveries`,
    [deliveryId, endpointId],
  );
  if (!rows[0]) throw notFound('Delivery');
  return { object: 'webhook_delivery' as const, id: rows[0].id };
}

async function requireEndpoint(db: Queryable, organizationId: string, id: string): Promise<EndpointRow> {
  if (!isUuid(id)) throw notFound('Webhook');
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${COLUMNS} FROM webhook_endpoints WHERE id = $1 AND organization_id = $2`,
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Webhook');
  return rows[0];
}
