import type { Queryable } from '../platform/db/database.ts';
import { notFound, ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import type { Signer, SigningPurpose } from '../platform/signing.ts';

// A sent message's attachments, as Resend shows them: metadata, and a download_url that serves the
// content. The URL is signed for the attachment and expires after an hour, so it can be handed to a
// browser or a job without the API key; after that, reading the attachment again gives a fresh one.

export const DOWNLOAD_LINK_SECONDS = 3600;
const PAGE_MAX = 100;

interface AttachmentRow {
  id: string;
  position: number;
  filename: string;
  content_type: string;
  content_id: string | null;
  size: number;
}

export interface AttachmentLinks {
  signer: Signer;
  /** The service's public base URL, without a trailing slash. */
  baseUrl: string;
  now: Date;
}

const COLUMNS = 'a.id, a.position, a.filename, a.content_type, a.content_id, octet_length(a.content) AS size';

/** A signed link to `path`/<token> for `payload`, expiring DOWNLOAD_LINK_SECONDS from now; the token carries it. */
export function signedDownload(
  links: AttachmentLinks,
  purpose: SigningPurpose,
  path: string,
  payload: Record<string, unknown>,
): { download_url: string; expires_at: string } {
  const expires = Math.floor(links.now.getTime() / 1000) + DOWNLOAD_LINK_SECONDS;
  const token = links.signer.sign(purpose, { ...payload, x: expires });
  return { download_url: `${links.baseUrl}${path}/${token}`, expires_at: new Date(expires * 1000).toISOString() };
}

/** The payload of a link signedDownload made for `purpose`; null when it is not one or has expired. */
export function verifiedDownload(
  signer: Signer,
  purpose: SigningPurpose,
  token: string,
  now: Date,
): Record<string, unknown> | null {
  const payload = signer.verify(purpose, token);
  if (!payload || typeof payload.x !== 'number' || payload.x * 1000 <= now.getTime()) return null;
  return payload;
}

/**
 * A page of a message's attachments, all read in their order (a message has few): `limit` after or
 * before the attachment a cursor names, which must be one of them (400 naming the field otherwise).
 */
export function attachmentPage<Row extends { id: string }>(
  rows: Row[],
  page: { limit: number; after?: string; before?: string },
): { rows: Row[]; hasMore: boolean } {
  if (page.after !== undefined && page.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  const cursorId = page.after ?? page.before;
  let from = 0;
  let to = rows.length;
  if (cursorId !== undefined) {
    const field = page.after !== undefined ? 'after' : 'before';
    const at = rows.findIndex((row) => row.id === cursorId);
    if (at < 0) throw new ServiceError('validation_error', `${field}: no attachment ${cursorId} on this email`, field);
    if (page.after !== undefined) from = at + 1;
    else to = at;
  }
  const limit = Math.min(page.limit, PAGE_MAX);
  if (page.before !== undefined)
    return { rows: rows.slice(Math.max(from, to - limit), to), hasMore: to - limit > from };
  return { rows: rows.slice(from, from + limit), hasMore: from + limit < to };
}

/** RFC 6266: an ASCII fallback name, and the real one in RFC 5987 encoding. */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/** GET /emails/:id/attachments: in the order they were sent, `limit` at a time after/before an attachment id. */
export async function listAttachments(
  db: Queryable,
  organizationId: string,
  emailId: string,
  page: { limit: number; after?: string; before?: string },
  links: AttachmentLinks,
) {
  await requireEmail(db, organizationId, emailId);
  const { rows } = await db.query<AttachmentRow>(
    `SELECT ${COLUMNS} FROM email_attachments a WHERE a.email_id = $1 ORDER BY a.position`,
    [emailId],
  );
  const { rows: slice, hasMore } = attachmentPage(rows, page);
  return { object: 'list' as const, has_more: hasMore, data: slice.map((row) => view(row, organizationId, links)) };
}

/** GET /emails/:id/attachments/:attachment_id */
export async function getAttachment(
  db: Queryable,
  organizationId: string,
  emailId: string,
  attachmentId: string,
  links: AttachmentLinks,
) {
  await requireEmail(db, organizationId, emailId);
  if (!isUuid(attachmentId)) throw notFound('Attachment');
  const { rows } = await db.query<AttachmentRow>(
    `SELECT ${COLUMNS} FROM email_attachments a WHERE a.email_id = $1 AND a.id = $2`,
    [emailId, attachmentId],
  );
  if (!rows[0]) throw notFound('Attachment');
  return { object: 'attachment' as const, ...view(rows[0], organizationId, links) };
}

/** The content behind a download_url; null when the link is not one of ours, has expired, or names nothing. */
export async function downloadAttachment(
  db: Queryable,
  signer: Signer,
  token: string,
  now: Date,
): Promise<{ filename: string; contentType: string; content: Buffer } | null> {
  const payload = verifiedDownload(signer, 'attachment', token, now);
  if (!payload) return null;
  const { a, o } = payload;
  if (typeof a !== 'string' || typeof o !== 'string' || !isUuid(a)) return null;
  const { rows } = await db.query<{ filename: string; content_type: string; content: Uint8Array }>(
    `SELECT a.filename, a.content_type, a.content FROM email_attachments a JOIN emails e ON e.id = a.email_id
      WHERE a.id = $1 AND e.organization_id = $2`,
    [a, o],
  );
  const row = rows[0];
  return row ? { filename: row.filename, contentType: row.content_type, content: Buffer.from(row.content) } : null;
}

/** The email must be the organization's, with its content: once retention pruned it, 404 says so. */
async function requireEmail(db: Queryable, organizationId: string, emailId: string): Promise<void> {
  if (!isUuid(emailId)) throw notFound('Email');
  const { rows } = await db.query<{ body_pruned_at: Date | null }>(
    'SELECT body_pruned_at FROM emails WHERE id = $1 AND organization_id = $2',
    [emailId, organizationId],
  );
  if (!rows[0]) throw notFound('Email');
  const prunedAt = rows[0].body_pruned_at;
  if (prunedAt) {
    throw new ServiceError(
      'not_found',
      `The content and attachments of this email were deleted on ${prunedAt.toISOString()}, at the end of the retention period`,
    );
  }
}

function view(row: AttachmentRow, organizationId: string, links: AttachmentLinks) {
  return {
    id: row.id,
    filename: row.filename,
    size: row.size,
    content_type: row.content_type,
    // An attachment with a Content-ID is meant to be shown inside the HTML (cid:…).
    content_disposition: row.content_id === null ? ('attachment' as const) : ('inline' as const),
    ...(row.content_id === null ? {} : { content_id: row.content_id }),
    ...signedDownload(links, 'attachment', '/attachments', { a: row.id, o: organizationId }),
  };
}
