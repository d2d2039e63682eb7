import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { ServiceError } from '../platform/errors.ts';
import {
  createContactProperty,
  deleteContactProperty,
  getContactProperty,
  listContactProperties,
  updateContactProperty,
} from './contact-properties.ts';

const IdParams = Type.Object({ id: Type.String() });
// Shapes only; the key's rule and the fallback's type are checked in contact-properties.ts.
const Value = Type.Union([Type.String(), Type.Number(), Type.Null()]);
const PropertyType = Type.Union([Type.Literal('string'), Type.Literal('number')]);

const CreateBody = Type.Object(
  { key: Type.String({ maxLength: 100 }), type: PropertyType, fallback_value: Type.Optional(Value) },
  { additionalProperties: false },
);
// key and type are read only to refuse them with a message that says why (they are fixed once created).
const UpdateBody = Type.Object(
  { fallback_value: Type.Optional(Value), key: Type.Optional(Type.Unknown()), type: Type.Optional(Type.Unknown()) },
  { additionalProperties: false },
);

/** Resend's /contact-properties: create, list, read, update (the fallback only), delete. */
export async function contactPropertyRoutes(app: App) {
  app.post(
    '/contact-properties',
    { config: { access: 'full' }, schema: { summary: 'Create a contact property', body: CreateBody } },
    async (request, reply) => {
      const { id } = await createContactProperty(app.db, request.principal.organizationId, request.body);
      return reply.code(201).send({ object: 'contact_property', id });
    },
  );

  app.get(
    '/contact-properties',
    { config: { access: 'full' }, schema: { summary: 'List contact properties', querystring: PageQuery } },
    async (request) => listContactProperties(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/contact-properties/:id',
    { config: { access: 'full' }, schema: { summary: 'Read a contact property', params: IdParams } },
    async (request) => getContactProperty(app.db, request.principal.organizationId, request.params.id),
  );

  app.patch(
    '/contact-properties/:id',
    {
      config: { access: 'full' },
      schema: { summary: "Set or clear a contact property's fallback", params: IdParams, body: UpdateBody },
    },
    async (request) => {
      for (const field of ['key', 'type'] as const) {
        if (request.body[field] !== undefined) {
          const message = `${field}: a property's key and type are fixed once it is created; delete it and create another`;
          throw new ServiceError('validation_error', message, field);
        }
      }
      if (request.body.fallback_value === undefined) {
        throw new ServiceError('validation_error', 'Nothing to change: give fallback_value (null clears it)');
      }
      const { organizationId } = request.principal;
      const { id } = await updateContactProperty(
        app.db,
        organizationId,
        request.params.id,
        request.body.fallback_value,
      );
      return { object: 'contact_property', id };
    },
  );

  app.delete(
    '/contact-properties/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete a contact property and its values', params: IdParams } },
    async (request) => {
      const { id } = await deleteContactProperty(app.db, request.principal.organizationId, request.params.id);
      return { object: 'contact_property', id, deleted: true };
    },
  );
}
