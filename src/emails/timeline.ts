import { randomUUID } from 'node:crypto';
import type { Queryable } from '../platform/db/database.ts';

/** Timeline kinds (GET /emails/:id/events); the webhook event type is `email.<kind>`. */
export type TimelineKind =
  | 'accepted'
  | 'delivered'
  | 'opened'
  | 'clicked'
  | 'bounced'
  | 'failed'
  | 'complained'
  | 'canceled'
  | 'delivery_delayed';

export interface TimelineEntry {
  emailId: string;
  organizationId: string;
  kind: TimelineKind;
  recipient?: string;
  data?: Record<string, unknown>;
}

/**
 * Records one happening in a message's timeline. Call it inside the transaction that makes the change it
 * records, so the two commit together. Returns the event id (the webhook's evt_<id>).
 */
export async function recordTimelineEntry(tx: Queryable, entry: TimelineEntry): Promise<string> {
  const id = randomUUID();
  await tx.query(
    `INSERT INTO email_events (id, email_id, organization_id, type, recipient, data)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb)`,
    [
      id,
      entry.emailId,
      entry.organizationId,
      entry.kind,
      entry.recipient ?? null,
      entry.data ? JSON.stringify(entry.data) : null,
    ],
  );
  return id;
}
