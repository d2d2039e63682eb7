import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { notFound } from '../platform/errors.ts';
import { findSegment } from './segments.ts';
import { contactTopics, createContact, deleteContact, getContact, listContacts, updateContact } from './contacts.ts';

// Resend addresses a contact by its id or by its email address: both work in the path.
const ContactParams = Type.Object({ id_or_email: Type.String() });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
    after: Type.Optional(Type.String({ description: 'The id of the last contact of the previous page' })),
    before: Type.Optional(Type.String({ description: 'The id of the first contact of the next page' })),
    segment_id: Type.Optional(Type.String({ description: 'Only the contacts in this segment' })),
  },
  { additionalProperties: false },
);

// Shapes only; the address itself, the topic and segment ids and the property values are checked in
// contacts.ts (a value against its property's type, naming `properties.<key>`).
const Name = Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()]));
const TopicChoice = Type.Object(
  { id: Type.String(), subscription: Type.Union([Type.Literal('opt_in'), Type.Literal('opt_out')]) },
  { additionalProperties: false },
);
const fields = {
  first_name: Name,
  last_name: Name,
  unsubscribed: Type.Optional(Type.Boolean()),
  topics: Type.Optional(Type.Array(TopicChoice, { maxItems: 100 })),
  properties: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 100 })),
};
// Resend's OpenAPI lists segment ids; its Node SDK sends `{ id }` objects. Both are accepted.
const SegmentRefs = Type.Array(
  Type.Union([Type.String(), Type.Object({ id: Type.String() }, { additionalProperties: false })]),
  { maxItems: 100 },
);
const Email = Type.String({ maxLength: 320 });

const CreateBody = Type.Object(
  {
    email: Email,
    ...fields,
    segments: Type.Optional(SegmentRefs),
    audience_id: Type.Optional(Type.String({ description: "Resend's older name for a segment to join" })),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  { email: Type.Optional(Email), ...fields },
  { additionalProperties: false, minProperties: 1 },
);

const SegmentParams = Type.Object({ id: Type.String() });
const { segment_id: _segmentId, ...segmentListFields } = ListQuery.properties;
const SegmentListQuery = Type.Object(segmentListFields, { additionalProperties: false });
const { segments: _segments, audience_id: _audienceId, ...audienceCreateFields } = CreateBody.properties;
const AudienceCreateBody = Type.Object(audienceCreateFields, { additionalProperties: false });

const TopicChoices = Type.Array(TopicChoice, { maxItems: 100 });
// Resend documents `{ "topics": [...] }`; its Node SDK sends the bare array. Both are accepted.
const TopicChoicesBody = Type.Union([
  TopicChoices,
  Type.Object({ topics: TopicChoices }, { additionalProperties: false }),
]);

/** Resend's /contacts: create, list (paginated), read, update, delete; and a contact's topics. */
export async function contactRoutes(app: App) {
  app.post(
    '/contacts',
    { config: { access: 'full' }, schema: { summary: 'Create a contact', body: CreateBody } },
    async (request, reply) => {
      const { id } = await createContact(app.db, request.principal.organizationId, request.body);
      return reply.code(201).send({ object: 'contact', id });
    },
  );

  app.get(
    '/contacts',
    { config: { access: 'full' }, schema: { summary: 'List contacts', querystring: ListQuery } },
    async (request) => {
      const { limit = 100, after, before, segment_id: segmentId } = request.query;
      return listContacts(app.db, request.principal.organizationId, { limit, after, before, segmentId });
    },
  );

  app.get(
    '/contacts/:id_or_email',
    { config: { access: 'full' }, schema: { summary: 'Read a contact by id or email', params: ContactParams } },
    async (request) => getContact(app.db, request.principal.organizationId, request.params.id_or_email),
  );

  app.patch(
    '/contacts/:id_or_email',
    {
      config: { access: 'full' },
      schema: { summary: 'Update a contact by id or email', params: ContactParams, body: UpdateBody },
    },
    async (request) => {
      const { organizationId } = request.principal;
      const { id } = await updateContact(app.db, organizationId, request.params.id_or_email, request.body);
      return { object: 'contact', id };
    },
  );

  app.delete(
    '/contacts/:id_or_email',
    { config: { access: 'full' }, schema: { summary: 'Delete a contact by id or email', params: ContactParams } },
    async (request) => {
      const { id } = await deleteContact(app.db, request.principal.organizationId, request.params.id_or_email);
      // `contact` as well as `id`: the SDK's RemoveContactsResponseSuccess reads the id there.
      return { object: 'contact', id, contact: id, deleted: true };
    },
  );

  // The members of a segment: the path Resend's SDK lists them at (contacts.list({ segmentId })), and
  // the same under the segment's older name.
  for (const url of ['/segments/:id/contacts', '/audiences/:id/contacts']) {
    app.get(
      url,
      {
        config: { access: 'full' },
        schema: { summary: 'List the contacts in a segment', params: SegmentParams, querystring: SegmentListQuery },
      },
      async (request) => {
        const { limit = 100, after, before } = request.query;
        const segmentId = request.params.id;
        return listContacts(app.db, request.principal.organizationId, { limit, after, before, segmentId });
      },
    );
  }

  // Older Resend SDKs create a contact inside an audience: the same as POST /contacts with audience_id.
  app.post(
    '/audiences/:id/contacts',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Create a contact in an audience (a segment)',
        params: SegmentParams,
        body: AudienceCreateBody,
      },
    },
    async (request, reply) => {
      const { organizationId } = request.principal;
      // The audience is the path's resource: one that is not the organization's is a 404, not a 400.
      if (!(await findSegment(app.db, organizationId, request.params.id))) throw notFound('Audience');
      const { id } = await createContact(app.db, organizationId, { ...request.body, audience_id: request.params.id });
      return reply.code(201).send({ object: 'contact', id });
    },
  );

  // Resend's SDK, given an audienceId, reads, updates and removes a contact under the audience's path.
  // An audience is a segment and a contact belongs to the organization, not to a segment: these address
  // the contact exactly as /contacts/:id_or_email does, once the audience is found to be the
  // organization's (another organization's audience, or none, is a 404).
  const AudienceContactParams = Type.Object({ id: Type.String(), id_or_email: Type.String() });
  const audienceContact = async (organizationId: string, params: { id: string; id_or_email: string }) => {
    if (!(await findSegment(app.db, organizationId, params.id))) throw notFound('Audience');
    return params.id_or_email;
  };
  app.get(
    '/audiences/:id/contacts/:id_or_email',
    {
      config: { access: 'full' },
      schema: { summary: 'Read a contact by id or email (under an audience)', params: AudienceContactParams },
    },
    async (request) => {
      const { organizationId } = request.principal;
      return getContact(app.db, organizationId, await audienceContact(organizationId, request.params));
    },
  );
  app.patch(
    '/audiences/:id/contacts/:id_or_email',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Update a contact by id or email (under an audience)',
        params: AudienceContactParams,
        body: UpdateBody,
      },
    },
    async (request) => {
      const { organizationId } = request.principal;
      const idOrEmail = await audienceContact(organizationId, request.params);
      const { id } = await updateContact(app.db, organizationId, idOrEmail, request.body);
      return { object: 'contact', id };
    },
  );
  app.delete(
    '/audiences/:id/contacts/:id_or_email',
    {
      config: { access: 'full' },
      schema: { summary: 'Delete a contact by id or email (under an audience)', params: AudienceContactParams },
    },
    async (request) => {
      const { organizationId } = request.principal;
      const { id } = await deleteContact(app.db, organizationId, await audienceContact(organizationId, request.params));
      return { object: 'contact', id, contact: id, deleted: true };
    },
  );

  // Resend's SDK reads and sets a contact's topics here (contacts.topics.list / update).
  app.get(
    '/contacts/:id_or_email/topics',
    {
      config: { access: 'full' },
      schema: { summary: "A contact's subscription to every topic", params: ContactParams },
    },
    async (request) => contactTopics(app.db, request.principal.organizationId, request.params.id_or_email),
  );

  app.patch(
    '/contacts/:id_or_email/topics',
    {
      config: { access: 'full' },
      schema: {
        summary: "Set a contact's choices for some topics",
        params: ContactParams,
        body: TopicChoicesBody,
      },
    },
    async (request) => {
      const { organizationId } = request.principal;
      const idOrEmail = request.params.id_or_email;
      const topics = Array.isArray(request.body) ? request.body : request.body.topics;
      // An empty list changes nothing, and so emits no contact.updated.
      const { id } =
        topics.length === 0
          ? await getContact(app.db, organizationId, idOrEmail)
          : await updateContact(app.db, organizationId, idOrEmail, { topics });
      return { object: 'contact', id };
    },
  );
}
