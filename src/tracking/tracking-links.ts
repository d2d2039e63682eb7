import type { Signer } from '../platform/signing.ts';
import { asciiLower, decodeAttributeValue, scanHtml } from './html-tokenizer.ts';

// Open and click tracking in one recipient's copy of an HTML body. Links become
// `<base>/t/c/<token>` and a pixel `<base>/t/o/<token>` goes before </body>; each token names the message
// and the recipient (and, for a click, the original URL), signed, so the tracking routes need no lookup
// to know where to send the reader and cannot be made to send them anywhere else.
//
// The HTML is read as a browser tokenizes it (html-tokenizer.ts). Only the href values of <a> elements
// are changed, and only where the URL can be read exactly as a browser would read it: it is better not
// to track a link than to send the reader somewhere other than where the browser would have. Everything
// else is copied through unchanged.

export interface TrackingOptions {
  signer: Signer;
  /** MAILROOM_PUBLIC_URL without a trailing slash (publicBaseUrl). */
  baseUrl: string;
  /** Where the pixel and tracked links point, when not at baseUrl: the domain's tracking subdomain. */
  trackingBaseUrl?: string;
  emailId: string;
  recipient: string;
  opens: boolean;
  clicks: boolean;
}

export type TrackingKind = 'open' | 'click';

/** What a tracking token names. `url` (clicks only) is the link's original absolute http(s) URL. */
export interface TrackingTarget {
  emailId: string;
  recipient: string;
  url?: string;
}

/** One recipient's copy of `html`, with tracked links and/or an open pixel. */
export function addTracking(html: string, options: TrackingOptions): string {
  if (!options.opens && !options.clicks) return html;
  const { signer, emailId, recipient } = options;
  const linkBase = options.trackingBaseUrl ?? options.baseUrl;
  // Our own one-click unsubscribe links must reach us directly (and never count as clicks).
  const unsubscribePrefix = new URL(`${options.baseUrl}/unsubscribe/`).href;

  const edits: Array<{ start: number; end: number; text: string }> = [];
  let bodyEnd = -1;
  scanHtml(html, {
    startTag(tag) {
      if (tag.name !== 'a' || !options.clicks) return;
      const href = tag.attributes.find((attribute) => asciiLower(attribute.name) === 'href');
      if (!href || href.value === undefined) return;
      const value = decodeAttributeValue(href.value);
      const url = value === null ? null : trackableUrl(value, unsubscribePrefix);
      if (url === null) return;
      const token = signer.sign('click', { e: emailId, r: recipient, u: url });
      // The signer refuses over-long tokens; a link too long to carry is left as it was rather than broken.
      if (!signer.verify('click', token)) return;
      edits.push({ start: href.start, end: href.end, text: `"${escapeAttribute(`${linkBase}/t/c/${token}`)}"` });
    },
    endTag(name, at, inConditionalComment) {
      // A </body> inside a conditional comment is not the document's.
      if (name === 'body' && !inConditionalComment) bodyEnd = at;
    },
  });
  if (options.opens) {
    const src = escapeAttribute(`${linkBase}/t/o/${signer.sign('open', { e: emailId, r: recipient })}`);
    const pixel = `<img src="${src}" width="1" height="1" alt="" style="display:none;border:0;width:1px;height:1px" />`;
    const at = bodyEnd === -1 ? html.length : bodyEnd;
    edits.push({ start: at, end: at, text: pixel });
  }

  const parts: string[] = [];
  let copied = 0;
  for (const edit of edits) {
    parts.push(html.slice(copied, edit.start), edit.text);
    copied = edit.end;
  }
  parts.push(html.slice(copied));
  return parts.join('');
}

/**
 * The base of a domain's tracking links at its tracking subdomain: MAILROOM_PUBLIC_URL (`baseUrl`) with
 * its host replaced by <label>.<domain>, scheme, port and path kept. The subdomain is a CNAME to the
 * public URL's host, so the same server (and proxy) answers; the tracking routes answer on any Host.
 */
export function trackingBaseUrl(baseUrl: string, domainName: string, subdomain: string): string {
  const url = new URL(baseUrl);
  url.hostname = `${subdomain}.${domainName}`;
  return url.href.replace(/\/+$/, '');
}

/** The target of a tracking token this installation signed for `kind`; null for anything else. */
export function readTrackingToken(signer: Signer, kind: TrackingKind, token: string): TrackingTarget | null {
  const payload = signer.verify(kind, token);
  if (!payload) return null;
  const { e, r, u } = payload;
  if (typeof e !== 'string' || typeof r !== 'string') return null;
  if (kind === 'open') return { emailId: e, recipient: r };
  if (typeof u !== 'string' || !isHttpUrl(u)) return null;
  return { emailId: e, recipient: r, url: u };
}

/**
 * The URL a link should be tracked as: the attribute's value as the URL parser reads it, when that is an
 * absolute http(s) URL other than our unsubscribe links; null otherwise (mailto:, tel:, #fragment,
 * relative, malformed).
 */
function trackableUrl(value: string, unsubscribePrefix: string): string | null {
  const url = stripForUrlParser(value);
  if (!isHttpUrl(url)) return null;
  if (new URL(url).href.startsWith(unsubscribePrefix)) return null;
  return url;
}

function isHttpUrl(value: string): boolean {
  if (!/^https?:/i.test(value)) return false;
  try {
    const { protocol } = new URL(value);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}

/** What the URL parser ignores: leading and trailing C0 controls and spaces, tabs and newlines anywhere. */
function stripForUrlParser(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && value.charCodeAt(start) <= 0x20) start++;
  while (end > start && value.charCodeAt(end - 1) <= 0x20) end--;
  return value.slice(start, end).replace(/[\t\n\r]/g, '');
}

function escapeAttribute(value: string): string {
  return value
    .replaceAll('&', '&amp;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;');
}
