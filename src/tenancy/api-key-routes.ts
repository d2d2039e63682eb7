import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { createApiKey, listApiKeys, renameApiKey, revokeApiKey } from './api-keys.ts';

const IdParams = Type.Object({ id: Type.String() });

/** Resend's /api-keys: create (token shown once; a sending key may be limited to one domain), list (no tokens, when each was last used), rename, revoke. */
export async function apiKeyRoutes(app: App) {
  app.post(
    '/api-keys',
    {
      config: { access: 'full' },
      schema: {
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 50 }),
            permission: Type.Optional(Type.Union([Type.Literal('full_access'), Type.Literal('sending_access')])),
            domain_id: Type.Optional(Type.String()),
          },
          { additionalProperties: false },
        ),
      },
    },
    async (request, reply) => {
      const key = await createApiKey(app.db, {
        organizationId: request.principal.organizationId,
        name: request.body.name,
        permission: request.body.permission ?? 'full_access',
        domainId: request.body.domain_id,
      });
      return reply.code(201).send({ object: 'api_key', ...key });
    },
  );

  app.get('/api-keys', { config: { access: 'full' }, schema: { querystring: PageQuery } }, async (request) => {
    const keys = await listApiKeys(app.db, request.principal.organizationId, request.query);
    return { ...keys, data: keys.data.map((key) => ({ object: 'api_key', ...key })) };
  });

  app.patch(
    '/api-keys/:id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Rename an API key',
        params: IdParams,
        body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 50 }) }, { additionalProperties: false }),
      },
    },
    async (request) => {
      await renameApiKey(app.db, request.principal.organizationId, request.params.id, request.body.name);
      return { object: 'api_key', id: request.params.id };
    },
  );

  app.delete('/api-keys/:id', { config: { access: 'full' }, schema: { params: IdParams } }, async (request) => {
    await revokeApiKey(app.db, request.principal.organizationId, request.params.id);
    return { object: 'api_key', id: request.params.id, deleted: true };
  });
}
