import type { Queryable } from '../platform/db/database.ts';
import type { EventType } from './event-types.ts';
import { queueDeliveriesFrom } from './delivery-jobs.ts';

// Fan-out: an event becomes one pending delivery per subscribed, enabled endpoint of its organization,
// and one 'deliver-webhook' job per delivery, written by the same statement that records the event (or
// makes the change the event reports), inside the caller's transaction. No event can be recorded
// without its deliveries, or the reverse.

/**
 * Data-modifying CTEs (`, deliveries AS (…), queued AS (…)`) that turn the rows of an earlier CTE named
 * `event` (columns: id uuid, created_at timestamptz) into deliveries and jobs. `org`, `type` and `data`
 * are SQL expressions (parameters such as `$3::uuid`, or subqueries). The caller writes the main statement
 * after them; PostgreSQL runs data-modifying CTEs whether or not the main statement reads them.
 */
export function fanOutCtes(sql: { org: string; type: string; data: string }): string {
  return `,
  deliveries AS (
    INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload)
    SELECT ${sql.org}, endpoint.id, event.id, ${sql.type},
           jsonb_build_object(
             'id', 'evt_' || event.id,
             'type', ${sql.type},
             'created_at', to_char(event.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
             'data', ${sql.data})
      FROM event, webhook_endpoints endpoint
     WHERE endpoint.organization_id = ${sql.org} AND endpoint.enabled
       AND (jsonb_array_length(endpoint.events) = 0 OR endpoint.events ? ${sql.type})
    RETURNING id, endpoint_id
  ),
  queued AS (${queueDeliveriesFrom('deliveries')})`;
}

/**
 * Records an event that belongs to no message (template.updated, contact.created …): it exists only as
 * its webhook deliveries. Call it inside the transaction that makes the change.
 */
export async function emitEvent(
  tx: Queryable,
  organizationId: string,
  type: EventType,
  data: Record<string, unknown>,
): Promise<void> {
  await tx.query(
    `WITH event AS (SELECT gen_random_uuid() AS id, clock_timestamp() AS created_at)${fanOutCtes({
      org: '$1::uuid',
      type: '$2::text',
      data: '$3::jsonb',
    })} SELECT 1`,
    [organizationId, type, JSON.stringify(data)],
  );
}

/**
 * Wraps a statement `UPDATE/INSERT/DELETE … RETURNING <columns>` so that each row it changes also emits
 * `type` with `data` (an SQL expression over the changed row, aliased `changed`), in the same statement.
 * The result is the statement's own rows.
 */
export function withEvent(statement: string, sql: { org: string; type: string; data: string }): string {
  return `WITH changed AS (${statement}),
  event AS (SELECT gen_random_uuid() AS id, clock_timestamp() AS created_at, ${sql.data} AS data FROM changed)${fanOutCtes(
    { org: sql.org, type: sql.type, data: 'event.data' },
  )}
  SELECT * FROM changed`;
}
