import type { Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import type { Signer } from '../platform/signing.ts';

// A preview of a message's HTML for the dashboard's message page, behind a signed link that expires, so
// that a browser can load it in a sandboxed frame without the session token (which never goes into a
// URL). The raw source is delivery's (delivery/raw-source-routes.ts).

export const PREVIEW_LINK_SECONDS = 3600;

/**
 * The Content-Security-Policy of a preview: sandboxed (no script, no form, an opaque origin), nothing
 * fetched from the network unless the viewer asked for remote content, and framed only by the dashboard
 * (same origin).
 */
export function previewPolicy(remoteContent: boolean): string {
  const remote = remoteContent ? ' https: http:' : '';
  return [
    'sandbox',
    "default-src 'none'",
    `style-src 'unsafe-inline'${remote}`,
    `img-src data:${remote}`,
    `font-src data:${remote}`,
    "frame-ancestors 'self'",
  ].join('; ');
}

export interface OwnEmailContent {
  html: string | null;
  body_pruned_at: Date | null;
}

/** The organization's message (another's id is 404), with what is left of its content. */
export async function findOwnContent(db: Queryable, organizationId: string, emailId: string): Promise<OwnEmailContent> {
  if (!isUuid(emailId)) throw notFound('Email');
  const { rows } = await db.query<OwnEmailContent>(
    'SELECT html, body_pruned_at FROM emails WHERE id = $1 AND organization_id = $2',
    [emailId, organizationId],
  );
  if (!rows[0]) throw notFound('Email');
  return rows[0];
}

/**
 * Where a preview's HTML and inline images are read from: a sent message (emails) or a received one
 * (received_emails). Both are keyed by the message id and its organization.
 */
export type PreviewSource = 'sent' | 'received';

const PREVIEW_READS: Record<PreviewSource, { html: string; inline: string }> = {
  sent: {
    html: 'SELECT html FROM emails WHERE id = $1 AND organization_id = $2',
    inline: `SELECT content_id, content_type, content FROM email_attachments
              WHERE email_id = $1 AND content_id IS NOT NULL AND content_type LIKE 'image/%'
                AND octet_length(content) <= $2
              ORDER BY position`,
  },
  received: {
    html: 'SELECT html FROM received_emails WHERE id = $1 AND organization_id = $2',
    inline: `SELECT content_id, content_type, content FROM received_attachments
              WHERE received_email_id = $1 AND content_id IS NOT NULL AND content_type LIKE 'image/%'
                AND octet_length(content) <= $2
              ORDER BY position`,
  },
};

/**
 * A signed link (for an hour) to the HTML of the organization's message `emailId`, found by the caller:
 * null when the message has no HTML (or it was pruned). The token names the source, so a sent message's
 * link never reads a received one of the same id, or the reverse.
 */
export function signedPreviewLink(
  source: PreviewSource,
  organizationId: string,
  emailId: string,
  hasHtml: boolean,
  links: { signer: Signer; baseUrl: string; now: Date },
) {
  const expires = Math.floor(links.now.getTime() / 1000) + PREVIEW_LINK_SECONDS;
  const claims = { e: emailId, o: organizationId, x: expires, ...(source === 'received' ? { r: 1 } : {}) };
  const token = links.signer.sign('preview', claims);
  return {
    object: 'email_preview' as const,
    html_url: hasHtml ? `${links.baseUrl}/previews/${token}` : null,
    expires_at: new Date(expires * 1000).toISOString(),
  };
}

/** GET /emails/:id/preview: a signed link to the message's HTML, or null when it has none (or it was pruned). */
export async function previewLink(
  db: Queryable,
  organizationId: string,
  emailId: string,
  links: { signer: Signer; baseUrl: string; now: Date },
) {
  const email = await findOwnContent(db, organizationId, emailId);
  return signedPreviewLink('sent', organizationId, emailId, email.html !== null, links);
}

/** The HTML behind a preview link; null when the link is not one of ours, has expired, or names nothing. */
export async function readPreview(db: Queryable, signer: Signer, token: string, now: Date): Promise<string | null> {
  const payload = signer.verify('preview', token);
  if (!payload) return null;
  const { e, o, x, r } = payload;
  if (typeof e !== 'string' || typeof o !== 'string' || typeof x !== 'number' || !isUuid(e) || !isUuid(o)) return null;
  if (x * 1000 <= now.getTime()) return null;
  const reads = PREVIEW_READS[r === 1 ? 'received' : 'sent'];
  const { rows } = await db.query<{ html: string | null }>(reads.html, [e, o]);
  const html = rows[0]?.html ?? null;
  return html === null ? null : withInlineImages(db, r === 1 ? 'received' : 'sent', e, html);
}

/** The message's HTML with its cid: references to its own inline images made data: URLs (embedInlineImages). */
export async function withInlineImages(
  db: Queryable,
  source: PreviewSource,
  emailId: string,
  html: string,
): Promise<string> {
  if (!/cid:/i.test(html)) return html;
  const { rows } = await db.query<InlineImage>(PREVIEW_READS[source].inline, [emailId, INLINE_IMAGE_MAX_BYTES]);
  return embedInlineImages(html, rows);
}

/** An attachment the HTML can show by its Content-ID. */
export interface InlineImage {
  content_id: string;
  content_type: string;
  content: Uint8Array;
}

// A cid: URL where a URL is expected: an attribute value (src="cid:…", background=cid:…) or CSS url(cid:…).
const CID_REFERENCE = /(=\s*["']?|url\(\s*["']?)cid:([^"'\s)>]+)/gi;
/** Larger inline images are left as they are: a preview is one response, held in memory while it is sent. */
export const INLINE_IMAGE_MAX_BYTES = 5 * 1024 * 1024;
const IMAGE_TYPE = /^image\/[a-z0-9.+-]+$/i;

/**
 * The message's HTML with each `cid:` reference to one of its inline images replaced by the image itself
 * as a data: URL. The preview's policy already allows data: images and nothing else from elsewhere, so
 * the images show without a second link in the frame, whether remote content is loaded or not. A
 * reference to no attachment (or to one that is not an image) is left as it was.
 */
export function embedInlineImages(html: string, images: InlineImage[]): string {
  const byId = new Map<string, string>();
  for (const image of images) {
    if (!IMAGE_TYPE.test(image.content_type) || byId.has(image.content_id)) continue;
    byId.set(
      image.content_id,
      `data:${image.content_type.toLowerCase()};base64,${Buffer.from(image.content).toString('base64')}`,
    );
  }
  if (byId.size === 0) return html;
  return html.replace(CID_REFERENCE, (match, before: string, reference: string) => {
    const url = byId.get(contentIdOf(reference));
    return url === undefined ? match : `${before}${url}`;
  });
}

/** RFC 2392: a cid URL is the Content-ID, URL-encoded, without its angle brackets. */
function contentIdOf(reference: string): string {
  let id = reference;
  try {
    id = decodeURIComponent(reference);
  } catch {
    // not %-encoded after all: compare as written
  }
  return id.replace(/^<|>$/g, '');
}
