import type { Queryable } from '../platform/db/database.ts';
import { queueDeliveries } from './delivery-job.ts';
import type { EmailStatus } from './statuses.ts';
import type { PreparedMessage } from './prepare-message.ts';
import { recordTimelineEntries } from './timeline.ts';

// Storing accepted messages: each message's row, its recipients, its attachments, its `accepted`
// timeline entry (with webhook fan-out) and its delivery job. A few statements for any number of
// messages, each statement taking every message's rows at once, so a commit that holds many messages
// costs about what one holding a single message does.

export interface MessageToStore {
  organizationId: string;
  message: PreparedMessage;
}

// JSON null in a jsonb column of jsonb_to_recordset stays the JSON value null: nullif makes it SQL NULL,
// which is what an absent field is stored as.
const EMAIL_COLUMNS = `id uuid, organization_id uuid, domain_id uuid, "from" text, "to" jsonb, cc jsonb, bcc jsonb,
  reply_to jsonb, subject text, html text, text text, tags jsonb, headers jsonb, topic_id uuid, template jsonb,
  message_id text, status text, scheduled_at timestamptz, recipient_count int`;

export async function storeMessages(tx: Queryable, items: MessageToStore[]): Promise<void> {
  if (items.length === 0) return;
  const emails = items.map(({ organizationId, message: m }) => ({
    id: m.id,
    organization_id: organizationId,
    domain_id: m.domainId,
    from: m.from.name === undefined ? m.from.address : `${m.from.name} <${m.from.address}>`,
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
  }));
  await tx.query(
    `INSERT INTO emails (id, organization_id, domain_id, "from", "to", cc, bcc, reply_to, subject, html, text,
       tags, headers, topic_id, template, message_id, status, scheduled_at, recipient_count)
     SELECT id, organization_id, domain_id, "from", "to", cc, bcc, reply_to, subject, html, text,
            nullif(tags, 'null'::jsonb), nullif(headers, 'null'::jsonb), topic_id, nullif(template, 'null'::jsonb),
            message_id, status, scheduled_at, recipient_count
       FROM jsonb_to_recordset($1::jsonb) AS r(${EMAIL_COLUMNS})`,
    [JSON.stringify(emails)],
  );
  const recipients = items.flatMap(({ message: m }) =>
    m.recipients.map((r) => ({ email_id: m.id, address: r.address, kind: r.kind })),
  );
  await tx.query(
    `INSERT INTO email_recipients (email_id, address, kind)
     SELECT r.email_id, r.address, r.kind FROM jsonb_to_recordset($1::jsonb) AS r(email_id uuid, address text, kind text)`,
    [JSON.stringify(recipients)],
  );
  // Attachments are bytes, sent as binary parameters: one statement each (few messages carry any).
  for (const { message: m } of items) {
    for (const [position, a] of m.attachments.entries()) {
      await tx.query(
        `INSERT INTO email_attachments (email_id, position, filename, content_type, content_id, content)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [m.id, position, a.filename, a.contentType, a.contentId ?? null, a.content],
      );
    }
  }
  await recordTimelineEntries(
    tx,
    items.map(({ organizationId, message: m }) => ({
      emailId: m.id,
      organizationId,
      kind: 'accepted' as const,
      data: m.scheduledAt ? { scheduled_at: m.scheduledAt.toISOString() } : undefined,
    })),
  );
  await queueDeliveries(
    tx,
    items.map(({ message: m }) => ({ emailId: m.id, scheduledAt: m.scheduledAt })),
  );
}
