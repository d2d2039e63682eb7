import type { Queryable } from '../platform/db/database.ts';
import type { EventType } from './event-types.ts';

// Fan-out: an event becomes one pending delivery per subscribed, enabled endpoint of its organization,
// and one 'deliver-webhook' job per delivery, written by the same statement that records the event,
// inside the caller's transaction. No event can be recorded without its deliveries, or the reverse.

/**
 * SQL that turns the rows of a CTE named `event` (columns: id uuid, created_at timestamptz) into
 * deliveries and jobs. Parameters it uses: `org` the organization, `type` the event type, `data` the
 * event's data (jsonb). Appended to an INSERT … RETURNING written as `WITH event AS (…)`.
 */
export function fanOutSql(params: { org: string; type: string; data: string }): string {
  return `,
  deliveries AS (
    INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload)
    SELECT ${params.org}, endpoint.id, event.id, ${params.type},
           jsonb_build_object(
             'id', 'evt_' || event.id,
             'type', ${params.type},
             'created_at', to_char(event.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
             'data', ${params.data})
      FROM event, webhook_endpoints endpoint
     WHERE endpoint.organization_id = ${params.org} AND endpoint.enabled
       AND (jsonb_array_length(endpoint.events) = 0 OR endpoint.events ? ${params.type})
    RETURNING id, endpoint_id
  )
  INSERT INTO jobs (queue, payload, group_key)
  SELECT 'deliver-webhook', jsonb_build_object('delivery_id', id), endpoint_id::text FROM deliveries`;
}

/**
 * Records an event that belongs to no message (domain.created, template.updated, email.rescheduled …):
 * it exists only as its webhook deliveries. Inside the transaction that makes the change.
 */
export async function emitEvent(
  tx: Queryable,
  organizationId: string,
  type: EventType,
  data: Record<string, unknown>,
): Promise<void> {
  await tx.query(
    `WITH event AS (SELECT gen_random_uuid() AS id, clock_timestamp() AS created_at)${fanOutSql({
      org: '$1::uuid',
      type: '$2::text',
      data: '$3::jsonb',
    })}`,
    [organizationId, type, JSON.stringify(data)],
  );
}
