import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { ServiceError } from '../platform/errors.ts';
import { SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX, search } from './search.ts';

const SearchQuery = Type.Object(
  {
    q: Type.String({
      minLength: 1,
      maxLength: 320,
      description: 'An id, an address or part of one, a word of a subject, or part of a name',
    }),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: SEARCH_LIMIT_MAX,
        default: SEARCH_LIMIT_DEFAULT,
        description: 'Results of each kind, 1 to 20',
      }),
    ),
  },
  { additionalProperties: false },
);

/** GET /search: the dashboard's search box, across the organization (full_access keys and sessions). */
export async function searchRoutes(app: App) {
  app.get(
    '/search',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Find emails, contacts, domains, templates, broadcasts, webhook endpoints and API keys',
        querystring: SearchQuery,
      },
    },
    (request) => {
      const text = request.query.q.trim();
      if (text === '') throw new ServiceError('validation_error', 'q: give something to search for', 'q');
      return search(app.db, request.principal.organizationId, {
        text,
        limit: request.query.limit ?? SEARCH_LIMIT_DEFAULT,
        includeWebhooks: request.principal.kind === 'session',
      });
    },
  );
}
