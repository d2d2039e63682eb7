import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Database, Queryable } from '../db/database.ts';
import { isFinalRefusal, ServiceError } from '../errors.ts';
import { errorBody, HTTP_STATUS } from './error-envelope.ts';

// Idempotency-Key (DESIGN §2): scoped to the organization; the first request claims the key with its
// fingerprint (method, path, hash of the canonical JSON body) and a lease; its response is stored in the
// same transaction that does its work, so "done" and "remembered" commit together. Within 24 hours a
// request with the same key and fingerprint gets that response again, with `idempotent-replayed: true`;
// another fingerprint gets 409 invalid_idempotent_request; one arriving while the first is still running
// gets 409 concurrent_idempotent_requests. A claim whose holder died without answering is taken over
// once its lease ends.

export const MAX_KEY_LENGTH = 256;
const LEASE_SECONDS = 60;
const WINDOW = "interval '24 hours'";

export interface IdempotencyClaim {
  organizationId: string;
  key: string;
}

export interface StoredAnswer {
  statusCode: number;
  body: unknown;
}

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

/** The Idempotency-Key header, checked; undefined when absent. */
export function readIdempotencyKey(request: FastifyRequest): string | undefined {
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
  return key;
}

type ClaimResult = { claimed: true } | { claimed: false; answer: StoredAnswer };

async function claim(db: Database, target: IdempotencyClaim, fingerprint: string): Promise<ClaimResult> {
  const taken = await db.query(
    `INSERT INTO idempotency_keys AS k (organization_id, key, fingerprint, locked_until)
     VALUES ($1, $2, $3, now() + make_interval(secs => $4))
     ON CONFLICT (organization_id, key) DO UPDATE SET
       fingerprint = EXCLUDED.fingerprint, status_code = NULL, response = NULL,
       locked_until = EXCLUDED.locked_until, created_at = now()
     WHERE k.created_at < now() - ${WINDOW}
        OR (k.status_code IS NULL AND k.locked_until < now() AND k.fingerprint = EXCLUDED.fingerprint)
     RETURNING 1`,
    [target.organizationId, target.key, fingerprint, LEASE_SECONDS],
  );
  if (taken.rowCount > 0) return { claimed: true };
  const { rows } = await db.query<{ fingerprint: string; status_code: number | null; response: unknown }>(
    'SELECT fingerprint, status_code, response FROM idempotency_keys WHERE organization_id = $1 AND key = $2',
    [target.organizationId, target.key],
  );
  const row = rows[0];
  if (!row) return claim(db, target, fingerprint); // expired and removed in between: try again
  if (row.fingerprint !== fingerprint) {
    throw new ServiceError(
      'invalid_idempotent_request',
      'This Idempotency-Key was used with a different request in the last 24 hours',
    );
  }
  if (row.status_code === null) {
    throw new ServiceError(
      'concurrent_idempotent_requests',
      'A request with this Idempotency-Key is still in progress; retry shortly',
    );
  }
  return { claimed: false, answer: { statusCode: row.status_code, body: row.response } };
}

/** Records the answer to a claimed key. Call it in the transaction that did the request's work. */
export async function storeAnswer(tx: Queryable, target: IdempotencyClaim, answer: StoredAnswer): Promise<void> {
  await tx.query(
    `UPDATE idempotency_keys SET status_code = $3, response = $4::jsonb, locked_until = NULL
      WHERE organization_id = $1 AND key = $2`,
    [target.organizationId, target.key, answer.statusCode, JSON.stringify(answer.body)],
  );
}

/**
 * Runs a send under the request's Idempotency-Key, if it has one. `work` receives the claim (to pass to
 * storeAnswer inside its transaction) and returns the answer. A replay returns the stored answer without
 * running `work`; a refusal worth remembering is stored, any other failure frees the key for a retry.
 */
export async function idempotent(
  db: Database,
  request: FastifyRequest,
  work: (claim: IdempotencyClaim | undefined) => Promise<StoredAnswer>,
): Promise<{ answer: StoredAnswer; replayed: boolean }> {
  const key = readIdempotencyKey(request);
  if (key === undefined) return { answer: await work(undefined), replayed: false };
  const target = { organizationId: request.principal.organizationId, key };
  const path = request.url.split('?')[0]!;
  const result = await claim(db, target, requestFingerprint(request.method, path, request.body));
  if (!result.claimed) return { answer: result.answer, replayed: true };
  try {
    return { answer: await work(target), replayed: false };
  } catch (error) {
    if (error instanceof ServiceError && isFinalRefusal(error.name)) {
      await storeAnswer(db, target, { statusCode: HTTP_STATUS[error.name], body: errorBody(error) });
    } else {
      await db.query('DELETE FROM idempotency_keys WHERE organization_id = $1 AND key = $2 AND status_code IS NULL', [
        target.organizationId,
        target.key,
      ]);
    }
    throw error;
  }
}
