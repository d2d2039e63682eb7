import { withEvent } from '../webhooks/fan-out.ts';
import type { EventType } from '../webhooks/event-types.ts';
import Handlebars from 'handlebars';
import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';

// A template is Handlebars source (subject, html, text) plus the variables it declares. Sources are
// parsed when saved, so a syntax error is the author's 400, not a sender's. Rendering fills only
// declared variables, each a string or a number; an undeclared one is refused so that a typo in a
// send is an error rather than a blank in the message.

export type VariableType = 'string' | 'number';

/** As stored in templates.variables: fallback_value only when there is one. */
export interface TemplateVariable {
  key: string;
  type: VariableType;
  fallback_value?: string | number;
}

/** As submitted: a null fallback_value is no fallback (Resend's SDK sends it that way). */
export interface TemplateVariableInput {
  key: string;
  type: VariableType;
  fallback_value?: string | number | null;
}

/** The fields of POST (name required) and PATCH (any subset). null or '' clears subject, html, text. */
export interface TemplateInput {
  name?: string;
  subject?: string | null;
  html?: string | null;
  text?: string | null;
  variables?: TemplateVariableInput[];
}

export interface Template {
  id: string;
  organization_id: string;
  name: string;
  subject: string | null;
  html: string | null;
  text: string | null;
  variables: TemplateVariable[];
  created_at: Date;
  updated_at: Date;
}

/** The API shape. */
export interface TemplateView {
  object: 'template';
  id: string;
  name: string;
  subject: string | null;
  html: string | null;
  text: string | null;
  variables: Array<{ key: string; type: VariableType; fallback_value: string | number | null }>;
  created_at: string;
  updated_at: string;
}

export interface RenderedTemplate {
  subject: string | null;
  html: string | null;
  text: string | null;
}

const COLUMNS = 'id, organization_id, name, subject, html, text, variables, created_at, updated_at';

const VARIABLE_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The helpers every Handlebars environment has; any other helper call cannot render. */
const BUILTIN_HELPERS = new Set(['if', 'unless', 'each', 'with', 'lookup', 'log']);
const ONE_ARGUMENT_HELPERS = new Set(['if', 'unless', 'each', 'with']);

// Handlebars' parser slows down with the square of the nesting depth (2,000 nested blocks take most of a
// second, 10,000 over a minute, all on the event loop), so sources are bounded before they are parsed.
// A transactional template uses tens of expressions.
const MAX_EXPRESSIONS = 1000;

// An environment of our own, so that helpers or partials registered on the global Handlebars elsewhere
// never reach a customer's template. {{log}} would write template-controlled text to the server's
// console: here it does nothing.
const handlebars = Handlebars.create();
handlebars.registerHelper('log', () => undefined);

// Explicitly false (also Handlebars' default since 4.6): {{constructor}} and the like resolve to nothing.
// Saying so also silences Handlebars' console warning for each denied property.
const RUNTIME_OPTIONS: Handlebars.RuntimeOptions = {
  allowProtoPropertiesByDefault: false,
  allowProtoMethodsByDefault: false,
};

/** A template.* webhook event for the changed row (its data: id, name). */
const templateEvent = (org: string, type: EventType) => ({
  org,
  type: `'${type}'::text`,
  data: `jsonb_build_object('id', changed.id, 'name', changed.name)`,
});

export async function createTemplate(
  db: Queryable,
  organizationId: string,
  input: TemplateInput & { name: string },
): Promise<{ id: string }> {
  const fields = checkedFields({
    name: input.name,
    subject: input.subject ?? null,
    html: input.html ?? null,
    text: input.text ?? null,
    variables: input.variables ?? [],
  });
  const { rows } = await db.query<{ id: string }>(
    withEvent(
      `INSERT INTO templates (organization_id, name, subject, html, text, variables)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb) RETURNING id, name`,
      templateEvent('$1::uuid', 'template.created'),
    ),
    [organizationId, fields.name, fields.subject, fields.html, fields.text, JSON.stringify(fields.variables)],
  );
  return { id: rows[0]!.id };
}

export async function listTemplates(db: Queryable, organizationId: string): Promise<TemplateView[]> {
  const { rows } = await db.query<Template>(
    `SELECT ${COLUMNS} FROM templates WHERE organization_id = $1 ORDER BY created_at DESC, id`,
    [organizationId],
  );
  return rows.map(toView);
}

/** One of the organization's templates, or undefined (also for a malformed id). */
export async function findTemplate(db: Queryable, organizationId: string, id: string): Promise<Template | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await db.query<Template>(`SELECT ${COLUMNS} FROM templates WHERE id = $1 AND organization_id = $2`, [
    id,
    organizationId,
  ]);
  return rows[0];
}

export async function getTemplate(db: Queryable, organizationId: string, id: string): Promise<TemplateView> {
  const template = await findTemplate(db, organizationId, id);
  if (!template) throw notFound('Template');
  return toView(template);
}

/**
 * Applies the given fields; the others keep their values. The row is locked while the merged template
 * is checked, so two concurrent updates cannot together leave it without both html and text.
 */
export async function updateTemplate(
  db: Database,
  organizationId: string,
  id: string,
  changes: TemplateInput,
): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Template');
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<Template>(
      `SELECT ${COLUMNS} FROM templates WHERE id = $1 AND organization_id = $2 FOR UPDATE`,
      [id, organizationId],
    );
    const current = rows[0];
    if (!current) throw notFound('Template');
    const fields = checkedFields({
      name: changes.name ?? current.name,
      subject: changes.subject !== undefined ? changes.subject : current.subject,
      html: changes.html !== undefined ? changes.html : current.html,
      text: changes.text !== undefined ? changes.text : current.text,
      variables: changes.variables ?? current.variables,
    });
    await tx.query(
      withEvent(
        `UPDATE templates SET name = $3, subject = $4, html = $5, text = $6, variables = $7::jsonb, updated_at = now()
          WHERE id = $1 AND organization_id = $2 RETURNING id, name`,
        templateEvent('$2::uuid', 'template.updated'),
      ),
      [id, organizationId, fields.name, fields.subject, fields.html, fields.text, JSON.stringify(fields.variables)],
    );
    return { id };
  });
}

export async function deleteTemplate(db: Queryable, organizationId: string, id: string): Promise<void> {
  const { rowCount } = isUuid(id)
    ? await db.query(
        withEvent(
          'DELETE FROM templates WHERE id = $1 AND organization_id = $2 RETURNING id, name',
          templateEvent('$2::uuid', 'template.deleted'),
        ),
        [id, organizationId],
      )
    : { rowCount: 0 };
  if (rowCount === 0) throw notFound('Template');
}

/**
 * Renders the organization's template for a send (`template: { id, variables }` on POST /emails).
 * Errors name the send's fields: template.id, template.variables.<key>.
 */
export async function renderTemplate(
  db: Queryable,
  organizationId: string,
  ref: { id: string; variables?: Record<string, unknown> },
): Promise<RenderedTemplate> {
  const template = await findTemplate(db, organizationId, ref.id);
  if (!template) throw new ServiceError('template_not_found', `Template ${ref.id} not found`, 'template.id');
  const data = resolveVariables(template.variables, ref.variables ?? {});
  const render = (part: 'subject' | 'html' | 'text', source: string | null) => {
    if (source === null) return null;
    try {
      // Compiled per call, not cached: an update takes effect at once in every process.
      const compiled = handlebars.compile(source, { strict: false, noEscape: part !== 'html' });
      return compiled(data, RUNTIME_OPTIONS);
    } catch (error) {
      // Runtime failures the save-time checks cannot foresee, such as {{#each}} without an argument.
      if (error instanceof handlebars.Exception) {
        throw new ServiceError(
          'validation_error',
          `Template ${template.id} could not be rendered (${part}): ${error.message}`,
          'template',
        );
      }
      throw error;
    }
  };
  const subject = render('subject', template.subject);
  return {
    // A variable could carry a line break into the Subject header: never let it start a new header.
    subject: subject === null ? null : subject.replace(/\r\n|[\r\n]/g, ' '),
    html: render('html', template.html),
    text: render('text', template.text),
  };
}

/** The value of every declared variable: the one provided, else the fallback. */
function resolveVariables(declared: TemplateVariable[], provided: Record<string, unknown>): Record<string, unknown> {
  if (typeof provided !== 'object' || provided === null || Array.isArray(provided)) {
    throw new ServiceError('validation_error', 'template.variables must be an object', 'template.variables');
  }
  const byKey = new Map(declared.map((variable) => [variable.key, variable]));
  const undeclared = Object.keys(provided).filter((key) => !byKey.has(key));
  if (undeclared.length > 0) {
    throw new ServiceError(
      'validation_error',
      `The template does not declare ${undeclared.length === 1 ? 'variable' : 'variables'}: ${undeclared.join(', ')}`,
      undeclared.length === 1 ? `template.variables.${undeclared[0]}` : 'template.variables',
    );
  }
  // No prototype: the template sees the declared variables and nothing else.
  const data: Record<string, unknown> = Object.create(null);
  for (const variable of declared) {
    const field = `template.variables.${variable.key}`;
    const value = Object.hasOwn(provided, variable.key) ? provided[variable.key] : variable.fallback_value;
    if (value === undefined) {
      throw new ServiceError('validation_error', `Missing template variable: ${variable.key}`, field);
    }
    if (!isOfType(value, variable.type)) {
      throw new ServiceError(
        'validation_error',
        `Template variable ${variable.key} must be a ${variable.type}, not ${describe(value)}`,
        field,
      );
    }
    data[variable.key] = value;
  }
  return data;
}

interface TemplateFields {
  name: string;
  subject: string | null;
  html: string | null;
  text: string | null;
  variables: TemplateVariableInput[];
}

/**
 * The rules beyond the request schema's shapes, on the template as it will be stored: sources that
 * parse, html or text present, well-formed variables. Returns the fields as stored.
 */
function checkedFields(input: TemplateFields): Omit<TemplateFields, 'variables'> & { variables: TemplateVariable[] } {
  const subject = input.subject || null;
  const html = input.html || null;
  const text = input.text || null;
  if (subject !== null && /[\r\n]/.test(subject)) {
    throw new ServiceError('validation_error', 'subject must not contain line breaks', 'subject');
  }
  if (html === null && text === null) {
    throw new ServiceError('missing_required_field', 'Missing required field: html or text', 'html');
  }
  for (const [field, source] of [
    ['subject', subject],
    ['html', html],
    ['text', text],
  ] as const) {
    if (source !== null) checkSource(field, source);
  }
  return { name: input.name, subject, html, text, variables: checkedVariables(input.variables) };
}

function checkedVariables(variables: TemplateVariableInput[]): TemplateVariable[] {
  const seen = new Set<string>();
  return variables.map(({ key, type, fallback_value }, index) => {
    const field = `variables.${index}`;
    if (!VARIABLE_KEY.test(key) || key === '__proto__') {
      throw new ServiceError(
        'validation_error',
        `Invalid variable key ${JSON.stringify(key)}: use letters, digits and underscores, not starting with a digit`,
        `${field}.key`,
      );
    }
    if (seen.has(key)) throw new ServiceError('validation_error', `Duplicate variable key: ${key}`, `${field}.key`);
    seen.add(key);
    if (fallback_value === undefined || fallback_value === null) return { key, type };
    if (!isOfType(fallback_value, type)) {
      throw new ServiceError(
        'validation_error',
        `The fallback_value of ${key} must be a ${type}, not ${describe(fallback_value)}`,
        `${field}.fallback_value`,
      );
    }
    return { key, type, fallback_value };
  });
}

/** Parses one source and refuses what could only fail when rendered: partials, decorators, unknown helpers. */
function checkSource(field: 'subject' | 'html' | 'text', source: string): void {
  if (source.split('{{').length - 1 > MAX_EXPRESSIONS) {
    throw new ServiceError(
      'validation_error',
      `Too many Handlebars expressions in ${field}: at most ${MAX_EXPRESSIONS} {{…}} are allowed`,
      field,
    );
  }
  let program: hbs.AST.Program;
  try {
    program = handlebars.parse(source);
  } catch (error) {
    throw new ServiceError('validation_error', `Invalid Handlebars in ${field}: ${(error as Error).message}`, field);
  }
  checkNode(program, field);
}

type HelperCall = hbs.AST.MustacheStatement | hbs.AST.BlockStatement | hbs.AST.SubExpression;

function checkNode(node: hbs.AST.Node, field: string): void {
  const where = `${field} (line ${node.loc?.start.line ?? 1})`;
  switch (node.type) {
    case 'PartialStatement':
    case 'PartialBlockStatement':
      throw new ServiceError('validation_error', `Partials are not supported, in ${where}`, field);
    case 'Decorator':
    case 'DecoratorBlock':
      throw new ServiceError(
        'validation_error',
        `Decorators and inline partials are not supported, in ${where}`,
        field,
      );
    case 'MustacheStatement':
    case 'BlockStatement':
    case 'SubExpression': {
      const call = node as HelperCall;
      const name = call.path.type === 'PathExpression' ? (call.path as hbs.AST.PathExpression).original : undefined;
      // With arguments it is a helper call; without, a variable lookup or a section ({{#key}}…{{/key}}).
      if ((call.params.length > 0 || call.hash) && (name === undefined || !BUILTIN_HELPERS.has(name))) {
        throw new ServiceError(
          'validation_error',
          `Unknown helper ${JSON.stringify(name ?? '')} in ${where}: the helpers are if, unless, each, with and lookup`,
          field,
        );
      }
      if (name !== undefined && ONE_ARGUMENT_HELPERS.has(name) && call.params.length !== 1) {
        throw new ServiceError('validation_error', `${name} takes exactly one argument, in ${where}`, field);
      }
    }
  }
  for (const value of Object.values(node)) {
    for (const child of [value].flat()) {
      if (typeof child === 'object' && child !== null && typeof (child as hbs.AST.Node).type === 'string') {
        checkNode(child as hbs.AST.Node, field);
      }
    }
  }
}

function isOfType(value: unknown, type: VariableType): boolean {
  return type === 'number' ? typeof value === 'number' && Number.isFinite(value) : typeof value === 'string';
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number') return Number.isFinite(value) ? 'a number' : String(value);
  const kind = typeof value;
  return kind === 'object' ? 'an object' : `a ${kind}`;
}

function toView(template: Template): TemplateView {
  return {
    object: 'template',
    id: template.id,
    name: template.name,
    subject: template.subject,
    html: template.html,
    text: template.text,
    variables: template.variables.map((variable) => ({
      key: variable.key,
      type: variable.type,
      fallback_value: variable.fallback_value ?? null,
    })),
    created_at: new Date(template.created_at).toISOString(),
    updated_at: new Date(template.updated_at).toISOString(),
  };
}
