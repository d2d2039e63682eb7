import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listDeliveries,
  listEndpoints,
  replayDelivery,
  rotateSecret,
  updateEndpoint,
} from './endpoints.ts';

const IdParams = Type.Object({ id: Type.String() });
const Events = Type.Array(Type.String(), { maxItems: 100, description: 'Event types; [] subscribes to every type.' });

/**
 * Webhook endpoints: creating one takes a full_access key or a session; everything else about
 * them (listing, reading, changing, deleting, rotating, deliveries, replay) a dashboard session.
 */
export async function webhookRoutes(app: App) {
  app.post(
    '/webhooks',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Register a webhook endpoint',
        body: Type.Object({ endpoint: Type.String(), events: Type.Optional(Events) }, { additionalProperties: false }),
      },
    },
    async (request, reply) => {
      const created = await createEndpoint(app.db, app.config, request.principal.organizationId, {
        endpoint: request.body.endpoint,
        events: request.body.events ?? [],
      });
      return reply.code(201).send(created);
    },
  );

  app.get(
    '/webhooks',
    { config: { access: 'session' }, schema: { summary: 'List webhook endpoints' } },
    async (request) => ({
      object: 'list',
      data: await listEndpoints(app.db, request.principal.organizationId),
    }),
  );

  app.get(
    '/webhooks/:id',
    { config: { access: 'session' }, schema: { summary: 'Read a webhook endpoint', params: IdParams } },
    (request) => getEndpoint(app.db, request.principal.organizationId, request.params.id),
  );

  app.patch(
    '/webhooks/:id',
    {
      config: { access: 'session' },
      schema: {
        summary: 'Change a webhook endpoint',
        params: IdParams,
        body: Type.Object(
          {
            endpoint: Type.Optional(Type.String()),
            events: Type.Optional(Events),
            enabled: Type.Optional(Type.Boolean()),
          },
          { additionalProperties: false },
        ),
      },
    },
    (request) => updateEndpoint(app.db, app.config, request.principal.organizationId, request.params.id, request.body),
  );

  app.delete(
    '/webhooks/:id',
    {
      config: { access: 'session' },
      schema: { summary: 'Delete a webhook endpoint and drop its pending deliveries', params: IdParams },
    },
    async (request) => {
      await deleteEndpoint(app.db, request.principal.organizationId, request.params.id);
      return { object: 'webhook', id: request.params.id, deleted: true };
    },
  );

  app.post(
    '/webhooks/:id/signing-secret/rotate',
    {
      config: { access: 'session' },
      schema: { summary: 'Rotate the signing secret (the old one signs too for 24 h)', params: IdParams },
    },
    (request) => rotateSecret(app.db, request.principal.organizationId, request.params.id),
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      config: { access: 'session' },
      schema: { summary: "An endpoint's recent deliveries with their attempts", params: IdParams },
    },
    (request) => listDeliveries(app.db, request.principal.organizationId, request.params.id),
  );

  app.post(
    '/webhooks/:id/deliveries/:delivery_id/replay',
    {
      config: { access: 'session' },
      schema: {
        summary: 'Send a delivery again',
        params: Type.Object({ id: Type.String(), delivery_id: Type.String() }),
      },
    },
    async (request) =>
      replayDelivery(app.db, request.principal.organizationId, request.params.id, request.params.delivery_id),
  );
}
