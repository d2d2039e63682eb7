import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import {
  MAX_ACTIONS,
  MAX_FORWARD_ADDRESSES,
  RECIPIENT_KINDS,
  createRoute,
  deleteRoute,
  getRoute,
  listRoutes,
  updateRoute,
} from './inbound-routes.ts';
import { MAX_PATTERN_LENGTH } from './route-patterns.ts';

const IdParams = Type.Object({ id: Type.String() });

// Shapes only; which fields an action takes, the patterns and the rules between fields are checked in
// inbound-routes.ts, which names the field at fault.
const Header = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100, description: 'A header name, without case' }),
    pattern: Type.String({
      minLength: 1,
      maxLength: MAX_PATTERN_LENGTH,
      description: "A regular expression found anywhere in the header's value, without case",
    }),
  },
  { additionalProperties: false },
);
const Match = Type.Object(
  {
    recipient: Type.Optional(
      Type.String({
        maxLength: 320,
        description:
          'exact: `a@example.com`; domain: `*@example.com`; plus_tag: `+orders`; regex: a pattern over the whole address; catch_all: `*` or none',
      }),
    ),
    recipient_kind: Type.Union(
      RECIPIENT_KINDS.map((kind) => Type.Literal(kind)),
      { description: 'catch_all (every address at the receiving domains) is only ever explicit' },
    ),
    header: Type.Optional(Type.Union([Header, Type.Null()])),
  },
  { additionalProperties: false },
);
const Action = Type.Object(
  {
    type: Type.String({ description: 'store, forward (with to), webhook (with endpoint_id) or reject (with message)' }),
    to: Type.Optional(Type.Array(Type.String({ maxLength: 320 }), { maxItems: MAX_FORWARD_ADDRESSES })),
    endpoint_id: Type.Optional(Type.String({ maxLength: 100 })),
    message: Type.Optional(Type.String({ maxLength: 200, description: 'The text after 550 5.7.1' })),
  },
  { additionalProperties: false },
);
const Fields = {
  description: Type.Optional(Type.String({ maxLength: 500 })),
  priority: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'Lowest first; default 0' })),
  actions: Type.Optional(Type.Array(Action, { maxItems: MAX_ACTIONS, description: 'Default: [{type: "store"}]' })),
  stop: Type.Optional(Type.Boolean({ description: 'No later route is tried once this one matches' })),
  enabled: Type.Optional(Type.Boolean()),
};
const CreateBody = Type.Object({ ...Fields, match: Match }, { additionalProperties: false });
const UpdateBody = Type.Object({ ...Fields, match: Type.Optional(Match) }, { additionalProperties: false });

/**
 * Inbound routes (Mailroom's own API, like Mailgun's routes): what happens to mail the organization's
 * receiving domains take. Full-access keys and dashboard sessions.
 */
export async function inboundRouteRoutes(app: App) {
  app.post(
    '/inbound-routes',
    { config: { access: 'full' }, schema: { summary: 'Create an inbound route', body: CreateBody } },
    async (request, reply) =>
      reply.code(201).send(await createRoute(app.db, request.principal.organizationId, request.body)),
  );

  app.get(
    '/inbound-routes',
    {
      config: { access: 'full' },
      schema: { summary: 'List inbound routes in the order they are tried', querystring: PageQuery },
    },
    async (request) => listRoutes(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/inbound-routes/:id',
    { config: { access: 'full' }, schema: { summary: 'Read an inbound route', params: IdParams } },
    async (request) => getRoute(app.db, request.principal.organizationId, request.params.id),
  );

  app.patch(
    '/inbound-routes/:id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Change an inbound route (match and actions are replaced whole)',
        params: IdParams,
        body: UpdateBody,
      },
    },
    async (request) => updateRoute(app.db, request.principal.organizationId, request.params.id, request.body),
  );

  app.delete(
    '/inbound-routes/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete an inbound route', params: IdParams } },
    async (request) => {
      const { id } = await deleteRoute(app.db, request.principal.organizationId, request.params.id);
      return { object: 'inbound_route', id, deleted: true };
    },
  );
}
