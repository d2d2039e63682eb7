import { storableText } from '../platform/text.ts';

// What of a request or response body the request log keeps. Secrets and message content are replaced by
// REDACTED, keeping their keys, so the shape of the body stays readable; a body larger than
// MAX_BODY_BYTES is cut down (long strings shortened, long lists and objects cut off with a note).

export const REDACTED = '[redacted]';

/** The most a kept body takes, as JSON text. */
export const MAX_BODY_BYTES = 16 * 1024;

/**
 * Keys whose value is a credential, at any depth: API key tokens (POST /api-keys), session tokens,
 * passwords, webhook signing secrets.
 */
const SECRET_KEYS = new Set(['token', 'password', 'signing_secret', 'secret', 'private_key', 'authorization']);

/**
 * Keys whose value is a URL that may itself be a credential: a webhook endpoint (a Slack-style hook's URL
 * is its secret; and the log must not list endpoints to keys that may not list them) and an attachment's
 * `path` (a pre-signed link carries its signature in the query). Their origin stays, the rest goes.
 */
const URL_KEYS = new Set(['endpoint', 'url', 'path']);

/**
 * Keys whose value is message content, at any depth: what MAILROOM_RETENTION_DAYS prunes from a stored
 * message (bodies, custom headers' values, template variables, attachments' content), and a template's
 * own html and text. The subject, addresses and tags are metadata and stay.
 */
const CONTENT_KEYS = new Set(['html', 'text', 'content', 'react']);

/** Values of these keys are content, their names are not: `headers`, and a send's template `variables`. */
const CONTENT_MAPS = new Set(['headers', 'variables']);

/**
 * The body as the log keeps it: a JSON object or null (Resend's log schema), secrets and content
 * redacted, cut to MAX_BODY_BYTES. A body that is not an object (a batch's array, PATCH
 * /contacts/:id/topics's array) is kept under the key `body`.
 */
export function loggedBody(value: unknown): Record<string, unknown> | null {
  if (value === undefined || value === null) return null;
  return fit(redactedObject(value), MAX_BODY_BYTES) as Record<string, unknown>;
}

/**
 * The same body as JSON text, as the log stores it: serialized once when it fits (almost every body),
 * so that a request on the hot path pays one JSON.stringify for its entry.
 */
export function loggedBodyText(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const object = redactedObject(value);
  const text = JSON.stringify(object);
  // A UTF-16 unit takes at most 3 bytes of UTF-8: most bodies fit without counting their bytes.
  if (text.length * 3 <= MAX_BODY_BYTES || Buffer.byteLength(text) <= MAX_BODY_BYTES) return text;
  return JSON.stringify(fit(object, MAX_BODY_BYTES));
}

function redactedObject(value: unknown): Record<string, unknown> {
  const redacted = redact(value, undefined);
  return isPlainObject(redacted) ? redacted : { body: redacted };
}

function redact(value: unknown, key: string | undefined): unknown {
  // null and absent stay as they are: whether a message had html or a key had a token is worth seeing.
  if (value === null || value === undefined) return value;
  if (key !== undefined && (SECRET_KEYS.has(key) || CONTENT_KEYS.has(key))) return REDACTED;
  if (key !== undefined && URL_KEYS.has(key) && typeof value === 'string') return urlOrigin(value);
  if (key !== undefined && CONTENT_MAPS.has(key) && isPlainObject(value)) {
    return Object.fromEntries(Object.keys(value).map((name) => [storableText(name), REDACTED]));
  }
  if (Array.isArray(value)) return value.map((item) => redact(item, undefined));
  if (isPlainObject(value)) {
    return Object.fromEntries(Object.entries(value).map(([name, item]) => [storableText(name), redact(item, name)]));
  }
  // The log is stored as json, which cannot hold NUL or a lone surrogate: a refused body may have either.
  if (typeof value === 'string') return storableText(value);
  return value;
}

/** A URL reduced to its origin and a note; anything that is not an absolute URL is redacted whole. */
function urlOrigin(value: string): string {
  try {
    const url = new URL(value);
    return url.origin === 'null' ? REDACTED : `${url.origin}/${REDACTED}`;
  } catch {
    return REDACTED;
  }
}

const STRING_KEEP = 256;
/** Room kept for a note and the punctuation around it. */
const NOTE_BYTES = 64;

/** The value cut so that its JSON text takes about `budget` bytes at most. */
function fit(value: unknown, budget: number): unknown {
  const size = jsonBytes(value);
  if (size <= budget) return value;
  if (typeof value === 'string') {
    let keep = Math.max(0, Math.min(STRING_KEEP, budget - NOTE_BYTES));
    // Never half of a surrogate pair: a lone surrogate cannot be stored.
    if (keep > 0 && /[\uD800-\uDBFF]/.test(value.charAt(keep - 1))) keep -= 1;
    return `${value.slice(0, keep)}… [${value.length - keep} more characters not kept]`;
  }
  if (Array.isArray(value)) {
    const kept: unknown[] = [];
    let left = budget - NOTE_BYTES;
    for (const item of value) {
      const cut = fit(item, Math.min(left, Math.max(NOTE_BYTES, budget / 4)));
      const bytes = jsonBytes(cut) + 1;
      if (bytes > left) break;
      kept.push(cut);
      left -= bytes;
    }
    if (kept.length < value.length) kept.push(`[${value.length - kept.length} more items not kept]`);
    return kept;
  }
  if (isPlainObject(value)) {
    const kept: Record<string, unknown> = {};
    const entries = Object.entries(value);
    let left = budget - NOTE_BYTES;
    let count = 0;
    for (const [name, item] of entries) {
      const cut = fit(item, Math.min(left, Math.max(NOTE_BYTES, budget / 2)));
      const bytes = jsonBytes(name) + jsonBytes(cut) + 2;
      if (bytes > left) break;
      kept[name] = cut;
      left -= bytes;
      count += 1;
    }
    if (count < entries.length) kept['[not kept]'] = `${entries.length - count} more fields`;
    return kept;
  }
  return value;
}

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? '');

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
