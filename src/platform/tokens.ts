import { createHash, randomBytes } from 'node:crypto';

/** A secret token: a recognisable prefix and 256 random bits, base64url. */
export function newToken(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

/** What is stored instead of a token. SHA-256 suffices: the tokens are random, not passwords. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
