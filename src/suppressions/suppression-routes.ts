import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { addSuppression, deleteSuppression, getSuppression, listSuppressions } from './suppressions.ts';

const EmailParams = Type.Object({ email: Type.String() });
const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
    after: Type.Optional(Type.String({ maxLength: 320 })),
  },
  { additionalProperties: false },
);
const AddBody = Type.Object({ email: Type.String({ maxLength: 320 }) }, { additionalProperties: false });

/** /suppressions: read the organization's list, add an address to it by hand, take one off it. */
export async function suppressionRoutes(app: App) {
  app.get(
    '/suppressions',
    { config: { access: 'full' }, schema: { summary: 'List suppressed addresses', querystring: ListQuery } },
    async (request) => {
      const { limit = 100, after } = request.query;
      return listSuppressions(app.db, request.principal.organizationId, { limit, after });
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

  app.get(
    '/suppressions/:email',
    { config: { access: 'full' }, schema: { summary: 'Read a suppressed address', params: EmailParams } },
    async (request) => getSuppression(app.db, request.principal.organizationId, request.params.email),
  );

  app.delete(
    '/suppressions/:email',
    { config: { access: 'full' }, schema: { summary: 'Stop suppressing an address', params: EmailParams } },
    async (request) => {
      const email = await deleteSuppression(app.db, request.principal.organizationId, request.params.email);
      return { object: 'suppression', email, deleted: true };
    },
  );
}
