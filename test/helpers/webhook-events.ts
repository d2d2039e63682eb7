import assert from 'node:assert/strict';
import type { Queryable } from '../../src/platform/db/database.ts';
import type { App } from '../../src/app.ts';
import { bearer, type TestOrganization } from './app.ts';

// Which webhook events a change emitted, without a receiver: an endpoint for every type on a loopback
// port nothing answers (9, discard), whose queued deliveries are read back from the database. Tests that
// run no webhook worker see every event there; the app needs MAILROOM_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8.

export interface QueuedEvent {
  id: string;
  type: string;
  created_at: string;
  data: Record<string, unknown>;
}

export async function observeWebhookEvents(app: App, org: TestOrganization): Promise<void> {
  const res = await app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(org.fullKey),
    payload: { endpoint: 'http://127.0.0.1:9/hook', events: [] },
  });
  assert.equal(res.statusCode, 201, res.body);
}

/** The organization's queued events of one type, oldest first; `where` keeps those whose data has these values. */
export async function queuedEvents(
  db: Queryable,
  organizationId: string,
  type: string,
  where: Record<string, string> = {},
): Promise<QueuedEvent[]> {
  const { rows } = await db.query<{ payload: QueuedEvent }>(
    `SELECT payload FROM webhook_deliveries
      WHERE organization_id = $1 AND event_type = $2 AND payload -> 'data' @> $3::jsonb
      ORDER BY payload ->> 'created_at', created_at`,
    [organizationId, type, JSON.stringify(where)],
  );
  return rows.map((row) => row.payload);
}
