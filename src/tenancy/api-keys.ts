import type { Queryable } from '../platform/db/database.ts';
import { notFound, ServiceError } from '../platform/errors.ts';
import { hashToken, newToken } from '../platform/tokens.ts';
import { API_KEY_PREFIX } from './credentials.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import { forgetLookups } from '../platform/db/lookup-cache.ts';
import type { ApiKeyPermission } from './principal.ts';

export interface ApiKey {
  id: string;
  name: string;
  permission: ApiKeyPermission;
  /** The one domain a sending_access key may send from; null when it may send from all of them. */
  domain_id: string | null;
  created_at: Date;
  /** When the key last authenticated a request, to the minute (key-usage.ts); null if never. */
  last_used_at: Date | null;
}

/**
 * Creates a key. The token is returned here and never again: only its hash is kept. A key limited to a
 * domain (Resend's domain_id) must be a sending_access key, and the domain one of the organization's
 * (verified or not: sending from it still needs it verified).
 */
export async function createApiKey(
  db: Queryable,
  input: { organizationId: string; name: string; permission: ApiKeyPermission; domainId?: string | undefined },
): Promise<{ id: string; token: string; permission: ApiKeyPermission; domain_id: string | null }> {
  const domainId = input.domainId === undefined ? null : input.domainId.toLowerCase();
  if (domainId !== null) {
    if (input.permission !== 'sending_access') {
      throw new ServiceError(
        'validation_error',
        'domain_id limits a sending_access key: give permission "sending_access" with it',
        'domain_id',
      );
    }
    const { rowCount } = isUuid(domainId)
      ? await db.query('SELECT 1 FROM domains WHERE id = $1 AND organization_id = $2', [domainId, input.organizationId])
      : { rowCount: 0 };
    if (rowCount === 0) {
      throw new ServiceError('validation_error', `domain_id: no domain ${domainId} in this organization`, 'domain_id');
    }
  }
  const token = newToken(API_KEY_PREFIX);
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO api_keys (organization_id, name, permission, token_hash, domain_id) VALUES ($1, $2, $3, $4, $5)
     RETURNING id`,
    [input.organizationId, input.name, input.permission, hashToken(token), domainId],
  );
  return { id: rows[0]!.id, token, permission: input.permission, domain_id: domainId };
}

/** Keys not revoked, newest first, a page at a time (platform/db/keyset-page.ts); all of them without a limit. */
export async function listApiKeys(
  db: Queryable,
  organizationId: string,
  page: PageRequest = {},
): Promise<Page<ApiKey>> {
  return keysetPage<ApiKey>(
    db,
    {
      table: 'api_keys',
      columns:
        'id, name, permission, domain_id, created_at, (SELECT last_used_at FROM api_key_usage WHERE api_key_id = api_keys.id) AS last_used_at',
      organizationId,
      newestFirst: true,
      where: 'revoked_at IS NULL',
    },
    page,
  );
}

/**
 * Revokes a key at once, for every process: this one forgets its cached keys now, the others when the
 * change's notification reaches them (platform/db/lookup-cache.ts).
 */
export async function revokeApiKey(db: Queryable, organizationId: string, id: string): Promise<void> {
  const { rowCount } = isUuid(id)
    ? await db.query(
        'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL',
        [id, organizationId],
      )
    : { rowCount: 0 };
  forgetLookups(db);
  if (rowCount === 0) throw notFound('API key');
}

/** Renames a key (PATCH /api-keys/:id); a revoked key, or another organization's, is not found. */
export async function renameApiKey(db: Queryable, organizationId: string, id: string, name: string): Promise<void> {
  const { rowCount } = isUuid(id)
    ? await db.query('UPDATE api_keys SET name = $3 WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL', [
        id,
        organizationId,
        name,
      ])
    : { rowCount: 0 };
  if (rowCount === 0) throw notFound('API key');
}
