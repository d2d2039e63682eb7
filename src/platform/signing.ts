import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Queryable } from './db/database.ts';

// Links and addresses Mailroom puts in messages (tracking pixel, tracked links, unsubscribe links, the
// VERP return path, reply addresses) carry what they refer to, signed, so that a request can be trusted
// without a lookup and cannot be forged or bent to point elsewhere. One secret per installation, made by the
// first process that needs it and kept in the database so every process signs alike; each purpose
// signs with its own key derived from it, so a token of one kind is never valid as another.

/** What a token is for; each purpose has its own key. */
export type SigningPurpose =
  'open' | 'click' | 'unsubscribe' | 'return-path' | 'attachment' | 'preview' | 'received-file' | 'reply';

export interface Signer {
  /** `<base64url JSON>.<base64url 128-bit HMAC-SHA256 tag>`: URL-safe, no padding. */
  sign(purpose: SigningPurpose, payload: Record<string, unknown>): string;
  /** The payload of a token this installation signed for `purpose`; null for anything else. */
  verify(purpose: SigningPurpose, token: string): Record<string, unknown> | null;
  /** A short lower-case hex tag over `data` (for places where a whole token does not fit, e.g. a local part). */
  tag(purpose: SigningPurpose, data: string, bytes: number): string;
  /** Whether `tag` is `tag(purpose, data, bytes)`, compared in constant time. */
  checkTag(purpose: SigningPurpose, data: string, tag: string, bytes: number): boolean;
}

const SECRET_NAME = 'links';
const TAG_BYTES = 16;
/** Tokens longer than this are refused before any work: no real link comes near it. */
const MAX_TOKEN_LENGTH = 8192;

/** Loads (or, the first time, creates) the installation's secret and returns a signer for it. */
export async function loadSigner(db: Queryable): Promise<Signer> {
  // Concurrent first starts: one INSERT wins, every process then reads the winner's secret.
  await db.query('INSERT INTO signing_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    SECRET_NAME,
    randomBytes(32),
  ]);
  const { rows } = await db.query<{ secret: Uint8Array }>('SELECT secret FROM signing_secrets WHERE name = $1', [
    SECRET_NAME,
  ]);
  return createSigner(Buffer.from(rows[0]!.secret));
}

export function createSigner(secret: Buffer): Signer {
  const keys = new Map<SigningPurpose, Buffer>();
  const keyFor = (purpose: SigningPurpose) => {
    let key = keys.get(purpose);
    if (!key) {
      key = createHmac('sha256', secret).update(`mailroom/${purpose}`).digest();
      keys.set(purpose, key);
    }
    return key;
  };
  const mac = (purpose: SigningPurpose, data: string) => createHmac('sha256', keyFor(purpose)).update(data).digest();
  const hexTag = (purpose: SigningPurpose, data: string, bytes: number) =>
    mac(purpose, data).subarray(0, bytes).toString('hex');

  return {
    sign(purpose, payload) {
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${body}.${mac(purpose, body).subarray(0, TAG_BYTES).toString('base64url')}`;
    },
    verify(purpose, token) {
      if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) return null;
      const dot = token.indexOf('.');
      if (dot <= 0 || dot !== token.lastIndexOf('.')) return null;
      const body = token.slice(0, dot);
      // Compared as text, so each token has one spelling (base64url decoding forgives padding and the
      // low bits of the last character).
      const given = Buffer.from(token.slice(dot + 1), 'utf8');
      const expected = Buffer.from(mac(purpose, body).subarray(0, TAG_BYTES).toString('base64url'), 'utf8');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
      try {
        const payload: unknown = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
        return payload !== null && typeof payload === 'object' && !Array.isArray(payload)
          ? (payload as Record<string, unknown>)
          : null;
      } catch {
        return null;
      }
    },
    tag: hexTag,
    checkTag(purpose, data, tag, bytes) {
      if (tag.length !== bytes * 2) return false;
      return timingSafeEqual(Buffer.from(tag, 'utf8'), Buffer.from(hexTag(purpose, data, bytes), 'utf8'));
    },
  };
}
