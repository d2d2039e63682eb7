import type { FastifyRequest } from 'fastify';
import { idempotencyKey, type IdempotencyKey } from '../idempotency.ts';

// The Idempotency-Key header of an HTTP request, and the request's fingerprint: method, path and a hash
// of the canonical JSON body, so that the same key sent with another request is told apart.

export { requestFingerprint } from '../idempotency.ts';

/** The request's Idempotency-Key with its fingerprint, checked; undefined when the header is absent. */
export function idempotencyKeyOf(request: FastifyRequest, organizationId: string): IdempotencyKey | undefined {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return undefined;
  const key = Array.isArray(header) ? header.join(',') : header;
  return idempotencyKey(organizationId, key, {
    kind: request.method,
    target: request.url.split('?')[0]!,
    body: request.body,
  });
}
