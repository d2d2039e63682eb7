import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { createTemplate, deleteTemplate, getTemplate, listTemplates, updateTemplate } from './templates.ts';
import { renderTemplatePreview } from './preview-template.ts';

const IdParams = Type.Object({ id: Type.String() });

// Shapes only; the rules that need the whole template (parsing, html or text, unique keys) are in
// templates.ts, which PATCH applies to the merged result.
const Variable = Type.Object(
  {
    key: Type.String({ maxLength: 100 }),
    type: Type.Union([Type.Literal('string'), Type.Literal('number')]),
    fallback_value: Type.Optional(Type.Union([Type.String(), Type.Number(), Type.Null()])),
  },
  { additionalProperties: false },
);

const fields = {
  // RFC 5322 caps a header line at 998 characters.
  subject: Type.Optional(Type.Union([Type.String({ maxLength: 998 }), Type.Null()])),
  html: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  text: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  variables: Type.Optional(Type.Array(Variable, { maxItems: 50 })),
};
const Name = Type.String({ minLength: 1, maxLength: 200 });

const CreateBody = Type.Object({ name: Name, ...fields }, { additionalProperties: false });
const UpdateBody = Type.Object({ name: Type.Optional(Name), ...fields }, { additionalProperties: false });

const RenderBody = Type.Object(
  {
    subject: Type.Optional(Type.String({ maxLength: 998 })),
    html: Type.Optional(Type.String()),
    text: Type.Optional(Type.String()),
    variables: Type.Optional(
      Type.Record(Type.String(), Type.Union([Type.String(), Type.Number()]), {
        maxProperties: 50,
        description: 'Values of the variables the sources use: strings or numbers',
      }),
    ),
  },
  { additionalProperties: false },
);
const NullableText = Type.Union([Type.String(), Type.Null()]);
const RenderResponse = Type.Object({
  object: Type.Literal('template_render'),
  subject: NullableText,
  html: NullableText,
  text: NullableText,
});

/** Resend's /templates: create, list, read, update, delete. A template is usable as soon as it exists. */
export async function templateRoutes(app: App) {
  app.post(
    '/templates',
    { config: { access: 'full' }, schema: { summary: 'Create a template', body: CreateBody } },
    async (request, reply) => {
      const { id } = await createTemplate(app.db, request.principal.organizationId, request.body);
      return reply.code(201).send({ object: 'template', id });
    },
  );

  app.post(
    '/templates/render',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Render template sources with values, as a send would (nothing is stored)',
        body: RenderBody,
        response: { 200: RenderResponse },
      },
    },
    async (request) => ({ object: 'template_render' as const, ...renderTemplatePreview(request.body) }),
  );

  app.get(
    '/templates',
    { config: { access: 'full' }, schema: { summary: 'List templates', querystring: PageQuery } },
    async (request) => listTemplates(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/templates/:id',
    { config: { access: 'full' }, schema: { summary: 'Read a template', params: IdParams } },
    async (request) => {
      return getTemplate(app.db, request.principal.organizationId, request.params.id);
    },
  );

  app.patch(
    '/templates/:id',
    { config: { access: 'full' }, schema: { summary: 'Update a template', params: IdParams, body: UpdateBody } },
    async (request) => {
      const { id } = await updateTemplate(app.db, request.principal.organizationId, request.params.id, request.body);
      return { object: 'template', id };
    },
  );

  app.delete(
    '/templates/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete a template', params: IdParams } },
    async (request) => {
      await deleteTemplate(app.db, request.principal.organizationId, request.params.id);
      return { object: 'template', id: request.params.id, deleted: true };
    },
  );
}
