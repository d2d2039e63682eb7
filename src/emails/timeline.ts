import { randomUUID } from 'node:crypto';
import type { Queryable } from '../platform/db/database.ts';
import { fanOutCtes } from '../webhooks/fan-out.ts';
import type { EventType } from '../webhooks/event-types.ts';

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
  /**
   * Opens, clicks (per link), bounces and complaints are kept once per recipient: with `once`, an entry
   * that repeats one already recorded is dropped, webhook deliveries included (a unique index decides,
   * so concurrent repeats are dropped too).
   */
  once?: boolean;
}

/**
 * The webhook event type of a timeline entry: email.<kind>, but email.scheduled for a scheduled
 * acceptance and email.suppressed for a suppressed recipient's failure.
 */
export function webhookEventType(entry: Pick<TimelineEntry, 'kind' | 'data'>): EventType {
  if (entry.kind === 'accepted' && entry.data?.scheduled_at) return 'email.scheduled';
  if (entry.kind === 'failed' && entry.data?.reason === 'suppressed') return 'email.suppressed';
  return `email.${entry.kind}`;
}

/**
 * Records one happening in a message's timeline, and fans it out to the organization's webhook endpoints
 * in the same statement. Call it inside the transaction that makes the change it records, so all of it
 * commits together. Returns the event id (the webhook's evt_<id>), or null when a `once` entry was a repeat.
 */
export async function recordTimelineEntry(tx: Queryable, entry: TimelineEntry): Promise<string | null> {
  const id = randomUUID();
  const webhookData = { ...(entry.recipient ? { recipient: entry.recipient } : {}), ...entry.data };
  const { rows } = await tx.query(
    `WITH event AS (
       INSERT INTO email_events (id, email_id, organization_id, type, recipient, data)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb)
       ${entry.once ? 'ON CONFLICT DO NOTHING' : ''}
       RETURNING id, created_at
     ),
     email AS (
       SELECT jsonb_build_object('email_id', id, 'from', "from", 'to', "to", 'subject', subject, 'tags', tags) AS data
         FROM emails WHERE id = $2
     )${fanOutCtes({ org: '$3::uuid', type: '$7::text', data: '((SELECT data FROM email) || $8::jsonb)' })}
     SELECT 1 FROM event`,
    [
      id,
      entry.emailId,
      entry.organizationId,
      entry.kind,
      entry.recipient ?? null,
      entry.data ? JSON.stringify(entry.data) : null,
      webhookEventType(entry),
      JSON.stringify(webhookData),
    ],
  );
  return rows.length > 0 ? id : null;
}
