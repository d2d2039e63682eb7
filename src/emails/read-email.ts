import type { Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import type { EmailStatus } from './statuses.ts';
import { lastEventOf } from './last-event.ts';

/** A message's row as read back (GET /emails/:id, and the columns GET /emails shows). */
export interface EmailRecord {
  id: string;
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  reply_to: string[];
  subject: string;
  html: string | null;
  text: string | null;
  tags: unknown;
  headers: Record<string, string> | null;
  topic_id: string | null;
  template: unknown;
  message_id: string;
  status: EmailStatus;
  scheduled_at: Date | null;
  created_at: Date;
  last_event: string | null;
  attachments: Array<{ filename: string; content_type: string; size: number }>;
  body_pruned_at: Date | null;
}

/**
 * GET /emails/:id: the message as accepted, one organization's only (another's id is 404), attachments
 * by name, type and size without content; `last_event` as last-event.ts says. `body_pruned_at`: absent
 * while the content is kept; once retention deleted it, when that happened, with html, text and headers
 * null, no attachments and the template without variables.
 */
export async function readEmail(db: Queryable, organizationId: string, id: string) {
  if (!isUuid(id)) throw notFound('Email');
  const { rows } = await db.query<EmailRecord>(
    `SELECT e.id, e."from", e."to", e.cc, e.bcc, e.reply_to, e.subject, e.html, e.text, e.tags, e.headers,
            e.topic_id, e.template, e.message_id, e.status, e.scheduled_at, e.created_at,
            e.body_pruned_at,
            (SELECT type FROM email_events WHERE email_id = e.id ORDER BY created_at DESC, seq DESC LIMIT 1) AS last_event,
            coalesce((SELECT jsonb_agg(jsonb_build_object('filename', filename, 'content_type', content_type,
                                                          'size', octet_length(content)) ORDER BY position)
                        FROM email_attachments WHERE email_id = e.id), '[]'::jsonb) AS attachments
       FROM emails e WHERE e.id = $1 AND e.organization_id = $2`,
    [id, organizationId],
  );
  const email = rows[0];
  if (!email) throw notFound('Email');
  return {
    object: 'email' as const,
    id: email.id,
    from: email.from,
    to: email.to,
    cc: email.cc,
    bcc: email.bcc,
    reply_to: email.reply_to,
    subject: email.subject,
    html: email.html,
    text: email.text,
    tags: tagList(email.tags),
    headers: email.headers,
    topic_id: email.topic_id,
    template: email.template ?? null,
    attachments: email.attachments,
    // Present only once retention deleted the content, so a kept message reads exactly as before.
    ...(email.body_pruned_at ? { body_pruned_at: email.body_pruned_at.toISOString() } : {}),
    created_at: email.created_at.toISOString(),
    scheduled_at: email.scheduled_at?.toISOString() ?? null,
    last_event: lastEventOf(email.status, email.last_event),
    message_id: email.message_id,
  };
}

/**
 * A message's tags in one form, Resend's list of `{ name, value }`, whichever form they were sent in
 * (an object, a list of objects, or bare names): values read as text, a bare name as "true" (set, like
 * a bare name in an SMTP X-Tags header). No tags is an empty list.
 */
export function tagList(tags: unknown): Array<{ name: string; value: string }> {
  if (Array.isArray(tags)) {
    return tags.map((tag: unknown) =>
      typeof tag === 'string'
        ? { name: tag, value: 'true' }
        : { name: String((tag as { name: unknown }).name), value: String((tag as { value: unknown }).value) },
    );
  }
  if (tags !== null && typeof tags === 'object') {
    return Object.entries(tags).map(([name, value]) => ({ name, value: String(value) }));
  }
  return [];
}

/** GET /emails/:id/events: the timeline, oldest first. */
export async function readTimeline(db: Queryable, organizationId: string, id: string) {
  if (!isUuid(id)) throw notFound('Email');
  const owned = await db.query('SELECT 1 FROM emails WHERE id = $1 AND organization_id = $2', [id, organizationId]);
  if (owned.rowCount === 0) throw notFound('Email');
  const { rows } = await db.query<{
    id: string;
    type: string;
    created_at: Date;
    recipient: string | null;
    data: unknown;
  }>('SELECT id, type, created_at, recipient, data FROM email_events WHERE email_id = $1 ORDER BY created_at, seq', [
    id,
  ]);
  return {
    object: 'list' as const,
    data: rows.map((event) => ({
      object: 'event' as const,
      id: `evt_${event.id}`,
      type: event.type,
      created_at: event.created_at.toISOString(),
      ...(event.recipient ? { recipient: event.recipient } : {}),
      ...(event.data ? { data: event.data } : {}),
    })),
  };
}
