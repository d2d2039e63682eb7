import { newRowId } from '../platform/ids.ts';
import type { Queryable } from '../platform/db/database.ts';
import { fanOutCtes } from '../webhooks/fan-out.ts';
import type { EventType } from '../webhooks/event-types.ts';
import { emailEventDetails, emailEventFieldsSql } from '../webhooks/event-payloads.ts';
import { countsInRatesSql } from './test-addresses.ts';

/** Timeline kinds (GET /emails/:id/events); the webhook event type is `email.<kind>`. */
export type TimelineKind =
  | 'accepted'
  | 'scheduled'
  | 'rescheduled'
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
  /**
   * Fields only the webhook event carries (webhooks/event-payloads.ts: a click's client, a suppression's
   * origin), merged into its Resend objects; the timeline keeps `data` alone.
   */
  webhook?: Record<string, unknown>;
}

/**
 * The outcomes GET /overview counts per hour (email_event_counts, kept by recordTimelineEntry), those of
 * Resend's test addresses excepted.
 */
export const COUNTED_KINDS = ['delivered', 'bounced', 'complained', 'failed', 'opened', 'clicked'] as const;
export type CountedKind = (typeof COUNTED_KINDS)[number];
const COUNTED: ReadonlySet<TimelineKind> = new Set(COUNTED_KINDS);
/** Rows per organization, hour and kind: concurrent deliveries of one organization lock different rows. */
export const EVENT_COUNT_SHARDS = 8;

/**
 * The webhook event type of a timeline entry: email.<kind>, but email.suppressed for a suppressed
 * recipient's failure. A message accepted with a scheduled_at has two entries, `accepted` then
 * `scheduled`: email.accepted and email.scheduled.
 */
export function webhookEventType(entry: Pick<TimelineEntry, 'kind' | 'data'>): EventType {
  if (entry.kind === 'failed' && entry.data?.reason === 'suppressed') return 'email.suppressed';
  return `email.${entry.kind}`;
}

/** An entry's own part of its webhook payload, written over the message's fields. */
const webhookDataOf = (entry: TimelineEntry) => emailEventDetails(entry, entry.webhook);

/**
 * Records one happening in a message's timeline, counts it in its hour when it is an outcome the
 * overview shows, and fans it out to the organization's webhook endpoints, all in one statement. Call it
 * inside the transaction that makes the change it records, so all of it commits together. Returns the
 * event id (the webhook's evt_<id>), or null when a `once` entry was a repeat.
 */
export async function recordTimelineEntry(tx: Queryable, entry: TimelineEntry): Promise<string | null> {
  const id = newRowId();
  const { rows } = await tx.query(
    `WITH event AS (
       INSERT INTO email_events (id, email_id, organization_id, type, recipient, data)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb)
       ${entry.once ? 'ON CONFLICT DO NOTHING' : ''}
       RETURNING id, created_at
     ),${COUNTED.has(entry.kind) ? COUNT_CTE : ''}
     email AS (SELECT ${emailEventFieldsSql('e')} AS data FROM emails e WHERE e.id = $2)${fanOutCtes({ org: '$3::uuid', type: '$7::text', data: '((SELECT data FROM email) || $8::jsonb)' })}
     SELECT created_at FROM event`,
    [
      id,
      entry.emailId,
      entry.organizationId,
      entry.kind,
      entry.recipient ?? null,
      entry.data ? JSON.stringify(entry.data) : null,
      webhookEventType(entry),
      JSON.stringify(webhookDataOf(entry)),
    ],
  );
  return rows.length === 0 ? null : id;
}

// Counts only what the timeline took: a `once` repeat returns no row from `event`, so adds nothing; nor
// does an outcome of a test address (simulated, it says nothing of deliverability).
const COUNT_CTE = `
     counted AS (
       INSERT INTO email_event_counts AS c (organization_id, hour, type, shard, count)
       SELECT $3, date_trunc('hour', event.created_at, 'UTC'), $4, floor(random() * ${EVENT_COUNT_SHARDS})::smallint, 1
         FROM event WHERE ${countsInRatesSql('$5::text')}
       ON CONFLICT (organization_id, hour, type, shard) DO UPDATE SET count = c.count + 1
     ),`;

/** A timeline entry as a row of the CTE that timelineEntriesFrom records (see there). */
export interface TimelineEntryRow {
  event_id: string;
  email_id: string;
  organization_id: string;
  kind: TimelineKind;
  recipient: string | null;
  data: Record<string, unknown> | null;
  event_type: EventType;
  /** The entry's part of its webhook payload's data (the message's part is read where it is recorded). */
  webhook_data: Record<string, unknown>;
}

/** The columns of TimelineEntryRow, for `jsonb_to_recordset(…) AS (…)`. */
export const TIMELINE_ENTRY_COLUMNS = `event_id uuid, email_id uuid, organization_id uuid, kind text, recipient text,
  data jsonb, event_type text, webhook_data jsonb`;

/** An entry as a row for timelineEntriesFrom. */
export function timelineEntryRow(entry: TimelineEntry): TimelineEntryRow {
  return {
    event_id: newRowId(),
    email_id: entry.emailId,
    organization_id: entry.organizationId,
    kind: entry.kind,
    recipient: entry.recipient ?? null,
    data: entry.data ?? null,
    event_type: webhookEventType(entry),
    webhook_data: webhookDataOf(entry),
  };
}

/**
 * Data-modifying CTEs that record one timeline entry per row of the earlier CTE `from` (the columns of
 * TimelineEntryRow; `data` may be JSON null), in the order of its column `n`, for a statement that
 * records many at once (messages accepted together, outcomes of a batch of deliveries):
 * - an entry of a kind kept once per recipient (opens, clicks, bounces, complaints) that repeats one
 *   already recorded is dropped, with its webhook deliveries, as recordTimelineEntry drops a `once` one;
 * - each entry is fanned out to its organization's webhook endpoints, with the message's fields read
 *   from `messages.from` (a relation with the columns of `emails`, joined on the entry's email_id: the
 *   stored messages, or the rows a statement is storing, whose `createdAt` is then given);
 * - the outcomes the overview counts (not a test address's) are counted in their hour, one row per
 *   organization, kind and hour, written in that order: two such statements lock count rows in the same
 *   order, so they cannot deadlock.
 */
export function timelineEntriesFrom(from: string, messages: { from: string; createdAt?: string }): string {
  const data = `${emailEventFieldsSql('m', messages.createdAt)} || ${from}.webhook_data`;
  return `recorded AS (
       INSERT INTO email_events (id, email_id, organization_id, type, recipient, data)
       SELECT event_id, email_id, organization_id, kind, recipient, nullif(data, 'null'::jsonb) FROM ${from} ORDER BY n
       ON CONFLICT DO NOTHING
       RETURNING id, created_at, organization_id, type, recipient
     ),
     counted AS (
       INSERT INTO email_event_counts AS c (organization_id, hour, type, shard, count)
       SELECT organization_id, date_trunc('hour', created_at, 'UTC') AS hour, type,
              floor(random() * ${EVENT_COUNT_SHARDS})::smallint, count(*)
         FROM recorded WHERE type IN (${COUNTED_KINDS.map((kind) => `'${kind}'`).join(', ')})
          AND ${countsInRatesSql('recipient')}
        GROUP BY organization_id, hour, type
        ORDER BY organization_id, type COLLATE "C", hour
       ON CONFLICT (organization_id, hour, type, shard) DO UPDATE SET count = c.count + excluded.count
     ),
     event AS (
       SELECT recorded.id, recorded.created_at, ${from}.organization_id, ${from}.event_type, ${data} AS data
         FROM recorded JOIN ${from} ON ${from}.event_id = recorded.id
         JOIN ${messages.from} m ON m.id = ${from}.email_id
     )${fanOutCtes({ org: 'event.organization_id', type: 'event.event_type', data: 'event.data' })}`;
}
