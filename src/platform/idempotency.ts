import { createHash } from 'node:crypto';
import type { Database, Queryable } from './db/database.ts';
import { ServiceError } from './errors.ts';

// Idempotency keys, scoped to the organization. The first request claims the key with its fingerprint
// (a hash of what it asks for) and a lease; its result is stored in the same transaction that does its
// work, so "done" and "remembered" commit together. Within 24 hours a request with the same key and
// fingerprint gets that result again; another fingerprint is refused (invalid_idempotent_request); one
// arriving while the first is still running is refused too (concurrent_idempotent_requests). A claim
// whose holder died without finishing is taken over once its lease ends. The result is plain data: each
// carrier (HTTP, SMTP) turns it into its own answer.

export const MAX_KEY_LENGTH = 256;
const LEASE_SECONDS = 60;
/** How long a key remembers its request's result; after that it is free again, and pruned. */
export const IDEMPOTENCY_WINDOW_HOURS = 24;
const WINDOW = `interval '${IDEMPOTENCY_WINDOW_HOURS} hours'`;

export interface IdempotencyKey {
  organizationId: string;
  key: string;
  /** Identifies what was asked: the same key with another fingerprint is refused. */
  fingerprint: string;
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

/**
 * A request's fingerprint: what it is (an HTTP method, or the carrier's name), where it went (a path) and a
 * hash of the canonical JSON of what it carried.
 */
export function requestFingerprint(method: string, path: string, body: unknown): string {
  const bodyHash = createHash('sha256').update(canonicalJson(body)).digest('hex');
  return createHash('sha256').update(`${method}\n${path}\n${bodyHash}`).digest('hex');
}

/**
 * An idempotency key as a carrier received it, checked (1 to MAX_KEY_LENGTH characters), with the
 * fingerprint of what it came with: `kind` and `target` say what was asked (an HTTP method and path, or
 * the carrier's name), `body` what it carried.
 */
export function idempotencyKey(
  organizationId: string,
  key: string,
  request: { kind: string; target: string; body: unknown },
): IdempotencyKey {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
    throw new ServiceError(
      'invalid_idempotency_key',
      `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters long`,
      'Idempotency-Key',
    );
  }
  return { organizationId, key, fingerprint: requestFingerprint(request.kind, request.target, request.body) };
}

export type ClaimResult = { claimed: true } | { claimed: false; result: unknown };

/** Claims the key for a new request, or returns the result stored by the request that claimed it first. */
export async function claimIdempotencyKey(db: Database, target: IdempotencyKey): Promise<ClaimResult> {
  const taken = await db.query(
    `INSERT INTO idempotency_keys AS k (organization_id, key, fingerprint, locked_until)
     VALUES ($1, $2, $3, now() + make_interval(secs => $4))
     ON CONFLICT (organization_id, key) DO UPDATE SET
       fingerprint = EXCLUDED.fingerprint, result = NULL, locked_until = EXCLUDED.locked_until, created_at = now()
     WHERE k.created_at < now() - ${WINDOW}
        OR (k.result IS NULL AND k.locked_until < now() AND k.fingerprint = EXCLUDED.fingerprint)
     RETURNING 1`,
    [target.organizationId, target.key, target.fingerprint, LEASE_SECONDS],
  );
  if (taken.rowCount > 0) return { claimed: true };
  const { rows } = await db.query<{ fingerprint: string; result: unknown }>(
    'SELECT fingerprint, result FROM idempotency_keys WHERE organization_id = $1 AND key = $2',
    [target.organizationId, target.key],
  );
  const row = rows[0];
  if (!row) return claimIdempotencyKey(db, target); // expired and removed in between: try again
  if (row.fingerprint !== target.fingerprint) {
    throw new ServiceError(
      'invalid_idempotent_request',
      'This Idempotency-Key was used with a different request in the last 24 hours',
    );
  }
  if (row.result === null) {
    throw new ServiceError(
      'concurrent_idempotent_requests',
      'A request with this Idempotency-Key is still in progress; retry shortly',
    );
  }
  return { claimed: false, result: row.result };
}

/** Stores the result of a claimed key. Call it in the transaction that did the request's work. */
export async function rememberResult(tx: Queryable, target: IdempotencyKey, result: unknown): Promise<void> {
  await tx.query(
    `UPDATE idempotency_keys SET result = $3::jsonb, locked_until = NULL
      WHERE organization_id = $1 AND key = $2`,
    [target.organizationId, target.key, JSON.stringify(result)],
  );
}

/**
 * SQL for a data-modifying CTE body that stores the results of claimed keys, for a statement that does
 * the requests' work: `rows` is an SQL expression for a JSON array made by rememberedRows.
 */
export function rememberResultsFrom(rows: string): string {
  return `UPDATE idempotency_keys k SET result = r.result, locked_until = NULL
      FROM jsonb_to_recordset(${rows}) AS r(organization_id uuid, key text, result jsonb)
     WHERE k.organization_id = r.organization_id AND k.key = r.key`;
}

/** The rows rememberResultsFrom reads: each key with the result to store under it. */
export function rememberedRows(results: Array<{ key: IdempotencyKey; result: unknown }>) {
  return results.map(({ key, result }) => ({ organization_id: key.organizationId, key: key.key, result }));
}

/** Frees a claimed key whose request ended without a result worth remembering, so a retry runs again. */
export async function releaseIdempotencyKey(db: Queryable, target: IdempotencyKey): Promise<void> {
  await db.query('DELETE FROM idempotency_keys WHERE organization_id = $1 AND key = $2 AND result IS NULL', [
    target.organizationId,
    target.key,
  ]);
}
