import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

// argon2id with OWASP's baseline (19 MiB, 2 passes, 1 lane), stored as a PHC string so that the
// parameters travel with the hash and can be raised later without breaking old hashes.
const argon2Async = promisify(argon2);
const PARAMS = { memory: 19_456, passes: 2, parallelism: 1, tagLength: 32 };

interface Params {
  memory: number;
  passes: number;
  parallelism: number;
  tagLength: number;
}

async function derive(password: string, salt: Buffer, params: Params): Promise<Buffer> {
  return argon2Async('argon2id', { message: password, nonce: salt, ...params });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, PARAMS);
  const b64 = (buffer: Buffer) => buffer.toString('base64').replace(/=+$/, '');
  return `$argon2id$v=19$m=${PARAMS.memory},t=${PARAMS.passes},p=${PARAMS.parallelism}$${b64(salt)}$${b64(hash)}`;
}

const PHC = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const match = PHC.exec(stored);
  if (!match) return false;
  const expected = Buffer.from(match[5]!, 'base64');
  const actual = await derive(password, Buffer.from(match[4]!, 'base64'), {
    memory: Number(match[1]),
    passes: Number(match[2]),
    parallelism: Number(match[3]),
    tagLength: expected.length,
  });
  return timingSafeEqual(actual, expected);
}

// Verified against when the email is unknown, so a login for a missing user takes as long as a wrong password.
let decoyHash: Promise<string> | undefined;
export function decoyPasswordHash(): Promise<string> {
  decoyHash ??= hashPassword(randomBytes(16).toString('hex'));
  return decoyHash;
}

/** A password made for a person to type or paste once: 144 random bits, URL-safe (24 characters). */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}
