import { compareText } from '../platform/text.ts';
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

/** The outcomes GET /overview counts per hour (email_event_counts, kept by recordTimelineEntry). */
export const COUNTED_KINDS = ['delivered', 'bounced', 'complained', 'failed', 'opened', 'clicked'] as const;
export type CountedKind = (typeof COUNTED_KINDS)[number];
const COUNTED: ReadonlySet<TimelineKind> = new Set(COUNTED_KINDS);
/** Rows per organization, hour and kind: concurrent deliveries of one organization lock different rows. */
export const EVENT_COUNT_SHARDS = 8;

/**
 * The webhook event type of a timeline entry: email.<kind>, but email.scheduled for a scheduled
 * acceptance and email.suppressed for a suppressed recipient's failure.
 */
export function webhookEventType(entry: Pick<TimelineEntry, 'kind' | 'data'>): EventType {
  if (entry.kind === 'accepted' && entry.data?.scheduled_at) return 'email.scheduled';
  if (entry.kind === 'failed' && entry.data?.reason === 'suppressed') return 'email.suppressed';
  return `email.${entry.kind}`;
}

/** An entry's own part of its webhook payload (after the message's fields): the recipient, then its data. */
const webhookDataOf = (entry: TimelineEntry) => ({
  ...(entry.recipient ? { recipient: entry.recipient } : {}),
  ...entry.data,
});

/**
 * Records one happening in a message's timeline, counts it in its hour when it is an outcome the
 * overview shows, and fans it out to the organization's webhook endpoints, all in one statement. Call it
 * inside the transaction that makes the change it records, so all of it commits together. Returns the
 * event id (the webhook's evt_<id>), or null when a `once` entry was a repeat.
 */
export async function recordTimelineEntry(
  tx: Queryable,
  entry: TimelineEntry,
  counts?: EventCounts,
): Promise<string | null> {
  const id = randomUUID();
  const { rows } = await tx.query(
    `WITH event AS (
       INSERT INTO email_events (id, email_id, organization_id, type, recipient, data)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb)
       ${entry.once ? 'ON CONFLICT DO NOTHING' : ''}
       RETURNING id, created_at
     ),${COUNTED.has(entry.kind) && !counts ? COUNT_CTE : ''}
     email AS (
       SELECT jsonb_build_object('email_id', id, 'from', "from", 'to', "to", 'subject', subject, 'tags', tags) AS data
         FROM emails WHERE id = $2
     )${fanOutCtes({ org: '$3::uuid', type: '$7::text', data: '((SELECT data FROM email) || $8::jsonb)' })}
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
  if (rows.length === 0) return null;
  if (counts && COUNTED.has(entry.kind)) {
    counts.add(entry.organizationId, entry.kind as CountedKind, (rows[0] as { created_at: Date }).created_at);
  }
  return id;
}

/**
 * Overview counts gathered over a transaction that records many entries (a batch of delivery outcomes)
 * and written once before its commit, by `write`: one row per organization, kind and hour, in that
 * order: two such transactions lock count rows in the same order, so they cannot deadlock, as they could
 * if each entry counted itself in whatever order it came.
 */
export class EventCounts {
  private readonly counts = new Map<string, number>();

  /** Counts one entry of `kind` in the hour its timeline entry was written. */
  add(organizationId: string, kind: CountedKind, at: Date): void {
    const hour = new Date(Math.floor(at.getTime() / 3_600_000) * 3_600_000).toISOString();
    const key = `${organizationId} ${kind} ${hour}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  async write(tx: Queryable): Promise<void> {
    if (this.counts.size === 0) return;
    const rows = [...this.counts]
      .sort(([a], [b]) => compareText(a, b))
      .map(([key, count]) => {
        const [organization_id, type, hour] = key.split(' ');
        return { organization_id, type, hour, count };
      });
    this.counts.clear();
    await tx.query(
      `INSERT INTO email_event_counts AS c (organization_id, hour, type, shard, count)
       SELECT organization_id, hour, type, floor(random() * ${EVENT_COUNT_SHARDS})::smallint, count
         FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (organization_id uuid, type text, hour timestamptz, count integer))
              WITH ORDINALITY AS r(organization_id, type, hour, count, n)
        ORDER BY n
       ON CONFLICT (organization_id, hour, type, shard) DO UPDATE SET count = c.count + excluded.count`,
      [JSON.stringify(rows)],
    );
  }
}

// Counts only what the timeline took: a `once` repeat returns no row from `event`, so adds nothing.
const COUNT_CTE = `
     counted AS (
       INSERT INTO email_event_counts AS c (organization_id, hour, type, shard, count)
       SELECT $3, date_trunc('hour', event.created_at, 'UTC'), $4, floor(random() * ${EVENT_COUNT_SHARDS})::smallint, 1
         FROM event
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
  webhook_data: Record<string, unknown>;
}

/**
 * An entry as a row for timelineEntriesFrom. `message` holds the message's fields of the webhook
 * payload (email_id, from, to, subject, tags), as recordTimelineEntry reads them from the stored message.
 */
export function timelineEntryRow(entry: TimelineEntry, message: Record<string, unknown>): TimelineEntryRow {
  if (COUNTED.has(entry.kind) || entry.once) throw new Error(`timelineEntriesFrom cannot record ${entry.kind}`);
  return {
    event_id: randomUUID(),
    email_id: entry.emailId,
    organization_id: entry.organizationId,
    kind: entry.kind,
    recipient: entry.recipient ?? null,
    data: entry.data ?? null,
    event_type: webhookEventType(entry),
    webhook_data: { ...message, ...webhookDataOf(entry) },
  };
}

/**
 * Data-modifying CTEs that record one timeline entry per row of the earlier CTE `from` (the columns of
 * TimelineEntryRow; `data` may be JSON null), each fanned out to its organization's webhook endpoints, for a statement that stores
 * what the entries are about in the same statement (the accept path stores many messages in one). Only
 * for kinds the overview does not count and that are not `once`: each entry is simply added.
 */
export function timelineEntriesFrom(from: string): string {
  return `recorded AS (
       INSERT INTO email_events (id, email_id, organization_id, type, recipient, data)
       SELECT event_id, email_id, organization_id, kind, recipient, nullif(data, 'null'::jsonb) FROM ${from}
       RETURNING id, created_at
     ),
     event AS (
       SELECT recorded.id, recorded.created_at, ${from}.organization_id, ${from}.event_type, ${from}.webhook_data AS data
         FROM recorded JOIN ${from} ON ${from}.event_id = recorded.id
     )${fanOutCtes({ org: 'event.organization_id', type: 'event.event_type', data: 'event.data' })}`;
}
