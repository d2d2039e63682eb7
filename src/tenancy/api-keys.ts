import type { Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
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
  created_at: Date;
  /** When the key last authenticated a request, to the minute (key-usage.ts); null if never. */
  last_used_at: Date | null;
}

/** Creates a key. The token is returned here and never again: only its hash is kept. */
export async function createApiKey(
  db: Queryable,
  input: { organizationId: string; name: string; permission: ApiKeyPermission },
): Promise<{ id: string; token: string; permission: ApiKeyPermission }> {
  const token = newToken(API_KEY_PREFIX);
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO api_keys (organization_id, name, permission, token_hash) VALUES ($1, $2, $3, $4) RETURNING id`,
    [input.organizationId, input.name, input.permission, hashToken(token)],
  );
  return { id: rows[0]!.id, token, permission: input.permission };
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
        'id, name, permission, created_at, (SELECT last_used_at FROM api_key_usage WHERE api_key_id = api_keys.id) AS last_used_at',
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
