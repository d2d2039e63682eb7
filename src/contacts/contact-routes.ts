import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { contactTopics, createContact, deleteContact, getContact, listContacts, updateContact } from './contacts.ts';

// Resend addresses a contact by its id or by its email address: both work in the path.
const ContactParams = Type.Object({ id_or_email: Type.String() });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
    after: Type.Optional(Type.String({ description: 'The id of the last contact of the previous page' })),
    before: Type.Optional(Type.String({ description: 'The id of the first contact of the next page' })),
  },
  { additionalProperties: false },
);

// Shapes only; the address itself and the topic ids are checked in contacts.ts.
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
};
const Email = Type.String({ maxLength: 320 });

const CreateBody = Type.Object({ email: Email, ...fields }, { additionalProperties: false });
const UpdateBody = Type.Object(
  { email: Type.Optional(Email), ...fields },
  { additionalProperties: false, minProperties: 1 },
);

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
      const { limit = 100, after, before } = request.query;
      return listContacts(app.db, request.principal.organizationId, { limit, after, before });
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
