import { Type } from 'typebox';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { ServiceError } from '../platform/errors.ts';
import type { App } from '../platform/http/app-types.ts';
import { errorBody, HTTP_STATUS } from '../platform/http/error-envelope.ts';
import { idempotencyKeyOf } from '../platform/http/idempotency.ts';
import {
  createDefinition,
  deleteDefinition,
  getDefinition,
  listDefinitions,
  updateDefinition,
} from './event-definitions.ts';
import { checkedEventName, checkedSchema, MAX_PAYLOAD_BYTES } from './event-schema.ts';
import { listReceivedEvents, ReceivedEventsQuery } from './received-events.ts';
import { sendEvent } from './send-event.ts';

const IdentifierParams = Type.Object({
  identifier: Type.String({ description: 'The event definition id, or its name' }),
});

const SchemaMap = Type.Unknown({
  description: 'A flat map of payload key to type: string, number, boolean or date (an ISO 8601 string); null for none',
});

const CreateBody = Type.Object(
  {
    name: Type.String({ description: '1 to 200 characters, not starting with resend:' }),
    schema: Type.Optional(SchemaMap),
  },
  { additionalProperties: false },
);

const UpdateBody = Type.Object({ schema: SchemaMap }, { additionalProperties: false });

const SendBody = Type.Object(
  {
    event: Type.String({ description: 'The event name' }),
    contact_id: Type.Optional(Type.String({ description: "One of the organization's contacts" })),
    email: Type.Optional(
      Type.String({ description: 'An address; its contact is created when the event is processed if missing' }),
    ),
    payload: Type.Optional(
      Type.Unknown({
        description: `A JSON object of at most ${MAX_PAYLOAD_BYTES / 1024} KiB; checked against the event's schema`,
      }),
    ),
  },
  { additionalProperties: false },
);

/** Resend's /events: named events with their payload schema, and POST /events/send. */
export async function eventRoutes(app: App) {
  app.post(
    '/events',
    { config: { access: 'full' }, schema: { summary: 'Create an event', body: CreateBody } },
    async (request, reply) => {
      const name = checkedEventName(request.body.name, 'name');
      const schema = checkedSchema(request.body.schema);
      const { id } = await createDefinition(app.db, request.principal.organizationId, { name, schema });
      return reply.code(201).send({ object: 'event', id });
    },
  );

  app.get(
    '/events',
    { config: { access: 'full' }, schema: { summary: 'List events', querystring: PageQuery } },
    async (request) => listDefinitions(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/events/:identifier',
    { config: { access: 'full' }, schema: { summary: 'Read an event', params: IdentifierParams } },
    async (request) => getDefinition(app.db, request.principal.organizationId, request.params.identifier),
  );

  app.patch(
    '/events/:identifier',
    {
      config: { access: 'full' },
      schema: { summary: "Replace an event's schema", params: IdentifierParams, body: UpdateBody },
    },
    async (request) => {
      const schema = checkedSchema(request.body.schema);
      const organizationId = request.principal.organizationId;
      const { id } = await updateDefinition(app.db, organizationId, request.params.identifier, schema);
      return { object: 'event', id };
    },
  );

  app.delete(
    '/events/:identifier',
    { config: { access: 'full' }, schema: { summary: 'Delete an event', params: IdentifierParams } },
    async (request) => {
      const { id } = await deleteDefinition(app.db, request.principal.organizationId, request.params.identifier);
      return { object: 'event', id, deleted: true };
    },
  );

  app.post(
    '/events/send',
    {
      config: { access: 'send' },
      // Validation errors reach the handler, so that an Idempotency-Key remembers them too.
      attachValidation: true,
      schema: {
        summary: 'Send an event',
        description:
          'Exactly one of contact_id and email. Answered 202 once the event is stored; automations act on it ' +
          'in the background. An Idempotency-Key replays the answer for 24 hours.',
        body: SendBody,
        headers: Type.Object({
          'idempotency-key': Type.Optional(Type.String({ maxLength: 256, description: 'Replays within 24 hours' })),
        }),
      },
    },
    async (request, reply) => {
      const organizationId = request.principal.organizationId;
      const idempotency = idempotencyKeyOf(request, organizationId);
      const input = request.validationError
        ? request.validationError instanceof ServiceError
          ? request.validationError
          : new ServiceError('validation_error', request.validationError.message)
        : request.body;
      const { result, replayed } = await sendEvent(app.db, organizationId, input, idempotency);
      if (replayed) reply.header('idempotent-replayed', 'true');
      if ('refused' in result) {
        // Mailroom's own failure: through the error handler, which logs it with the request id.
        if (HTTP_STATUS[result.refused.name] >= 500) throw ServiceError.from(result.refused);
        return reply.code(HTTP_STATUS[result.refused.name]).send(errorBody(result.refused));
      }
      return reply.code(202).send(result);
    },
  );

  app.get(
    '/received-events',
    {
      config: { access: 'full' },
      schema: {
        summary: 'List events received',
        description: "Mailroom's own: the events sent with POST /events/send, newest first, optionally of one name.",
        querystring: ReceivedEventsQuery,
      },
    },
    async (request) => listReceivedEvents(app.db, request.principal.organizationId, request.query),
  );
}
