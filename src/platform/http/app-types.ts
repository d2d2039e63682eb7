import type { FastifyBaseLogger, FastifyInstance, RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { Signer } from '../signing.ts';
import type { Access } from '../access.ts';

export type { Access } from '../access.ts';

// The type every route module receives (\`App\`), and what the framework adds to Fastify's own types.

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; every route must say (checked when routes are added). */
    access?: Access;
  }
  interface FastifyInstance {
    db: Database;
    config: Config;
    /** Signs and checks the links Mailroom puts in messages (tracking, unsubscribe). */
    signer: Signer;
    /** Every route as "METHOD /path" with its access, in registration order (for tests and docs). */
    routeList: Array<{ method: string; url: string; access: Access }>;
  }
}

export type App = FastifyInstance<
  RawServerDefault,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;
