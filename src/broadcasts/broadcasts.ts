import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { formatMailbox, parseMailbox } from '../platform/addresses.ts';
import { hasControlCharacter } from '../platform/text.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import { findSendingDomain } from '../domains/domains.ts';
import { checkSegmentsExist, checkedSegmentIds } from '../contacts/segments.ts';
import { findTopic } from '../contacts/topics.ts';
import { cancelJobs } from '../queue/jobs.ts';
import { EDITABLE_STATUSES, type BroadcastStatus } from './broadcast-status.ts';

// A broadcast (Resend's /broadcasts) is one message written once and sent to every contact of a segment:
// its sender, subject, content (html and/or text, with per-contact placeholders) and, optionally, the
// topic it is sent under (contacts who opted out of the topic are left out, and its unsubscribe link
// names the topic). It is created as a draft, edited while it is a draft or scheduled, and sent now or
// at a time (send-broadcast.ts). What it may hold is checked when it is written, as a send would check
// it: the From address at a verified domain of the organization, the segment and topic the
// organization's own. So a broadcast that reaches the fan-out never fails on its own content.

/** A broadcast as stored (the columns the API reads). */
export interface BroadcastRow {
  id: string;
  name: string | null;
  segment_id: string | null;
  topic_id: string | null;
  from: string | null;
  subject: string | null;
  reply_to: string[] | null;
  preview_text: string | null;
  html: string | null;
  text: string | null;
  status: BroadcastStatus;
  pause_reason: string | null;
  failure_reason: string | null;
  scheduled_at: Date | null;
  sent_at: Date | null;
  completed_at: Date | null;
  audience_count: number;
  skipped_unsubscribed: number;
  skipped_topic: number;
  skipped_suppressed: number;
  created_at: Date;
}

/** What POST /broadcasts and PATCH /broadcasts/:id may set (Resend's names). */
export interface BroadcastInput {
  name?: string | null;
  segment_id?: string;
  /** Resend's deprecated name for segment_id. */
  audience_id?: string;
  from?: string;
  subject?: string;
  reply_to?: string | string[] | null;
  preview_text?: string | null;
  html?: string | null;
  text?: string | null;
  topic_id?: string | null;
}

/** One item of GET /broadcasts: Resend's list fields, and where it stands. */
export interface BroadcastListItem {
  id: string;
  name: string;
  segment_id: string | null;
  audience_id: string | null;
  status: BroadcastStatus;
  created_at: string;
  scheduled_at: string | null;
  sent_at: string | null;
  topic_id: string | null;
  from: string | null;
  subject: string | null;
  completed_at: string | null;
  pause_reason: string | null;
  failure_reason: string | null;
}

/** GET /broadcasts/:id without its stats (broadcast-stats.ts adds them). */
export interface BroadcastView extends BroadcastListItem {
  object: 'broadcast';
  reply_to: string[] | null;
  preview_text: string | null;
  html: string | null;
  text: string | null;
}

export const COLUMNS = `id, name, segment_id, topic_id, "from", subject, reply_to, preview_text, html, text, status,
  pause_reason, failure_reason, scheduled_at, sent_at, completed_at, audience_count, skipped_unsubscribed,
  skipped_topic, skipped_suppressed, created_at`;

/** Checked fields, ready to be written; undefined: not given (a PATCH keeps the stored value). */
interface CheckedFields {
  name?: string | null;
  segment_id?: string;
  topic_id?: string | null;
  from?: string;
  subject?: string;
  reply_to?: string[] | null;
  preview_text?: string | null;
  html?: string | null;
  text?: string | null;
}

/**
 * POST /broadcasts: a draft, checked like a send (from, subject, segment, content). `then` runs in the
 * same transaction once it is written (a send on creation), so that a broadcast whose send is refused
 * is not left behind as a draft.
 */
export async function createBroadcast(
  db: Database,
  organizationId: string,
  input: BroadcastInput,
  then?: (tx: Queryable, id: string) => Promise<unknown>,
): Promise<{ id: string }> {
  if (input.from === undefined) throw missing('from');
  if (input.subject === undefined) throw missing('subject');
  if (input.segment_id === undefined && input.audience_id === undefined) throw missing('segment_id');
  if (input.html == null && input.text == null) {
    throw new ServiceError('missing_required_field', 'Missing required field: html or text (give one or both)', 'html');
  }
  const from = await checkedFrom(db, organizationId, input.from);
  return db.transaction(async (tx) => {
    const fields = await checkFields(tx, organizationId, input, from);
    const { rows } = await tx.query<{ id: string }>(
      `INSERT INTO broadcasts (organization_id, name, segment_id, topic_id, "from", subject, reply_to, preview_text,
                             html, text)
     VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10) RETURNING id`,
      [
        organizationId,
        fields.name ?? null,
        fields.segment_id,
        fields.topic_id ?? null,
        fields.from,
        fields.subject,
        fields.reply_to ? JSON.stringify(fields.reply_to) : null,
        fields.preview_text ?? null,
        fields.html ?? null,
        fields.text ?? null,
      ],
    );
    const id = rows[0]!.id;
    if (then) await then(tx, id);
    return { id };
  });
}

/** Newest first (Resend's order), a page at a time (platform/db/keyset-page.ts). */
export async function listBroadcasts(
  db: Queryable,
  organizationId: string,
  page: PageRequest,
): Promise<Page<BroadcastListItem>> {
  const listed = await keysetPage<BroadcastRow>(
    db,
    { table: 'broadcasts', columns: COLUMNS, organizationId, newestFirst: true },
    page,
  );
  return { ...listed, data: listed.data.map(toListItem) };
}

/** One of the organization's broadcasts, or undefined (also for a malformed id); `lock` takes its row. */
export async function findBroadcast(
  db: Queryable,
  organizationId: string,
  id: string,
  lock = false,
): Promise<BroadcastRow | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await db.query<BroadcastRow>(
    `SELECT ${COLUMNS} FROM broadcasts WHERE id = $2 AND organization_id = $1${lock ? ' FOR UPDATE' : ''}`,
    [organizationId, id],
  );
  return rows[0];
}

export async function getBroadcastRow(db: Queryable, organizationId: string, id: string): Promise<BroadcastRow> {
  const broadcast = await findBroadcast(db, organizationId, id);
  if (!broadcast) throw notFound('Broadcast');
  return broadcast;
}

/**
 * PATCH /broadcasts/:id: the fields given replace the stored ones, only while the broadcast is a draft
 * or scheduled (once its audience is taken, what was sent is what it says). The row is locked from the
 * status check to the write, so a send that starts meanwhile waits and then sends the new content.
 */
export async function updateBroadcast(
  db: Database,
  organizationId: string,
  id: string,
  input: BroadcastInput,
): Promise<{ id: string }> {
  const from = input.from === undefined ? undefined : await checkedFrom(db, organizationId, input.from);
  return db.transaction(async (tx) => {
    const stored = await editable(tx, organizationId, id, 'updated');
    const fields = await checkFields(tx, organizationId, input, from);
    const html = fields.html !== undefined ? fields.html : stored.html;
    const text = fields.text !== undefined ? fields.text : stored.text;
    if (html === null && text === null) {
      throw new ServiceError('validation_error', 'A broadcast needs html or text: this would leave it neither', 'html');
    }
    const sets: string[] = [];
    const params: unknown[] = [organizationId, stored.id];
    const set = (column: string, value: unknown, cast = '') => sets.push(`${column} = $${params.push(value)}${cast}`);
    if (fields.name !== undefined) set('name', fields.name);
    if (fields.segment_id !== undefined) set('segment_id', fields.segment_id);
    if (fields.topic_id !== undefined) set('topic_id', fields.topic_id);
    if (fields.from !== undefined) set('"from"', fields.from);
    if (fields.subject !== undefined) set('subject', fields.subject);
    if (fields.reply_to !== undefined) {
      set('reply_to', fields.reply_to === null ? null : JSON.stringify(fields.reply_to), '::jsonb');
    }
    if (fields.preview_text !== undefined) set('preview_text', fields.preview_text);
    if (fields.html !== undefined) set('html', fields.html);
    if (fields.text !== undefined) set('text', fields.text);
    if (sets.length > 0) {
      await tx.query(
        `UPDATE broadcasts SET ${sets.join(', ')}, updated_at = now() WHERE organization_id = $1 AND id = $2`,
        params,
      );
    }
    return { id: stored.id };
  });
}

/**
 * DELETE /broadcasts/:id: only a draft or a scheduled broadcast (one being sent is canceled instead,
 * and one sent stays as the record of its copies). A scheduled one's fan-out job goes with it.
 */
export async function deleteBroadcast(db: Database, organizationId: string, id: string): Promise<{ id: string }> {
  return db.transaction(async (tx) => {
    const stored = await editable(tx, organizationId, id, 'deleted');
    await cancelJobs(tx, 'broadcast-fan-out', 'broadcast_id', stored.id);
    await tx.query('DELETE FROM broadcasts WHERE organization_id = $1 AND id = $2', [organizationId, stored.id]);
    return { id: stored.id };
  });
}

/**
 * POST /broadcasts/:id/duplicate (Resend's SDK): a new draft with the broadcast's name and content, in
 * any status of the original; its segment and topic are the original's while they exist.
 */
export async function duplicateBroadcast(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Broadcast');
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO broadcasts (organization_id, name, segment_id, topic_id, "from", subject, reply_to, preview_text,
                             html, text)
     SELECT organization_id, name, segment_id, topic_id, "from", subject, reply_to, preview_text, html, text
       FROM broadcasts WHERE organization_id = $1 AND id = $2
     RETURNING id`,
    [organizationId, id],
  );
  if (!rows[0]) throw notFound('Broadcast');
  return { id: rows[0].id };
}

/** The broadcast, locked, when it may still change; invalid_state otherwise. */
async function editable(tx: Queryable, organizationId: string, id: string, change: string): Promise<BroadcastRow> {
  const stored = await findBroadcast(tx, organizationId, id, true);
  if (!stored) throw notFound('Broadcast');
  if (!EDITABLE_STATUSES.includes(stored.status)) {
    throw new ServiceError(
      'invalid_state',
      `The broadcast is ${stored.status}: only a draft or scheduled broadcast can be ${change}`,
    );
  }
  return stored;
}

const missing = (field: string) =>
  new ServiceError('missing_required_field', `Missing required field: ${field}`, field);

/**
 * The From address as a send checks it: a mailbox at a verified domain of the organization. It reads
 * through `db` (the domain look-up is cached per database), so call it before any transaction: PGlite
 * is one connection, and a read outside an open transaction would wait for it.
 */
async function checkedFrom(db: Database, organizationId: string, from: string): Promise<string> {
  const mailbox = parseMailbox(from, 'from');
  if (!(await findSendingDomain(db, organizationId, mailbox.domain))) {
    throw new ServiceError(
      'invalid_from_address',
      `The domain ${mailbox.domain} is not a verified domain of this organization`,
      'from',
    );
  }
  return formatMailbox(mailbox);
}

/**
 * Checks each field given, against the organization's data too (segment and topic inside `tx`, the From
 * address before it through `db`); a refusal names the field.
 */
async function checkFields(
  tx: Queryable,
  organizationId: string,
  input: BroadcastInput,
  from: string | undefined,
): Promise<CheckedFields> {
  const fields: CheckedFields = {};
  if (from !== undefined) fields.from = from;
  if (input.name !== undefined) fields.name = input.name;

  if (input.segment_id !== undefined && input.audience_id !== undefined && input.segment_id !== input.audience_id) {
    throw new ServiceError(
      'validation_error',
      'audience_id is the older name of segment_id: give one, or both with the same id',
      'audience_id',
    );
  }
  const segmentField = input.segment_id !== undefined ? 'segment_id' : 'audience_id';
  const segmentId = input.segment_id ?? input.audience_id;
  if (segmentId !== undefined) {
    const [checked] = checkedSegmentIds([segmentId], segmentField);
    // FOR SHARE: the segment cannot be deleted before this transaction commits.
    await checkSegmentsExist(tx, organizationId, [checked!], segmentField);
    fields.segment_id = checked;
  }

  if (input.topic_id !== undefined) {
    if (input.topic_id === null) fields.topic_id = null;
    else {
      const topic = await findTopic(tx, organizationId, input.topic_id);
      if (!topic) throw new ServiceError('validation_error', `topic_id: no such topic: ${input.topic_id}`, 'topic_id');
      fields.topic_id = topic.id;
    }
  }

  if (input.subject !== undefined) {
    if (input.subject.trim() === '') throw new ServiceError('validation_error', 'subject is empty', 'subject');
    if (hasControlCharacter(input.subject)) {
      throw new ServiceError(
        'validation_error',
        'subject may not contain line breaks or control characters',
        'subject',
      );
    }
    fields.subject = input.subject;
  }

  if (input.reply_to !== undefined) {
    const list = input.reply_to === null ? [] : typeof input.reply_to === 'string' ? [input.reply_to] : input.reply_to;
    const parsed = list.map((entry, i) =>
      formatMailbox(parseMailbox(entry, list.length > 1 ? `reply_to.${i}` : 'reply_to')),
    );
    fields.reply_to = parsed.length === 0 ? null : parsed;
  }

  if (input.preview_text !== undefined) {
    if (input.preview_text !== null && hasControlCharacter(input.preview_text)) {
      throw new ServiceError(
        'validation_error',
        'preview_text may not contain line breaks or control characters',
        'preview_text',
      );
    }
    fields.preview_text = input.preview_text === '' ? null : input.preview_text;
  }
  if (input.html !== undefined) fields.html = input.html;
  if (input.text !== undefined) fields.text = input.text;
  return fields;
}

const iso = (at: Date | null) => (at === null ? null : new Date(at).toISOString());

export function toListItem(row: BroadcastRow): BroadcastListItem {
  return {
    id: row.id,
    // Resend's Broadcast.name is a string: a broadcast created without a name reads as "".
    name: row.name ?? '',
    segment_id: row.segment_id,
    audience_id: row.segment_id,
    status: row.status,
    created_at: new Date(row.created_at).toISOString(),
    scheduled_at: iso(row.scheduled_at),
    sent_at: iso(row.sent_at),
    topic_id: row.topic_id,
    from: row.from,
    subject: row.subject,
    completed_at: iso(row.completed_at),
    pause_reason: row.pause_reason,
    failure_reason: row.failure_reason,
  };
}

export function toView(row: BroadcastRow): BroadcastView {
  return {
    object: 'broadcast',
    ...toListItem(row),
    reply_to: row.reply_to,
    preview_text: row.preview_text,
    html: row.html,
    text: row.text,
  };
}
