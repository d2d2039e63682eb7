import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.ts';
import { MAX_KEY_LENGTH, type IdempotencyKey } from '../idempotency.ts';

// The Idempotency-Key header of an HTTP request, and the request's fingerprint: method, path and a hash
// of the canonical JSON body, so that the same key sent with another request is told apart.

/** Canonical JSON: object keys sorted at every depth, so that key order does not change the fingerprint. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function requestFingerprint(method: string, path: string, body: unknown): string {
  const bodyHash = createHash('sha256').update(canonicalJson(body)).digest('hex');
  return createHash('sha256').update(`${method}\n${path}\n${bodyHash}`).digest('hex');
}

/** The request's Idempotency-Key with its fingerprint, checked; undefined when the header is absent. */
export function idempotencyKeyOf(request: FastifyRequest, organizationId: string): IdempotencyKey | undefined {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return undefined;
  const key = Array.isArray(header) ? header.join(',') : header;
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw new ServiceError(
      'invalid_idempotency_key',
      `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters long`,
      'Idempotency-Key',
    );
  }
  const path = request.url.split('?')[0]!;
  return {
    organizationId,
    key,
    fingerprint: requestFingerprint(request.method, path, request.body),
  };
}
