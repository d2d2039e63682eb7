import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.ts';
import { MAX_KEY_LENGTH, requestFingerprint, type IdempotencyKey } from '../idempotency.ts';

// The Idempotency-Key header of an HTTP request, and the request's fingerprint: method, path and a hash
// of the canonical JSON body, so that the same key sent with another request is told apart.

export { requestFingerprint } from '../idempotency.ts';

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
