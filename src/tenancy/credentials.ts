import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { hashToken } from '../platform/tokens.ts';
import { lookupCache } from '../platform/db/lookup-cache.ts';
import type { Access } from '../platform/access.ts';
import type { ApiKeyPermission, Principal } from './principal.ts';

export const API_KEY_PREFIX = 'mr_';
export const SESSION_PREFIX = 'mrs_';

interface CredentialRow {
  kind: 'api_key' | 'session';
  id: string;
  organization_id: string;
  permission: ApiKeyPermission | null;
  domain_id: string | null;
  user_id: string | null;
}

// One indexed query whatever the token looks like, so a made-up token costs what a real one not yet
// cached does and the answer time says nothing about which tokens exist.
const RESOLVE_SQL = `
  SELECT 'api_key' AS kind, id, organization_id, permission, domain_id, NULL::uuid AS user_id
    FROM api_keys WHERE token_hash = $1 AND revoked_at IS NULL
  UNION ALL
  SELECT 'session' AS kind, id, organization_id, NULL AS permission, NULL::uuid AS domain_id, user_id
    FROM sessions WHERE token_hash = $1 AND expires_at > now()`;

export async function resolveBearer(db: Queryable, authorization: string | undefined): Promise<Principal> {
  if (authorization === undefined || authorization.trim() === '') {
    throw new ServiceError('missing_api_key', 'Missing API key in the Authorization header (Bearer <token>)');
  }
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  const principal = await resolveToken(db, match?.[1] ?? '');
  if (!match || !principal) {
    // One code for an unknown, revoked or expired credential (a client signs in again on any of them);
    // the message says which kind of token was refused, which the caller knows anyway.
    const session = match?.[1]!.startsWith(SESSION_PREFIX);
    throw new ServiceError(
      'invalid_api_key',
      session ? 'Session token is invalid or has expired: sign in again (POST /auth/login)' : 'API key is invalid',
    );
  }
  return principal;
}

/**
 * The API key a token is, for a carrier that takes keys only (SMTP submission's password); null for
 * anything else, sessions included. The same single look-up as the API's.
 */
export async function resolveApiKey(db: Queryable, token: string): Promise<Principal | null> {
  const principal = await resolveToken(db, token);
  return principal?.kind === 'api_key' ? principal : null;
}

/** Whether the API key is still valid (not revoked since it was resolved), for long-lived sessions. */
export async function isApiKeyLive(db: Queryable, apiKeyId: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM api_keys WHERE id = $1 AND revoked_at IS NULL', [apiKeyId]);
  return rowCount > 0;
}

// API keys found are cached (platform/db/lookup-cache.ts: forgotten in every process when a key is
// revoked); sessions are not, they are dashboard traffic. A token not found is looked up every time, so
// a made-up token still costs one query, as the comment on RESOLVE_SQL wants.
const apiKeysOf = (db: Queryable) => lookupCache<Principal>(db, 'api-keys');

async function resolveToken(db: Queryable, token: string): Promise<Principal | null> {
  const hash = hashToken(token);
  return apiKeysOf(db).through(
    hash,
    async () => {
      const { rows } = await db.query<CredentialRow>(RESOLVE_SQL, [hash]);
      return rows[0] ? principalOf(rows[0]) : null;
    },
    (principal) => principal?.kind === 'api_key',
  );
}

function principalOf(row: CredentialRow): Principal {
  if (row.kind === 'session') {
    return { kind: 'session', organizationId: row.organization_id, sessionId: row.id, userId: row.user_id! };
  }
  return {
    kind: 'api_key',
    organizationId: row.organization_id,
    apiKeyId: row.id,
    permission: row.permission!,
    domainId: row.domain_id,
  };
}

/** Throws the 401 the spec asks for when a principal may not use a route of the given access. */
export function checkAccess(principal: Principal, access: Access): void {
  if (access === 'session' && principal.kind !== 'session') {
    throw new ServiceError('session_required', 'This endpoint needs a dashboard session token, not an API key');
  }
  if (access === 'full' && principal.kind === 'api_key' && principal.permission !== 'full_access') {
    throw new ServiceError('restricted_api_key', 'This API key is restricted to sending emails only');
  }
}
