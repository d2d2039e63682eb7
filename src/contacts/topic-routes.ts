import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { ServiceError } from '../platform/errors.ts';
import { createTopic, deleteTopic, getTopic, listTopics, updateTopic } from './topics.ts';

const IdParams = Type.Object({ id: Type.String() });

const Name = Type.String({ minLength: 1, maxLength: 200 });
const Description = Type.Union([Type.String({ maxLength: 1000 }), Type.Null()]);
const DefaultSubscription = Type.Union([Type.Literal('opt_in'), Type.Literal('opt_out')]);
/** Who sees the topic on the preference page (topics.ts); Resend's default is private. */
const Visibility = Type.Union([Type.Literal('public'), Type.Literal('private')]);

const CreateBody = Type.Object(
  {
    name: Name,
    description: Type.Optional(Description),
    default_subscription: DefaultSubscription,
    visibility: Type.Optional(Visibility),
  },
  { additionalProperties: false },
);
// An empty PATCH is a mistake on the caller's side, not a no-op. Resend's SDK sends the topic's id in
// the body too: taken when it is the path's, and not counted as a change.
const UpdateBody = Type.Object(
  {
    id: Type.Optional(Type.String()),
    name: Type.Optional(Name),
    description: Type.Optional(Description),
    default_subscription: Type.Optional(DefaultSubscription),
    visibility: Type.Optional(Visibility),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** Resend's /topics: create, list, read, update, delete. */
export async function topicRoutes(app: App) {
  app.post(
    '/topics',
    { config: { access: 'full' }, schema: { summary: 'Create a topic', body: CreateBody } },
    async (request, reply) => {
      const { id } = await createTopic(app.db, request.principal.organizationId, request.body);
      return reply.code(201).send({ object: 'topic', id });
    },
  );

  app.get(
    '/topics',
    { config: { access: 'full' }, schema: { summary: 'List topics', querystring: PageQuery } },
    async (request) => listTopics(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/topics/:id',
    { config: { access: 'full' }, schema: { summary: 'Read a topic', params: IdParams } },
    async (request) => getTopic(app.db, request.principal.organizationId, request.params.id),
  );

  app.patch(
    '/topics/:id',
    { config: { access: 'full' }, schema: { summary: 'Update a topic', params: IdParams, body: UpdateBody } },
    async (request) => {
      const { id: bodyId, ...changes } = request.body;
      if (bodyId !== undefined && bodyId.toLowerCase() !== request.params.id.toLowerCase()) {
        throw new ServiceError('validation_error', 'id: the body names another topic than the path', 'id');
      }
      if (Object.keys(changes).length === 0) {
        throw new ServiceError('validation_error', 'Nothing to change: give at least one field besides id');
      }
      const { id } = await updateTopic(app.db, request.principal.organizationId, request.params.id, changes);
      return { object: 'topic', id };
    },
  );

  app.delete(
    '/topics/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete a topic', params: IdParams } },
    async (request) => {
      const { id } = await deleteTopic(app.db, request.principal.organizationId, request.params.id);
      return { object: 'topic', id, deleted: true };
    },
  );
}
