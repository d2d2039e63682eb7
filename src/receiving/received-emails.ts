import type { Queryable } from '../platform/db/database.ts';
import { escapeLike } from '../platform/db/like-pattern.ts';
import { notFound, ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { attachmentPage, signedDownload, verifiedDownload, type AttachmentLinks } from '../emails/attachments.ts';
import { signedPreviewLink, withInlineImages } from '../emails/email-preview.ts';

// Received messages as Resend's emails.receiving shows them (GET /emails/receiving and below): the list,
// one message with its bodies, headers and a signed link to its raw source, and its attachments with
// signed links. The links are the credential (no API key: the SDK's forward() fetches raw.download_url
// with a plain fetch) and expire like a sent attachment's (emails/attachments.ts signs both).
//
// Mailroom's own findings about a message (its envelope, sender authentication, spam verdict,
// quarantine, the sent message it answers, the text without its quoted history, the routes applied)
// are extra properties of the single message: Resend's schema for it does not close its properties,
// and the SDK's type reads the fields it knows. Quarantined messages are left out of the list unless
// it is asked for them (`quarantined=true`: only those), so a spam run does not bury the inbox.

export const RECEIVED_LIMIT_DEFAULT = 20;
export const RECEIVED_LIMIT_MAX = 100;

/** Where signed links to a received message's raw source and attachments are served. */
export const RECEIVED_FILE_PATH = '/emails/receiving/files';

interface ReceivedRow {
  id: string;
  organization_id: string;
  mail_from: string;
  received_for: string[];
  from_address: string;
  to_addresses: string[];
  cc_addresses: string[];
  bcc_addresses: string[];
  reply_to_addresses: string[];
  subject: string;
  message_id: string;
  quarantined: boolean;
  created_at: Date;
}

interface ReceivedDetailRow extends ReceivedRow {
  headers: Record<string, string>;
  html: string | null;
  text: string | null;
  stripped_text: string | null;
  size_bytes: number;
  client_address: string;
  helo: string;
  tls: boolean;
  authentication: Record<string, unknown>;
  spam_verdict: 'ham' | 'spam' | null;
  spam_score: number | null;
  in_reply_to_email_id: string | null;
  routes: unknown[];
  has_raw: boolean;
}

interface AttachmentRow {
  id: string;
  received_email_id: string;
  filename: string | null;
  content_type: string;
  content_disposition: 'inline' | 'attachment' | null;
  content_id: string | null;
  size: number;
}

const LIST_COLUMNS = `r.id, r.organization_id, r.mail_from, r.received_for, r.from_address, r.to_addresses,
  r.cc_addresses, r.bcc_addresses, r.reply_to_addresses, r.subject, r.message_id, r.quarantined, r.created_at`;

const ATTACHMENT_COLUMNS = `a.id, a.received_email_id, a.filename, a.content_type, a.content_disposition,
  a.content_id, a.size_bytes AS size`;

export interface ReceivedListQuery {
  limit: number;
  after?: string;
  before?: string;
  /** Only the quarantined messages (true); the others (false, the default). */
  quarantined: boolean;
  /** Part of the sender, a recipient or the subject, in any case. */
  search?: string;
}

/** GET /emails/receiving: newest first, a page at a time by keyset on (created_at, id). */
export async function listReceivedEmails(db: Queryable, organizationId: string, query: ReceivedListQuery) {
  if (query.after !== undefined && query.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  const params: unknown[] = [organizationId, query.quarantined];
  const param = (value: unknown) => `$${params.push(value)}`;
  const where = ['r.organization_id = $1', 'r.quarantined = $2'];
  const cursor = query.after ?? query.before;
  const forward = query.before === undefined;
  if (cursor !== undefined) {
    const field = forward ? 'after' : 'before';
    const { rowCount } = isUuid(cursor)
      ? await db.query('SELECT 1 FROM received_emails WHERE id = $1 AND organization_id = $2', [cursor, organizationId])
      : { rowCount: 0 };
    if (rowCount === 0) throw new ServiceError('validation_error', `${field}: no received email ${cursor}`, field);
    where.push(
      `(r.created_at, r.id) ${forward ? '<' : '>'} (SELECT c.created_at, c.id FROM received_emails c WHERE c.id = ${param(cursor)}::uuid)`,
    );
  }
  const search = query.search?.trim();
  if (search) {
    const pattern = param(`%${escapeLike(search.toLowerCase())}%`);
    where.push(`(lower(r.from_address) LIKE ${pattern} OR lower(r.subject) LIKE ${pattern}
      OR lower(array_to_string(r.to_addresses, ' ')) LIKE ${pattern}
      OR lower(array_to_string(r.received_for, ' ')) LIKE ${pattern})`);
  }
  // `before` walks towards the newer ones, then the page is turned back to newest first.
  const order = forward ? 'DESC' : 'ASC';
  const limit = Math.min(query.limit, RECEIVED_LIMIT_MAX);
  const { rows } = await db.query<ReceivedRow>(
    `SELECT ${LIST_COLUMNS} FROM received_emails r WHERE ${where.join(' AND ')}
      ORDER BY r.created_at ${order}, r.id ${order} LIMIT ${param(limit + 1)}`,
    params,
  );
  const hasMore = rows.length > limit;
  const page = hasMore ? rows.slice(0, limit) : rows;
  if (!forward) page.reverse();
  const attachments = await attachmentsOf(
    db,
    page.map((row) => row.id),
  );
  return {
    object: 'list' as const,
    has_more: hasMore,
    data: page.map((row) => ({ ...summary(row), attachments: (attachments.get(row.id) ?? []).map(inboundAttachment) })),
  };
}

/** GET /emails/receiving/:id: the message with its bodies, headers, a link to its raw source, and Mailroom's findings. */
export async function getReceivedEmail(
  db: Queryable,
  organizationId: string,
  id: string,
  options: { htmlFormat: 'data_uri' | 'cid' },
  links: AttachmentLinks,
) {
  const row = await requireReceived(db, organizationId, id);
  const attachments = (await attachmentsOf(db, [row.id])).get(row.id) ?? [];
  const html =
    row.html !== null && options.htmlFormat === 'data_uri'
      ? await withInlineImages(db, 'received', row.id, row.html)
      : row.html;
  return {
    object: 'email' as const,
    ...summary(row),
    html,
    text: row.text,
    headers: row.headers,
    raw: row.has_raw
      ? signedDownload(links, 'received-file', RECEIVED_FILE_PATH, { r: row.id, o: organizationId })
      : null,
    attachments: attachments.map(inboundAttachment),
    // Mailroom's own: not in Resend's shape.
    envelope: { mail_from: row.mail_from, client_address: row.client_address, helo: row.helo, tls: row.tls },
    size: row.size_bytes,
    authentication: row.authentication,
    spam: row.spam_verdict === null ? null : { verdict: row.spam_verdict, score: row.spam_score },
    quarantined: row.quarantined,
    in_reply_to_email_id: row.in_reply_to_email_id,
    stripped_text: row.stripped_text,
    routes: row.routes,
  };
}

/** GET /emails/receiving/:id/preview: a signed link to a sandboxed view of the message's HTML (the dashboard's). */
export async function receivedPreviewLink(db: Queryable, organizationId: string, id: string, links: AttachmentLinks) {
  const row = await requireReceived(db, organizationId, id);
  return signedPreviewLink('received', organizationId, id, row.html !== null, links);
}

/** GET /emails/receiving/:id/attachments */
export async function listReceivedAttachments(
  db: Queryable,
  organizationId: string,
  emailId: string,
  page: { limit: number; after?: string; before?: string },
  links: AttachmentLinks,
) {
  await requireReceived(db, organizationId, emailId);
  const rows = (await attachmentsOf(db, [emailId])).get(emailId) ?? [];
  const { rows: slice, hasMore } = attachmentPage(rows, page);
  return {
    object: 'list' as const,
    has_more: hasMore,
    data: slice.map((row) => attachmentData(row, organizationId, links)),
  };
}

/** GET /emails/receiving/:id/attachments/:attachment_id */
export async function getReceivedAttachment(
  db: Queryable,
  organizationId: string,
  emailId: string,
  attachmentId: string,
  links: AttachmentLinks,
) {
  await requireReceived(db, organizationId, emailId);
  const row = isUuid(attachmentId)
    ? (await attachmentsOf(db, [emailId])).get(emailId)?.find((attachment) => attachment.id === attachmentId)
    : undefined;
  if (!row) throw notFound('Attachment');
  return { object: 'attachment' as const, ...attachmentData(row, organizationId, links) };
}

/**
 * What a received file link serves: the raw message, or one attachment; null when the link is not one
 * of ours, has expired, or names what is no longer there (deleted with its message).
 */
export async function downloadReceivedFile(
  db: Queryable,
  signer: AttachmentLinks['signer'],
  token: string,
  now: Date,
): Promise<{ filename: string; contentType: string; content: Buffer } | null> {
  const payload = verifiedDownload(signer, 'received-file', token, now);
  if (!payload) return null;
  const { r, a, o } = payload;
  if (typeof r !== 'string' || typeof o !== 'string' || !isUuid(r)) return null;
  if (a === undefined) {
    const { rows } = await db.query<{ content: Uint8Array }>(
      `SELECT w.content FROM received_email_raw w JOIN received_emails r ON r.id = w.received_email_id
        WHERE w.received_email_id = $1 AND r.organization_id = $2`,
      [r, o],
    );
    return rows[0]
      ? { filename: `${r}.eml`, contentType: 'message/rfc822', content: Buffer.from(rows[0].content) }
      : null;
  }
  if (typeof a !== 'string' || !isUuid(a)) return null;
  const { rows } = await db.query<{ filename: string | null; content_type: string; content: Uint8Array }>(
    `SELECT a.filename, a.content_type, a.content FROM received_attachments a
       JOIN received_emails r ON r.id = a.received_email_id
      WHERE a.id = $1 AND a.received_email_id = $2 AND r.organization_id = $3`,
    [a, r, o],
  );
  const row = rows[0];
  if (!row) return null;
  return { filename: row.filename ?? a, contentType: row.content_type, content: Buffer.from(row.content) };
}

async function requireReceived(db: Queryable, organizationId: string, id: string): Promise<ReceivedDetailRow> {
  if (!isUuid(id)) throw notFound('Received email');
  const { rows } = await db.query<ReceivedDetailRow>(
    `SELECT ${LIST_COLUMNS}, r.headers, r.html, r.text, r.stripped_text, r.size_bytes, r.client_address, r.helo,
            r.tls, r.authentication, r.spam_verdict, r.spam_score, r.in_reply_to_email_id, r.routes,
            EXISTS (SELECT 1 FROM received_email_raw w WHERE w.received_email_id = r.id) AS has_raw
       FROM received_emails r WHERE r.id = $1 AND r.organization_id = $2`,
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Received email');
  return rows[0];
}

/** The attachments of each message, in their order in the message. */
async function attachmentsOf(db: Queryable, emailIds: string[]): Promise<Map<string, AttachmentRow[]>> {
  const byEmail = new Map<string, AttachmentRow[]>();
  if (emailIds.length === 0) return byEmail;
  const { rows } = await db.query<AttachmentRow>(
    `SELECT ${ATTACHMENT_COLUMNS} FROM received_attachments a WHERE a.received_email_id = ANY($1::uuid[])
      ORDER BY a.received_email_id, a.position`,
    [emailIds],
  );
  for (const row of rows) {
    const list = byEmail.get(row.received_email_id) ?? [];
    list.push(row);
    byEmail.set(row.received_email_id, list);
  }
  return byEmail;
}

/** The fields the list and the single message share (Resend's ListReceivingEmail). */
function summary(row: ReceivedRow) {
  return {
    id: row.id,
    to: row.to_addresses,
    from: row.from_address,
    created_at: new Date(row.created_at).toISOString(),
    subject: row.subject,
    bcc: row.bcc_addresses,
    cc: row.cc_addresses,
    reply_to: row.reply_to_addresses,
    received_for: row.received_for,
    message_id: row.message_id,
    quarantined: row.quarantined,
  };
}

/** A Content-ID as Resend gives it: without the angle brackets of the header. */
const bareContentId = (contentId: string | null) => (contentId === null ? null : contentId.replace(/^<|>$/g, ''));

/** An attachment inside a message's answer (the SDK's InboundAttachment): metadata only. */
function inboundAttachment(row: AttachmentRow) {
  return {
    id: row.id,
    filename: row.filename,
    size: row.size,
    content_type: row.content_type,
    content_id: bareContentId(row.content_id),
    content_disposition: row.content_disposition,
  };
}

/** An attachment from its own routes (the SDK's AttachmentData), with its signed link. */
function attachmentData(row: AttachmentRow, organizationId: string, links: AttachmentLinks) {
  const contentId = bareContentId(row.content_id);
  return {
    id: row.id,
    ...(row.filename === null ? {} : { filename: row.filename }),
    size: row.size,
    content_type: row.content_type,
    // A part without a Content-Disposition is an attachment unless the HTML refers to it by Content-ID.
    content_disposition: row.content_disposition ?? (contentId === null ? 'attachment' : 'inline'),
    ...(contentId === null ? {} : { content_id: contentId }),
    ...signedDownload(links, 'received-file', RECEIVED_FILE_PATH, {
      r: row.received_email_id,
      a: row.id,
      o: organizationId,
    }),
  };
}
