import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listDeliveries,
  ENDPOINT_PAGE_MAX,
  listEndpoints,
  replayDelivery,
  replayFailedSince,
  rotateSecret,
  sendTestEvent,
  updateEndpoint,
} from './endpoints.ts';
import { EVENT_TYPES } from './event-types.ts';
import {
  EVENT_PAGE_DEFAULT,
  EVENT_PAGE_MAX,
  getWebhookEvent,
  listWebhookEventAttempts,
  listWebhookEvents,
} from './webhook-events.ts';

const IdParams = Type.Object({ id: Type.String() });
const Events = Type.Array(Type.String(), { maxItems: 100, description: 'Event types; [] subscribes to every type.' });
const Status = Type.Union([Type.Literal('enabled'), Type.Literal('disabled')], {
  description: 'disabled: no new deliveries, and the pending ones fail (failure "endpoint_disabled")',
});
const Cursor = (description: string) => Type.Optional(Type.String({ maxLength: 100, description }));
const EventPage = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: EVENT_PAGE_MAX, default: EVENT_PAGE_DEFAULT })),
    after: Cursor('An id: the page of older entries after it'),
    before: Cursor('An id: the page of newer entries before it'),
  },
  { additionalProperties: false },
);
const EventParams = Type.Object({ id: Type.String(), event_id: Type.String() });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: ENDPOINT_PAGE_MAX, default: ENDPOINT_PAGE_MAX })),
    after: Cursor('A webhook id: the page of older endpoints after it'),
    before: Cursor('A webhook id: the page of newer endpoints before it'),
  },
  { additionalProperties: false },
);

/**
 * Webhook endpoints, in Resend's shapes: creating, reading and changing one take a full_access key or a
 * session (Resend's API-key calls); listing and deleting them, rotating a secret, deliveries, replays and
 * test events a dashboard session, so that a leaked key can neither find every endpoint nor remove one.
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
    {
      config: { access: 'session' },
      schema: { summary: 'List webhook endpoints, newest first, without secrets', querystring: ListQuery },
    },
    (request) => {
      const { limit = ENDPOINT_PAGE_MAX, after, before } = request.query;
      return listEndpoints(app.db, request.principal.organizationId, { limit, after, before });
    },
  );

  app.get(
    '/webhooks/:id',
    { config: { access: 'full' }, schema: { summary: 'Read a webhook endpoint', params: IdParams } },
    (request) => getEndpoint(app.db, request.principal.organizationId, request.params.id),
  );

  app.patch(
    '/webhooks/:id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Change a webhook endpoint',
        params: IdParams,
        body: Type.Object(
          {
            endpoint: Type.Optional(Type.String()),
            events: Type.Optional(Events),
            status: Type.Optional(Status),
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

  app.post(
    '/webhooks/:id/test',
    {
      config: { access: 'session' },
      schema: {
        summary: 'Send the endpoint a signed test event of a type from the catalog, with sample data',
        params: IdParams,
        body: Type.Object(
          { type: Type.Union(EVENT_TYPES.map((type) => Type.Literal(type))) },
          { additionalProperties: false },
        ),
      },
    },
    (request) => sendTestEvent(app.db, request.principal.organizationId, request.params.id, request.body.type),
  );

  app.post(
    '/webhooks/:id/deliveries/replay',
    {
      config: { access: 'session' },
      schema: {
        summary: 'Send again every failed delivery created at or after `since` that was not sent again yet',
        params: IdParams,
        body: Type.Object({ since: Type.String({ format: 'date-time' }) }, { additionalProperties: false }),
      },
    },
    (request) =>
      replayFailedSince(app.db, request.principal.organizationId, request.params.id, new Date(request.body.since)),
  );

  // Resend's SDK's names for the same deliveries (resend.webhooks.events.*): an event is a delivery.
  app.get(
    '/webhooks/:id/events',
    {
      config: { access: 'session' },
      schema: {
        summary: "An endpoint's deliveries, as Resend's webhook events",
        params: IdParams,
        querystring: EventPage,
      },
    },
    (request) => {
      const { limit = EVENT_PAGE_DEFAULT, after, before } = request.query;
      return listWebhookEvents(app.db, request.principal.organizationId, request.params.id, { limit, after, before });
    },
  );

  app.get(
    '/webhooks/:id/events/:event_id',
    {
      config: { access: 'session' },
      schema: { summary: 'One delivery, as a Resend webhook event, with the body it sends', params: EventParams },
    },
    (request) => getWebhookEvent(app.db, request.principal.organizationId, request.params.id, request.params.event_id),
  );

  app.get(
    '/webhooks/:id/events/:event_id/attempts',
    {
      config: { access: 'session' },
      schema: { summary: "A delivery's attempts, newest first", params: EventParams, querystring: EventPage },
    },
    (request) => {
      const { limit = EVENT_PAGE_DEFAULT, after, before } = request.query;
      return listWebhookEventAttempts(
        app.db,
        request.principal.organizationId,
        request.params.id,
        request.params.event_id,
        {
          limit,
          after,
          before,
        },
      );
    },
  );

  app.post(
    '/webhooks/:id/events/:event_id/replay',
    {
      config: { access: 'session' },
      schema: { summary: 'Send a delivery again, as a new one (a new webhook event id)', params: EventParams },
    },
    async (request) => {
      const replay = await replayDelivery(
        app.db,
        request.principal.organizationId,
        request.params.id,
        request.params.event_id,
      );
      return { object: 'webhook_event' as const, id: replay.id };
    },
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
