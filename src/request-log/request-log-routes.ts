import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { getRequestLog, listRequestLogs, LOG_LIMIT_DEFAULT, LOG_LIMIT_MAX } from './request-logs.ts';

const ListQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: LOG_LIMIT_MAX, default: LOG_LIMIT_DEFAULT, description: '1 to 100' }),
    ),
    after: Type.Optional(Type.String({ maxLength: 100, description: 'A log id: the page of older entries after it' })),
    before: Type.Optional(
      Type.String({ maxLength: 100, description: 'A log id: the page of newer entries before it' }),
    ),
    status: Type.Optional(
      Type.String({ pattern: '^[1-5]([0-9][0-9]|xx)$', description: 'A status class (`2xx`, `4xx` …) or a status' }),
    ),
    endpoint: Type.Optional(
      Type.String({ minLength: 1, maxLength: 2048, description: 'Entries whose path starts with this' }),
    ),
    api_key_id: Type.Optional(Type.String({ maxLength: 100, description: 'Entries of this API key' })),
  },
  { additionalProperties: false },
);

/** Resend's /logs: the organization's API requests, newest first, and one with its bodies. */
export async function requestLogRoutes(app: App) {
  app.get(
    '/logs',
    {
      config: { access: 'full' },
      schema: { summary: "The organization's API requests, newest first", querystring: ListQuery },
    },
    (request) => {
      const q = request.query;
      return listRequestLogs(app.db, request.principal.organizationId, {
        limit: q.limit ?? LOG_LIMIT_DEFAULT,
        after: q.after,
        before: q.before,
        status: q.status,
        endpoint: q.endpoint,
        apiKeyId: q.api_key_id,
      });
    },
  );

  app.get(
    '/logs/:id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'One API request, with its request and response bodies (redacted)',
        params: Type.Object({ id: Type.String() }),
      },
    },
    (request) => getRequestLog(app.db, request.principal.organizationId, request.params.id),
  );
}
