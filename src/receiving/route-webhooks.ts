import type { Queryable } from '../platform/db/database.ts';
import { queueDeliveriesFrom } from '../webhooks/delivery-jobs.ts';
import type { WebhookOutcome } from './route-types.ts';

// A webhook action tells one endpoint of the organization of the message (email.received) even when the
// endpoint is not subscribed to that event. An endpoint that is subscribed already gets the event from
// the listener's fan-out, so it gets no second delivery; a disabled or deleted one gets none.

/** The email.received event as fanned out to subscribers: its id (the body's evt_<id>), time and data. */
export interface ReceivedEvent {
  id: string;
  created_at: string;
  data: Record<string, unknown>;
}

/** Queues a delivery (and its job) to each endpoint that is not a subscriber; says what became of each. */
export async function notifyRouteEndpoints(
  tx: Queryable,
  organizationId: string,
  receivedEmailId: string,
  endpointIds: string[],
  event: ReceivedEvent | undefined,
): Promise<WebhookOutcome[]> {
  if (endpointIds.length === 0) return [];
  const { id, created_at: createdAt, data } = event ?? (await eventOf(tx, receivedEmailId));
  const { rows } = await tx.query<{ id: string; endpoint_id: string }>(
    `WITH deliveries AS (
       INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload)
       SELECT $1::uuid, endpoint.id, $3::uuid, 'email.received',
              jsonb_build_object('id', 'evt_' || $3::text, 'type', 'email.received', 'created_at', $4::text,
                                 'data', $5::jsonb)
         FROM webhook_endpoints endpoint
        WHERE endpoint.organization_id = $1::uuid AND endpoint.id = ANY($2::uuid[]) AND endpoint.enabled
          AND NOT (jsonb_array_length(endpoint.events) = 0 OR endpoint.events ? 'email.received')
       RETURNING id, endpoint_id
     ),
     queued AS (${queueDeliveriesFrom('deliveries')})
     SELECT id, endpoint_id FROM deliveries`,
    [organizationId, endpointIds, id, createdAt, JSON.stringify(data)],
  );
  const { rows: subscribed } = await tx.query<{ id: string }>(
    `SELECT id FROM webhook_endpoints WHERE organization_id = $1 AND id = ANY($2::uuid[]) AND enabled
        AND (jsonb_array_length(events) = 0 OR events ? 'email.received')`,
    [organizationId, endpointIds],
  );
  return endpointIds.map((endpointId): WebhookOutcome => {
    const delivery = rows.find((row) => row.endpoint_id === endpointId);
    if (delivery) return { action: 'webhook', endpoint_id: endpointId, delivery_id: delivery.id };
    const skipped = subscribed.some((row) => row.id === endpointId)
      ? 'subscribed to email.received: told by the fan-out'
      : 'the endpoint is disabled or deleted';
    return { action: 'webhook', endpoint_id: endpointId, skipped };
  });
}

/** The email.received event of a stored message, in the shape Resend gives it. */
async function eventOf(tx: Queryable, receivedEmailId: string): Promise<ReceivedEvent> {
  const { rows } = await tx.query<{ event_id: string; now: string; data: Record<string, unknown> }>(
    `SELECT gen_random_uuid() AS event_id,
            to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS now,
            jsonb_build_object(
              'email_id', e.id,
              'created_at', to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
              'from', e.from_address, 'to', to_jsonb(e.to_addresses), 'cc', to_jsonb(e.cc_addresses),
              'bcc', to_jsonb(e.bcc_addresses), 'received_for', to_jsonb(e.received_for),
              'subject', e.subject, 'message_id', e.message_id,
              'attachments', coalesce((
                SELECT jsonb_agg(jsonb_build_object('id', a.id, 'filename', a.filename,
                         'content_type', a.content_type, 'content_disposition', a.content_disposition,
                         'content_id', a.content_id) ORDER BY a.position)
                  FROM received_attachments a WHERE a.received_email_id = e.id), '[]'::jsonb)) AS data
       FROM received_emails e WHERE e.id = $1`,
    [receivedEmailId],
  );
  const row = rows[0];
  if (!row) throw new Error(`received email ${receivedEmailId} not found`);
  return { id: row.event_id, created_at: row.now, data: row.data };
}
