import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

// Resend's published OpenAPI document (see test/fixtures/resend-openapi/README.md), as validators:
// the response schema of each operation by method, path and status, and each webhook event's payload.

const DOCUMENT_PATH = new URL('../fixtures/resend-openapi/resend-1.5.0.json', import.meta.url);

interface Operation {
  method: string;
  template: string; // /emails/{email_id}
  pattern: RegExp;
  operationId: string;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
  requestSchema: unknown;
}

const document = JSON.parse(readFileSync(DOCUMENT_PATH, 'utf8')) as {
  paths: Record<string, Record<string, Record<string, unknown>>>;
  webhooks: Record<string, { post: { requestBody: { content: { 'application/json': { schema: unknown } } } } }>;
  components: { schemas: Record<string, unknown> };
};

/**
 * Where Resend's OpenAPI document and the types of its Node SDK (resend 6.38.0, dist/index.d.mts)
 * disagree, the SDK's types win: applications are compiled against them. Each case is applied to the
 * document before anything is validated, and each is written down in docs/resend.md.
 */
interface SdkCase {
  /** A component schema, and the path of keywords inside it to the property's schema. */
  schema: string;
  path: string[];
  /** What the SDK's type says. */
  sdk: string;
  apply(property: Record<string, unknown>): void;
}
const nullable = (property: Record<string, unknown>) => {
  property.type = [property.type as string, 'null'];
};
const item = (field: string) => ['properties', 'data', 'items', 'properties', field];
export const SDK_CASES: SdkCase[] = [
  // A message sent with only html, or only text, has no body of the other kind.
  {
    schema: 'Email',
    path: ['properties', 'html'],
    sdk: 'GetEmailResponseSuccess.html: string | null',
    apply: nullable,
  },
  {
    schema: 'Email',
    path: ['properties', 'text'],
    sdk: 'GetEmailResponseSuccess.text: string | null',
    apply: nullable,
  },
  // A template need not have a subject or a text version.
  { schema: 'Template', path: ['properties', 'subject'], sdk: 'Template.subject: string | null', apply: nullable },
  { schema: 'Template', path: ['properties', 'text'], sdk: 'Template.text: string | null', apply: nullable },
  // A template need not have an alias or a default sender, and a variable need not have a fallback.
  { schema: 'Template', path: ['properties', 'alias'], sdk: 'Template.alias: string | null', apply: nullable },
  { schema: 'Template', path: ['properties', 'from'], sdk: 'Template.from: string | null', apply: nullable },
  {
    schema: 'TemplateListItem',
    path: ['properties', 'alias'],
    sdk: 'TemplateListItem.alias: string | null (Pick of Template)',
    apply: nullable,
  },
  {
    schema: 'TemplateVariable',
    path: ['properties', 'fallback_value'],
    sdk: 'TemplateVariable.fallback_value: string | number | null',
    apply(property) {
      (property.oneOf as unknown[]).push({ type: 'null' });
    },
  },
  // A contact need not have a name.
  ...(['first_name', 'last_name'] as const).flatMap((field) => [
    {
      schema: 'GetContactResponseSuccess',
      path: ['properties', field],
      sdk: `Contact.${field}: string | null`,
      apply: nullable,
    },
    {
      schema: 'ListContactsResponseSuccess',
      path: item(field),
      sdk: `Contact.${field}: string | null`,
      apply: nullable,
    },
  ]),
  // A topic need not have a description: GET /topics/:id omits it (Topic.description?: string), a
  // contact's topic list says null.
  {
    schema: 'GetContactTopicsResponseSuccess',
    path: item('description'),
    sdk: 'ContactTopic.description: string | null',
    apply: nullable,
  },
  // A contact property need not have a fallback: the SDK's ApiContactProperty has it null then.
  ...[
    { schema: 'GetContactPropertyResponseSuccess', path: ['properties', 'fallback_value'] },
    { schema: 'ListContactPropertiesResponseSuccess', path: item('fallback_value') },
  ].map(({ schema, path }) => ({
    schema,
    path,
    sdk: 'ApiContactProperty.fallback_value: string | number | null',
    apply(property: Record<string, unknown>) {
      (property.oneOf as unknown[]).push({ type: 'null' });
    },
  })),
  // The document's Email has no tags; the SDK reads them as a list of name and value.
  {
    schema: 'Email',
    path: ['properties'],
    sdk: 'GetEmailResponseSuccess.tags?: { name: string; value: string }[]',
    apply(properties) {
      properties.tags = {
        type: 'array',
        items: {
          type: 'object',
          required: ['name', 'value'],
          properties: { name: { type: 'string' }, value: { type: 'string' } },
        },
      };
    },
  },
  // An attachment of a received message without a Content-ID: the SDK's InboundAttachment has it null.
  ...[
    { schema: 'GetReceivedEmailResponse', path: ['properties', 'attachments', 'items', 'properties', 'content_id'] },
    {
      schema: 'ListReceivedEmailsResponse',
      path: [...item('attachments'), 'items', 'properties', 'content_id'],
    },
  ].map(({ schema, path }) => ({
    schema,
    path,
    sdk: 'InboundAttachment.content_id: string | null',
    apply: nullable,
  })),
  // A broadcast need not have a reply-to, a preview text or a time yet (the SDK's Broadcast: string | null).
  ...(['reply_to', 'preview_text', 'scheduled_at', 'sent_at'] as const).map((field) => ({
    schema: 'GetBroadcastResponseSuccess',
    path: ['properties', field],
    sdk: `Broadcast.${field}: ${field === 'reply_to' ? 'string[]' : 'string'} | null`,
    apply: nullable,
  })),
  // A listed broadcast's segment (deleted since), topic and times may be unset (a Pick of Broadcast).
  ...(['segment_id', 'audience_id', 'scheduled_at', 'sent_at', 'topic_id'] as const).map((field) => ({
    schema: 'ListBroadcastsResponseSuccess',
    path: item(field),
    sdk: `Broadcast.${field}: string | null`,
    apply: nullable,
  })),
  // has_more is optional in the document, required by the SDK's list types.
  ...[
    'ListDomainsResponse',
    'ListApiKeysResponse',
    'ListTemplatesResponseSuccess',
    'ListEmailsResponse',
    'ListReceivedEmailsResponse',
  ].map((schema) => ({
    schema,
    path: [],
    sdk: `${schema.replace('Response', 'ResponseSuccess').replace('SuccessSuccess', 'Success')}.has_more: boolean`,
    apply(list: Record<string, unknown>) {
      list.required = [...((list.required as string[] | undefined) ?? []), 'object', 'has_more', 'data'];
    },
  })),
];
for (const sdkCase of SDK_CASES) {
  let node = document.components.schemas[sdkCase.schema] as Record<string, unknown> | undefined;
  for (const key of sdkCase.path) node = node?.[key] as Record<string, unknown> | undefined;
  if (!node) throw new Error(`SDK case ${sdkCase.schema} ${sdkCase.path.join('.')}: not in the document`);
  sdkCase.apply(node);
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
// Every $ref in the document is "#/components/...": registered under an id, they resolve as "resend#/...".
ajv.addSchema({ $id: 'resend', components: document.components });
const rebased = (schema: unknown) =>
  JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"resend#/components/'));

const operations: Operation[] = [];
for (const [template, methods] of Object.entries(document.paths)) {
  for (const [method, op] of Object.entries(methods)) {
    if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
    const requestBody = op.requestBody as { content?: Record<string, { schema?: unknown }> } | undefined;
    operations.push({
      method: method.toUpperCase(),
      template,
      // A literal segment beats a parameter: /emails/batch is not /emails/{email_id}.
      pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
      operationId: String(op.operationId),
      responses: (op.responses ?? {}) as Operation['responses'],
      requestSchema: requestBody?.content?.['application/json']?.schema,
    });
  }
}
const literalSegments = (template: string) =>
  template.split('/').filter((part) => part && !part.startsWith('{')).length;

/** Resend's operation for a request, or undefined when Resend has no such operation. */
export function resendOperation(method: string, path: string): Operation | undefined {
  const pathOnly = path.split('?')[0]!;
  return operations
    .filter((op) => op.method === method.toUpperCase() && op.pattern.test(pathOnly))
    .sort((a, b) => literalSegments(b.template) - literalSegments(a.template))[0];
}

export const resendOperationCount = operations.length;
export const resendWebhookTypes = Object.keys(document.webhooks);

const compiled = new Map<string, ValidateFunction>();
function validatorFor(key: string, schema: unknown): ValidateFunction {
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(rebased(schema) as object);
    compiled.set(key, validate);
  }
  return validate;
}

const describe = (validate: ValidateFunction) =>
  (validate.errors ?? []).map(
    (error) => `${error.instancePath || '/'} ${error.message} ${JSON.stringify(error.params)}`,
  );

/**
 * What is wrong with a response by Resend's schema for it: [] when it conforms (or the schema gives
 * no body for that status), a list of problems otherwise. Undefined when Resend has no such operation.
 */
export function responseProblems(method: string, path: string, status: number, body: unknown): string[] | undefined {
  const op = resendOperation(method, path);
  if (!op) return undefined;
  const response = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses.default;
  const schema = response?.content?.['application/json']?.schema;
  if (!schema) return [];
  const validate = validatorFor(`${op.operationId} ${status}`, schema);
  return validate(body) ? [] : describe(validate);
}

/** What is wrong with a request body by Resend's schema for the operation ([] when it conforms). */
export function requestProblems(method: string, path: string, body: unknown): string[] {
  const op = resendOperation(method, path);
  if (!op?.requestSchema) return [];
  const validate = validatorFor(`${op.operationId} request`, op.requestSchema);
  return validate(body) ? [] : describe(validate);
}

/** What is wrong with a webhook payload by Resend's schema for its event type; undefined for a type Resend lacks. */
export function webhookProblems(payload: { type?: string }): string[] | undefined {
  const hook = payload.type ? document.webhooks[payload.type] : undefined;
  if (!hook) return undefined;
  const validate = validatorFor(`webhook ${payload.type}`, hook.post.requestBody.content['application/json'].schema);
  return validate(payload) ? [] : describe(validate);
}
