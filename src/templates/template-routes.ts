import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { createTemplate, deleteTemplate, getTemplate, listTemplates, updateTemplate } from './templates.ts';
import { duplicateTemplate, publishTemplate } from './template-versions.ts';
import { renderTemplatePreview } from './preview-template.ts';
import { VARIABLE_TYPES } from './template-variables.ts';

const IdParams = Type.Object({ id: Type.String({ description: "The template's id or alias" }) });

// Shapes only; the rules that need the whole template (parsing, html or text, unique keys) are in
// templates.ts, which PATCH applies to the merged result.
const Variable = Type.Object(
  {
    key: Type.String({ maxLength: 100 }),
    type: Type.Union(VARIABLE_TYPES.map((type) => Type.Literal(type))),
    fallback_value: Type.Optional(
      Type.Union([
        Type.String(),
        Type.Number(),
        Type.Boolean(),
        Type.Record(Type.String(), Type.Unknown()),
        Type.Array(Type.Unknown()),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: false },
);

const fields = {
  alias: Type.Optional(
    Type.Union([Type.String({ maxLength: 100, description: 'Names the template wherever its id does' }), Type.Null()]),
  ),
  from: Type.Optional(
    Type.Union([
      Type.String({ maxLength: 998, description: 'Default sender of the sends using the template' }),
      Type.Null(),
    ]),
  ),
  reply_to: Type.Optional(
    Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 50 }), Type.Null()], {
      description: 'Default Reply-To of the sends using the template',
    }),
  ),
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

/**
 * Resend's /templates: create, list, read, update, delete, publish, duplicate. A template is a draft
 * until published, and sends use its published version (template-versions.ts).
 */
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

  app.post(
    '/templates/:id/publish',
    {
      config: { access: 'full' },
      schema: { summary: 'Publish the version being edited: sends use it from now on', params: IdParams },
    },
    async (request) => {
      const { id } = await publishTemplate(app.db, request.principal.organizationId, request.params.id);
      return { object: 'template', id };
    },
  );

  app.post(
    '/templates/:id/duplicate',
    {
      config: { access: 'full' },
      schema: { summary: 'Copy a template into a new draft, without its alias', params: IdParams },
    },
    async (request) => {
      const { id } = await duplicateTemplate(app.db, request.principal.organizationId, request.params.id);
      return { object: 'template', id };
    },
  );

  app.delete(
    '/templates/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete a template', params: IdParams } },
    async (request) => {
      const { id } = await deleteTemplate(app.db, request.principal.organizationId, request.params.id);
      return { object: 'template', id, deleted: true };
    },
  );
}
