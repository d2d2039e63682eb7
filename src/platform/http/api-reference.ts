import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { readFileSync } from 'node:fs';
import type { App } from './app-types.ts';

export const API_REFERENCE_PREFIX = '/docs';

const { version } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

/**
 * The OpenAPI document, generated from the route schemas (so it cannot drift from what is validated),
 * at /openapi.json, and a browsable reference at /docs. Register before the routes it describes.
 */
export async function apiReference(app: App): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Mailroom',
        version,
        description:
          'Transactional email: send, schedule, track, and receive signed webhooks. Resend-compatible paths.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });
  await app.register(swaggerUi, { routePrefix: API_REFERENCE_PREFIX });
  app.get('/openapi.json', { config: { access: 'public' }, schema: { hide: true } }, async () => app.swagger());
}
