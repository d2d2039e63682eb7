import type { Queryable } from '../platform/db/database.ts';
import { rememberedRows, rememberResultsFrom, type IdempotencyKey } from '../platform/idempotency.ts';
import { deliveryJobsFrom } from './delivery-job.ts';
import type { EmailStatus } from './statuses.ts';
import type { PreparedMessage } from './prepare-message.ts';
import { TIMELINE_ENTRY_COLUMNS, timelineEntriesFrom, timelineEntryRow } from './timeline.ts';

// Storing accepted messages: each message's row, its recipients, its attachments, its `accepted`
// timeline entry (and `scheduled` for a message with a scheduled_at) with their webhook fan-out, its
// delivery job and the results remembered under the requests' idempotency keys, all by one statement
// for any number of messages. One statement is one round trip, and outside a transaction its own
// transaction: a group of messages costs one commit and one exchange with the database, and what it
// stores commits whole or not at all.

export interface MessageToStore {
  organizationId: string;
  message: PreparedMessage;
}

export interface StoreOptions {
  /** Results to remember under the requests' idempotency keys, written with the messages. */
  remember: Array<{ key: IdempotencyKey; result: unknown }>;
  /**
   * A condition checked first: CTEs (without the leading WITH) that end with `quota_ok` (one row,
   * column `ok`), built from the statement's parameter values `values` (numbered after the store's
   * own). When `ok` is false nothing is written.
   */
  guard?: { ctes: (firstParameter: number) => string; values: unknown[] };
}

// JSON null in a jsonb column of jsonb_to_recordset stays the JSON value null: nullif makes it SQL NULL,
// which is what an absent field is stored as.
const MESSAGE_COLUMNS = `id uuid, organization_id uuid, domain_id uuid, "from" text, "to" jsonb, cc jsonb, bcc jsonb,
  reply_to jsonb, subject text, html text, text text, tags jsonb, headers jsonb, topic_id uuid, template jsonb,
  message_id text, status text, scheduled_at timestamptz, recipient_count int, recipients jsonb, reply_address text, broadcast_id uuid`;

/**
 * Stores the messages in one statement: in a transaction when called with one, else as its own. Says
 * whether it wrote them (false only when the guard's condition did not hold: then nothing is written).
 */
export async function storeMessages(db: Queryable, items: MessageToStore[], options: StoreOptions): Promise<boolean> {
  const messages = items.map(({ organizationId, message: m }) => ({
    id: m.id,
    organization_id: organizationId,
    domain_id: m.domainId,
    from: storedFrom(m),
    to: m.to,
    cc: m.cc,
    bcc: m.bcc,
    reply_to: m.replyTo,
    subject: m.subject,
    html: m.html ?? null,
    text: m.text ?? null,
    tags: m.tags ?? null,
    headers: m.headers ?? null,
    topic_id: m.topicId ?? null,
    template: m.template ?? null,
    message_id: m.messageId,
    status: (m.scheduledAt ? 'scheduled' : 'queued') satisfies EmailStatus,
    scheduled_at: m.scheduledAt?.toISOString() ?? null,
    recipient_count: m.recipientCount,
    recipients: m.recipients,
    reply_address: m.replyAddress ?? null,
    broadcast_id: m.broadcastId ?? null,
  }));
  // A scheduled message's `scheduled` entry follows its `accepted` one (the order of the rows is the
  // order they are written in), in this same statement: no round trip more for scheduling.
  const entries = items.flatMap(({ organizationId, message: m }) => {
    const scheduled = m.scheduledAt ? { scheduled_at: m.scheduledAt.toISOString() } : undefined;
    const accepted = timelineEntryRow({ emailId: m.id, organizationId, kind: 'accepted', data: scheduled });
    if (!scheduled) return [accepted];
    return [accepted, timelineEntryRow({ emailId: m.id, organizationId, kind: 'scheduled', data: scheduled })];
  });
  // Attachments are bytes: base64 in JSON (a third larger, and few messages carry any).
  const attachments = items.flatMap(({ message: m }) =>
    m.attachments.map((a, position) => ({
      email_id: m.id,
      position,
      filename: a.filename,
      content_type: a.contentType,
      content_id: a.contentId ?? null,
      content: a.content.toString('base64'),
    })),
  );
  const values: unknown[] = [
    JSON.stringify(messages),
    JSON.stringify(entries),
    JSON.stringify(rememberedRows(options.remember)),
  ];
  if (attachments.length > 0) values.push(JSON.stringify(attachments));
  const guard = options.guard ? options.guard.ctes(values.length + 1) : 'quota_ok AS (SELECT true AS ok)';
  if (options.guard) values.push(...options.guard.values);
  const written = `(SELECT ok FROM quota_ok)`;

  const { rows } = await db.query<{ ok: boolean }>(
    `WITH ${guard},
     input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(${MESSAGE_COLUMNS}) WHERE ${written}
     ),
     stored_messages AS (
       INSERT INTO emails (id, organization_id, domain_id, "from", "to", cc, bcc, reply_to, subject, html, text,
         tags, headers, topic_id, template, message_id, status, scheduled_at, recipient_count, reply_address,
         broadcast_id)
       SELECT id, organization_id, domain_id, "from", "to", cc, bcc, reply_to, subject, html, text,
              nullif(tags, 'null'::jsonb), nullif(headers, 'null'::jsonb), topic_id, nullif(template, 'null'::jsonb),
              message_id, status, scheduled_at, recipient_count, reply_address, broadcast_id
         FROM input
     ),
     stored_recipients AS (
       INSERT INTO email_recipients (email_id, address, kind)
       SELECT input.id, r.address, r.kind FROM input, jsonb_to_recordset(input.recipients) AS r(address text, kind text)
     ),${
       attachments.length > 0
         ? `
     stored_attachments AS (
       INSERT INTO email_attachments (email_id, position, filename, content_type, content_id, content)
       SELECT a.email_id, a.position, a.filename, a.content_type, a.content_id, decode(a.content, 'base64')
         FROM jsonb_to_recordset($4::jsonb) AS a(email_id uuid, position int, filename text, content_type text,
              content_id text, content text)
        WHERE ${written}
     ),`
         : ''
     }
     accepted AS (
       SELECT *, ordinality AS n FROM ROWS FROM (jsonb_to_recordset($2::jsonb) AS (${TIMELINE_ENTRY_COLUMNS})) WITH ORDINALITY
        WHERE ${written}
     ),
     -- The messages' fields of the webhook events are read from the rows being stored (a statement does
     -- not see its own inserts), whose created_at, now(), is the default emails.created_at takes.
     ${timelineEntriesFrom('accepted', { from: 'input', createdAt: 'now()' })},
     delivery_jobs AS (${deliveryJobsFrom('input')}),
     remembered AS (${rememberResultsFrom('$3::jsonb')} AND ${written})
     SELECT ok FROM quota_ok`,
    values,
  );
  return rows[0]!.ok;
}

/** The From address as stored: the display name, if any, with the address. */
function storedFrom(m: PreparedMessage): string {
  return m.from.name === undefined ? m.from.address : `${m.from.name} <${m.from.address}>`;
}
