import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { ServiceError } from '../platform/errors.ts';
import { idempotencyKeyOf } from '../platform/http/idempotency.ts';
import { parseScheduledAt, SCHEDULED_AT_DESCRIPTION } from '../emails/scheduled-at.ts';
import {
  createBroadcast,
  deleteBroadcast,
  duplicateBroadcast,
  getBroadcastRow,
  listBroadcasts,
  toView,
  updateBroadcast,
} from './broadcasts.ts';
import {
  BOUNCE_TYPES,
  LIST_LIMIT_MAX,
  RECIPIENT_TYPES,
  broadcastStats,
  listBroadcastRecipients,
  listClickedLinks,
} from './broadcast-stats.ts';
import { contactFieldsFor, exampleUnsubscribeUrl, personalizeBroadcast, sendTestEmail } from './broadcast-preview.ts';
import { cancelBroadcast, pauseBroadcast, resumeBroadcast, sendBroadcast } from './send-broadcast.ts';

const IdParams = Type.Object({ id: Type.String() });
const Id = Type.String({ maxLength: 100 });
const AddressOrList = Type.Union([
  Type.String({ maxLength: 1000 }),
  Type.Array(Type.String({ maxLength: 1000 }), { maxItems: 50 }),
]);
const Fields = {
  name: Type.String({ maxLength: 256 }),
  segment_id: Type.String({ maxLength: 100, description: 'The segment whose contacts receive it.' }),
  audience_id: Type.String({ maxLength: 100, description: "Resend's older name for segment_id.", deprecated: true }),
  from: Type.String({ maxLength: 1000, description: '`Name <address>` or an address, at a verified domain.' }),
  subject: Type.String({ maxLength: 998 }),
  reply_to: AddressOrList,
  preview_text: Type.String({ maxLength: 1000, description: 'The snippet inboxes show beside the subject.' }),
  html: Type.String({ description: 'May use {{{contact.first_name|fallback}}}, {{{RESEND_UNSUBSCRIBE_URL}}} …' }),
  text: Type.String(),
  topic_id: Type.Union([Id, Type.Null()], {
    description: 'Contacts who opted out of the topic are left out; its unsubscribe link names it.',
  }),
};
const orNull = <T extends ReturnType<typeof Type.String> | typeof AddressOrList>(schema: T) =>
  Type.Union([schema, Type.Null()]);

const CreateBody = Type.Object(
  {
    name: Type.Optional(Fields.name),
    segment_id: Type.Optional(Fields.segment_id),
    audience_id: Type.Optional(Fields.audience_id),
    from: Fields.from,
    subject: Fields.subject,
    reply_to: Type.Optional(Fields.reply_to),
    preview_text: Type.Optional(Fields.preview_text),
    html: Type.Optional(Fields.html),
    text: Type.Optional(Fields.text),
    topic_id: Type.Optional(Fields.topic_id),
    send: Type.Optional(Type.Boolean({ description: 'true: send it now, or at scheduled_at; else a draft.' })),
    scheduled_at: Type.Optional(Type.String({ description: `With send: true. ${SCHEDULED_AT_DESCRIPTION}` })),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    name: Type.Optional(orNull(Fields.name)),
    segment_id: Type.Optional(Fields.segment_id),
    audience_id: Type.Optional(Fields.audience_id),
    from: Type.Optional(Fields.from),
    subject: Type.Optional(Fields.subject),
    reply_to: Type.Optional(orNull(Fields.reply_to)),
    preview_text: Type.Optional(orNull(Fields.preview_text)),
    html: Type.Optional(orNull(Fields.html)),
    text: Type.Optional(orNull(Fields.text)),
    topic_id: Type.Optional(Fields.topic_id),
  },
  { additionalProperties: false },
);
const SendBody = Type.Object(
  { scheduled_at: Type.Optional(Type.String({ description: SCHEDULED_AT_DESCRIPTION })) },
  { additionalProperties: false },
);
const PauseBody = Type.Object(
  { reason: Type.Optional(Type.String({ maxLength: 500, description: 'Why, shown with the broadcast.' })) },
  { additionalProperties: false },
);
const PreviewBody = Type.Object(
  {
    contact_id: Type.Optional(Id),
    email: Type.Optional(Type.String({ maxLength: 1000, description: 'A contact’s address, or any address.' })),
  },
  { additionalProperties: false },
);
const TestBody = Type.Object({ to: Type.String({ maxLength: 1000 }) }, { additionalProperties: false });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: LIST_LIMIT_MAX, description: `1 to ${LIST_LIMIT_MAX} (the default)` }),
    ),
    after: Type.Optional(Type.String({ maxLength: 200, description: 'The id of a row: the page after it' })),
    before: Type.Optional(Type.String({ maxLength: 200, description: 'The id of a row: the page before it' })),
  },
  { additionalProperties: false },
);
const RecipientsQuery = Type.Object(
  {
    type: oneOf(RECIPIENT_TYPES, 'The event the contacts listed had'),
    email: Type.Optional(Type.String({ maxLength: 1000 })),
    bounce_type: Type.Optional(oneOf(BOUNCE_TYPES, 'With type=bounced, one kind of bounce')),
    ...ListQuery.properties,
  },
  { additionalProperties: false },
);

/**
 * One of a few words. Checked by the route (oneOfField) rather than as a schema enum, so that a refusal
 * lists the words; the description lists them in the OpenAPI document.
 */
function oneOf(values: readonly string[], description: string) {
  return Type.String({ maxLength: 100, description: `${description}: ${values.join(', ')}` });
}
function oneOfField<T extends string>(values: readonly T[], value: string, field: string): T {
  if (!(values as readonly string[]).includes(value)) {
    throw new ServiceError(
      'validation_error',
      `${field} must be one of ${values.join(', ')}; got ${JSON.stringify(value)}`,
      field,
    );
  }
  return value as T;
}

/** These actions' bodies are optional: a POST without one (curl -X POST, some SDKs) is an empty body. */
const noBodyIsEmpty = async (request: { body: unknown }) => {
  request.body ??= {};
};
const optional = <T>(body: T | undefined | null): Partial<T> => body ?? {};

/**
 * Resend's /broadcasts (create, list, read, update, delete, send, cancel, recipients, clicked links, and
 * the SDK's duplicate) and Mailroom's own pause, resume, preview and test.
 */
export async function broadcastRoutes(app: App) {
  const now = () => new Date();

  app.post(
    '/broadcasts',
    { config: { access: 'full' }, schema: { summary: 'Create a broadcast (a draft, or sent)', body: CreateBody } },
    async (request, reply) => {
      const { send, scheduled_at: scheduledAtText, ...input } = request.body;
      if (scheduledAtText !== undefined && send !== true) {
        throw new ServiceError('validation_error', 'scheduled_at can only be used with send: true', 'scheduled_at');
      }
      const scheduledAt = parseScheduledAt(scheduledAtText, now(), app.config.maxScheduleDays);
      const { organizationId } = request.principal;
      const { id } = await createBroadcast(
        app.db,
        organizationId,
        input,
        send === true ? (tx, created) => sendBroadcast(tx, organizationId, created, scheduledAt) : undefined,
      );
      return reply.code(201).send({ object: 'broadcast', id });
    },
  );

  app.get(
    '/broadcasts',
    { config: { access: 'full' }, schema: { summary: 'List broadcasts, newest first', querystring: PageQuery } },
    async (request) => listBroadcasts(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/broadcasts/:id',
    { config: { access: 'full' }, schema: { summary: 'Read a broadcast, with its figures', params: IdParams } },
    async (request) => {
      const broadcast = await getBroadcastRow(app.db, request.principal.organizationId, request.params.id);
      return { ...toView(broadcast), stats: await broadcastStats(app.db, broadcast) };
    },
  );

  app.patch(
    '/broadcasts/:id',
    {
      config: { access: 'full' },
      schema: { summary: 'Update a draft or scheduled broadcast', params: IdParams, body: UpdateBody },
    },
    async (request) => {
      const { id } = await updateBroadcast(app.db, request.principal.organizationId, request.params.id, request.body);
      return { object: 'broadcast', id };
    },
  );

  app.delete(
    '/broadcasts/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete a draft or scheduled broadcast', params: IdParams } },
    async (request) => {
      const { id } = await deleteBroadcast(app.db, request.principal.organizationId, request.params.id);
      return { object: 'broadcast', id, deleted: true };
    },
  );

  // In Resend's SDK (broadcasts.duplicate), not in its OpenAPI document.
  app.post(
    '/broadcasts/:id/duplicate',
    { config: { access: 'full' }, schema: { summary: 'Copy a broadcast into a new draft', params: IdParams } },
    async (request, reply) => {
      const { id } = await duplicateBroadcast(app.db, request.principal.organizationId, request.params.id);
      return reply.code(201).send({ object: 'broadcast', id });
    },
  );

  app.post(
    '/broadcasts/:id/send',
    {
      preValidation: noBodyIsEmpty,
      config: { access: 'full' },
      schema: { summary: 'Send a broadcast now, or schedule it', params: IdParams, body: Type.Optional(SendBody) },
    },
    async (request) => {
      const scheduledAt = parseScheduledAt(optional(request.body).scheduled_at, now(), app.config.maxScheduleDays);
      return sendBroadcast(app.db, request.principal.organizationId, request.params.id, scheduledAt);
    },
  );

  app.post(
    '/broadcasts/:id/cancel',
    {
      config: { access: 'full' },
      schema: { summary: 'Cancel a scheduled broadcast (back to draft) or stop one being sent', params: IdParams },
    },
    async (request) => {
      const { id } = await cancelBroadcast(app.db, request.principal.organizationId, request.params.id);
      return { object: 'broadcast', id };
    },
  );

  app.post(
    '/broadcasts/:id/pause',
    {
      preValidation: noBodyIsEmpty,
      config: { access: 'full' },
      schema: {
        summary: 'Pause a broadcast being sent (Mailroom)',
        params: IdParams,
        body: Type.Optional(PauseBody),
      },
    },
    async (request) => {
      const reason = optional(request.body).reason?.trim() || 'Paused by a user';
      const { id } = await pauseBroadcast(app.db, request.principal.organizationId, request.params.id, reason);
      return { object: 'broadcast', id };
    },
  );

  app.post(
    '/broadcasts/:id/resume',
    { config: { access: 'full' }, schema: { summary: 'Resume a paused broadcast (Mailroom)', params: IdParams } },
    async (request) => {
      const { id } = await resumeBroadcast(app.db, request.principal.organizationId, request.params.id);
      return { object: 'broadcast', id };
    },
  );

  app.post(
    '/broadcasts/:id/preview',
    {
      preValidation: noBodyIsEmpty,
      config: { access: 'full' },
      schema: {
        summary: 'A broadcast as one contact would receive it (Mailroom)',
        params: IdParams,
        body: Type.Optional(PreviewBody),
      },
    },
    async (request) => {
      const { organizationId } = request.principal;
      const broadcast = await getBroadcastRow(app.db, organizationId, request.params.id);
      const contact = await contactFieldsFor(app.db, organizationId, optional(request.body));
      return personalizeBroadcast(broadcast, contact, exampleUnsubscribeUrl(app.config));
    },
  );

  app.post(
    '/broadcasts/:id/test',
    {
      config: { access: 'full' },
      schema: { summary: 'Send one test email of a broadcast (Mailroom)', params: IdParams, body: TestBody },
    },
    async (request) => {
      const { organizationId } = request.principal;
      const broadcast = await getBroadcastRow(app.db, organizationId, request.params.id);
      const idempotency = idempotencyKeyOf(request, organizationId);
      const { id } = await sendTestEmail(app.db, app.config, organizationId, broadcast, request.body.to, idempotency);
      return { object: 'email', id };
    },
  );

  app.get(
    '/broadcasts/:id/recipients',
    {
      config: { access: 'full' },
      schema: {
        summary: 'The contacts of a broadcast an event applies to (sent, opened, bounced …)',
        params: IdParams,
        querystring: RecipientsQuery,
      },
    },
    async (request) => {
      const { type, bounce_type: bounceType, ...query } = request.query;
      const checked = {
        ...query,
        type: oneOfField(RECIPIENT_TYPES, type, 'type'),
        ...(bounceType === undefined ? {} : { bounce_type: oneOfField(BOUNCE_TYPES, bounceType, 'bounce_type') }),
      };
      const broadcast = await getBroadcastRow(app.db, request.principal.organizationId, request.params.id);
      return listBroadcastRecipients(app.db, broadcast, checked);
    },
  );

  app.get(
    '/broadcasts/:id/clicked-links',
    {
      config: { access: 'full' },
      schema: { summary: "The links of a broadcast's copies, by clicks", params: IdParams, querystring: ListQuery },
    },
    async (request) => {
      const broadcast = await getBroadcastRow(app.db, request.principal.organizationId, request.params.id);
      return listClickedLinks(app.db, broadcast, request.query);
    },
  );
}
