import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { ServiceError } from '../platform/errors.ts';
import {
  MAX_BATCH,
  addSuppression,
  addSuppressions,
  deleteSuppression,
  getSuppression,
  listSuppressions,
  removeSuppressions,
} from './suppressions.ts';

const EntryParams = Type.Object({ id_or_email: Type.String() });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
    after: Type.Optional(Type.String({ maxLength: 320, description: 'The id or email of the last entry seen' })),
    before: Type.Optional(Type.String({ maxLength: 320, description: 'The id or email of the first entry seen' })),
    origin: Type.Optional(Type.Union([Type.Literal('bounce'), Type.Literal('complaint'), Type.Literal('manual')])),
  },
  { additionalProperties: false },
);
const AddBody = Type.Object({ email: Type.String({ maxLength: 320 }) }, { additionalProperties: false });
const Batch = (description: string) =>
  Type.Array(Type.String({ maxLength: 320 }), { minItems: 1, maxItems: MAX_BATCH, description });
const BatchAddBody = Type.Object(
  { emails: Batch(`1 to ${MAX_BATCH} addresses to suppress`) },
  { additionalProperties: false },
);
// Resend's "emails or ids, not both": checked by the route, to say so in one message.
const BatchRemoveBody = Type.Object(
  {
    emails: Type.Optional(Batch(`1 to ${MAX_BATCH} addresses to take off the list`)),
    ids: Type.Optional(Batch(`1 to ${MAX_BATCH} suppression ids to take off the list`)),
  },
  { additionalProperties: false },
);

/** /suppressions: read the organization's list, add addresses to it by hand, take them off it. */
export async function suppressionRoutes(app: App) {
  app.get(
    '/suppressions',
    { config: { access: 'full' }, schema: { summary: 'List suppressed addresses', querystring: ListQuery } },
    async (request) => {
      const { limit = 100, after, before, origin } = request.query;
      return listSuppressions(app.db, request.principal.organizationId, { limit, after, before, origin });
    },
  );

  app.post(
    '/suppressions',
    { config: { access: 'full' }, schema: { summary: 'Suppress an address', body: AddBody } },
    async (request, reply) => {
      const { suppression, created } = await addSuppression(
        app.db,
        request.principal.organizationId,
        request.body.email,
      );
      return reply.code(created ? 201 : 200).send(suppression);
    },
  );

  app.post(
    '/suppressions/batch/add',
    { config: { access: 'full' }, schema: { summary: `Suppress up to ${MAX_BATCH} addresses`, body: BatchAddBody } },
    async (request, reply) => {
      const data = await addSuppressions(app.db, request.principal.organizationId, request.body.emails);
      return reply.code(201).send({ data });
    },
  );

  app.post(
    '/suppressions/batch/remove',
    {
      config: { access: 'full' },
      schema: { summary: `Stop suppressing up to ${MAX_BATCH} addresses`, body: BatchRemoveBody },
    },
    async (request) => {
      const { emails, ids } = request.body;
      if (emails !== undefined && ids !== undefined) {
        throw new ServiceError('validation_error', 'Give emails or ids, not both', 'ids');
      }
      const by = emails !== undefined ? { emails } : ids !== undefined ? { ids } : undefined;
      if (!by) throw new ServiceError('missing_required_field', 'Missing required field: emails (or ids)', 'emails');
      return { data: await removeSuppressions(app.db, request.principal.organizationId, by) };
    },
  );

  app.get(
    '/suppressions/:id_or_email',
    { config: { access: 'full' }, schema: { summary: 'Read a suppression', params: EntryParams } },
    async (request) => getSuppression(app.db, request.principal.organizationId, request.params.id_or_email),
  );

  app.delete(
    '/suppressions/:id_or_email',
    { config: { access: 'full' }, schema: { summary: 'Stop suppressing an address', params: EntryParams } },
    async (request) => {
      const removed = await deleteSuppression(app.db, request.principal.organizationId, request.params.id_or_email);
      return { object: 'suppression', ...removed, deleted: true };
    },
  );
}
