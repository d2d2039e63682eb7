import { withEvent } from '../webhooks/fan-out.ts';
import type { EventType } from '../webhooks/event-types.ts';
import { isoMillisSql } from '../webhooks/event-payloads.ts';
import { isUniqueViolation, type Database, type Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import { asList, formatMailbox, parseMailbox } from '../platform/addresses.ts';
import { checkedSources } from './template-syntax.ts';
import {
  checkedVariables,
  datedVariables,
  type TemplateVariable,
  type TemplateVariableInput,
  type VariableType,
  type VariableValue,
} from './template-variables.ts';

// A template is Handlebars source (subject, html, text), the variables it declares and the sender
// defaults (from, reply_to) a send takes from it, stored per organization. The row is the version being
// edited; sends use the version last published (template-versions.ts). Sources are parsed when saved
// (template-syntax.ts), so a syntax error is the author's 400, not a sender's.

/** The fields of POST (name required) and PATCH (any subset). null or '' clears what may be absent. */
export interface TemplateInput {
  name?: string;
  alias?: string | null;
  from?: string | null;
  reply_to?: string | string[] | null;
  subject?: string | null;
  html?: string | null;
  text?: string | null;
  variables?: TemplateVariableInput[];
}

export interface Template {
  id: string;
  organization_id: string;
  name: string;
  alias: string | null;
  sender: string | null;
  reply_to: string[] | null;
  subject: string | null;
  html: string | null;
  text: string | null;
  variables: TemplateVariable[];
  current_version_id: string;
  published_version_id: string | null;
  published_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The API shape: Resend's Template, as its SDK types it. */
export interface TemplateView {
  object: 'template';
  id: string;
  current_version_id: string;
  name: string;
  alias: string | null;
  from: string | null;
  reply_to: string[] | null;
  subject: string | null;
  /** '' for a text-only template: Resend's html is always a string. */
  html: string;
  text: string | null;
  variables: Array<{
    key: string;
    type: VariableType;
    fallback_value: VariableValue | null;
    created_at: string;
    updated_at: string;
  }>;
  status: 'draft' | 'published';
  published_at: string | null;
  has_unpublished_versions: boolean;
  created_at: string;
  updated_at: string;
}

export const TEMPLATE_COLUMNS =
  'id, organization_id, name, alias, sender, reply_to, subject, html, text, variables, current_version_id, ' +
  'published_version_id, published_at, created_at, updated_at';

/** A template.* webhook event for the changed row (its data: id, name, created_at, updated_at, as other objects' events). */
export const templateEvent = (org: string, type: EventType) => ({
  org,
  type: `'${type}'::text`,
  data: `jsonb_build_object('id', changed.id, 'name', changed.name,
    'created_at', ${isoMillisSql('changed.created_at')}, 'updated_at', ${isoMillisSql('changed.updated_at')})`,
});

// An alias names a template in paths and sends in place of its id: never shaped like an id, so the two
// cannot be confused.
const ALIAS = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export async function createTemplate(
  db: Queryable,
  organizationId: string,
  input: TemplateInput & { name: string },
): Promise<{ id: string }> {
  const fields = checkedFields({
    name: input.name,
    alias: input.alias ?? null,
    from: input.from ?? null,
    reply_to: input.reply_to ?? null,
    subject: input.subject ?? null,
    html: input.html ?? null,
    text: input.text ?? null,
    variables: input.variables ?? [],
  });
  const now = await databaseNow(db);
  try {
    const { rows } = await db.query<{ id: string }>(
      withEvent(
        `INSERT INTO templates (organization_id, name, alias, sender, reply_to, subject, html, text, variables,
                                created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9::jsonb, $10, $10) RETURNING id, name, created_at, updated_at`,
        templateEvent('$1::uuid', 'template.created'),
      ),
      [
        organizationId,
        fields.name,
        fields.alias,
        fields.from,
        JSON.stringify(fields.reply_to),
        fields.subject,
        fields.html,
        fields.text,
        JSON.stringify(datedVariables(fields.variables, [], now)),
        now,
      ],
    );
    return { id: rows[0]!.id };
  } catch (error) {
    throw aliasTaken(error, fields.alias);
  }
}

/** Newest first, a page at a time (platform/db/keyset-page.ts). */
export async function listTemplates(
  db: Queryable,
  organizationId: string,
  page: PageRequest,
): Promise<Page<TemplateView>> {
  const listed = await keysetPage<Template>(
    db,
    { table: 'templates', columns: TEMPLATE_COLUMNS, organizationId, newestFirst: true },
    page,
  );
  return { ...listed, data: listed.data.map(toView) };
}

/** The condition that finds a template by `$1`, its id or its alias, within organization `$2`. */
export const byIdOrAlias = (idOrAlias: string, table = '') =>
  `${table}${isUuid(idOrAlias) ? 'id = $1::uuid' : 'alias = $1'} AND ${table}organization_id = $2`;

/** One of the organization's templates by id or alias, or undefined. */
export async function findTemplate(
  db: Queryable,
  organizationId: string,
  idOrAlias: string,
): Promise<Template | undefined> {
  const { rows } = await db.query<Template>(
    `SELECT ${TEMPLATE_COLUMNS} FROM templates WHERE ${byIdOrAlias(idOrAlias)}`,
    [idOrAlias, organizationId],
  );
  return rows[0];
}

export async function getTemplate(db: Queryable, organizationId: string, idOrAlias: string): Promise<TemplateView> {
  const template = await findTemplate(db, organizationId, idOrAlias);
  if (!template) throw notFound('Template');
  return toView(template);
}

/**
 * Applies the given fields to the version being edited; the others keep their values. The row is
 * locked while the merged template is checked, so two concurrent updates cannot together leave it
 * without both html and text. A change of content after a publish starts a new version; name and
 * alias only label the template and change no version.
 */
export async function updateTemplate(
  db: Database,
  organizationId: string,
  idOrAlias: string,
  changes: TemplateInput,
): Promise<{ id: string }> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<Template & { now: Date }>(
      `SELECT ${TEMPLATE_COLUMNS}, now() AS now FROM templates WHERE ${byIdOrAlias(idOrAlias)} FOR UPDATE`,
      [idOrAlias, organizationId],
    );
    const current = rows[0];
    if (!current) throw notFound('Template');
    const given = <K extends keyof TemplateInput>(key: K) => changes[key] !== undefined;
    const fields = checkedFields({
      name: changes.name ?? current.name,
      alias: given('alias') ? changes.alias! : current.alias,
      from: given('from') ? changes.from! : current.sender,
      reply_to: given('reply_to') ? changes.reply_to! : current.reply_to,
      subject: given('subject') ? changes.subject! : current.subject,
      html: given('html') ? changes.html! : current.html,
      text: given('text') ? changes.text! : current.text,
      variables: changes.variables ?? current.variables,
    });
    const variables = datedVariables(fields.variables, current.variables, new Date(current.now).toISOString());
    const content = (
      t: { subject: unknown; html: unknown; text: unknown; reply_to: unknown },
      from: unknown,
      vars: TemplateVariable[],
    ) =>
      JSON.stringify([
        t.subject,
        t.html,
        t.text,
        from,
        t.reply_to,
        vars.map(({ key, type, fallback_value }) => [key, type, fallback_value]),
      ]);
    const changed = content(fields, fields.from, variables) !== content(current, current.sender, current.variables);
    try {
      await tx.query(
        withEvent(
          `UPDATE templates SET name = $3, alias = $4, sender = $5, reply_to = $6::jsonb, subject = $7, html = $8,
                  text = $9, variables = $10::jsonb, updated_at = now(),
                  current_version_id = CASE WHEN $11::boolean AND current_version_id = published_version_id
                                            THEN gen_random_uuid() ELSE current_version_id END
            WHERE id = $1 AND organization_id = $2 RETURNING id, name, created_at, updated_at`,
          templateEvent('$2::uuid', 'template.updated'),
        ),
        [
          current.id,
          organizationId,
          fields.name,
          fields.alias,
          fields.from,
          JSON.stringify(fields.reply_to),
          fields.subject,
          fields.html,
          fields.text,
          JSON.stringify(variables),
          changed,
        ],
      );
    } catch (error) {
      throw aliasTaken(error, fields.alias);
    }
    return { id: current.id };
  });
}

export async function deleteTemplate(
  db: Queryable,
  organizationId: string,
  idOrAlias: string,
): Promise<{ id: string }> {
  const { rows } = await db.query<{ id: string }>(
    withEvent(
      `DELETE FROM templates WHERE ${byIdOrAlias(idOrAlias)} RETURNING id, name, created_at, updated_at`,
      templateEvent('$2::uuid', 'template.deleted'),
    ),
    [idOrAlias, organizationId],
  );
  if (rows.length === 0) throw notFound('Template');
  return { id: rows[0]!.id };
}

interface TemplateFields {
  name: string;
  alias: string | null;
  from: string | null;
  reply_to: string | string[] | null;
  subject: string | null;
  html: string | null;
  text: string | null;
  variables: TemplateVariableInput[];
}

interface CheckedFields extends Omit<TemplateFields, 'variables' | 'reply_to'> {
  reply_to: string[] | null;
  variables: TemplateVariable[];
}

/**
 * The rules beyond the request schema's shapes, on the template as it will be stored: sources that
 * parse, html or text present, addresses that parse, an alias of its form, well-formed variables.
 * Returns the fields as stored (addresses in their canonical form, empty ones as null).
 */
export function checkedFields(input: TemplateFields): CheckedFields {
  const { subject, html, text } = checkedSources(input, { requireBody: true });
  const alias = input.alias || null;
  if (alias !== null && (!ALIAS.test(alias) || isUuid(alias))) {
    throw new ServiceError(
      'validation_error',
      'An alias is 1 to 100 letters, digits, ".", "_" or "-", starting with a letter or digit, and not shaped like an id',
      'alias',
    );
  }
  const from = input.from ? formatMailbox(parseMailbox(input.from, 'from')) : null;
  const replyTo = asList(input.reply_to ?? undefined);
  if (replyTo.length > 50) {
    throw new ServiceError('validation_error', 'reply_to holds at most 50 addresses', 'reply_to');
  }
  const reply_to = replyTo.map((entry, i) =>
    formatMailbox(parseMailbox(entry, replyTo.length > 1 ? `reply_to.${i}` : 'reply_to')),
  );
  return {
    name: input.name,
    alias,
    from,
    reply_to: reply_to.length > 0 ? reply_to : null,
    subject,
    html,
    text,
    variables: checkedVariables(input.variables),
  };
}

/** The database's clock, which dates everything else a template stores: one reading for the row and its variables. */
async function databaseNow(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ now: Date }>('SELECT now() AS now');
  return new Date(rows[0]!.now).toISOString();
}

/** A unique violation on the alias as the caller's 409; any other error as it is. */
export function aliasTaken(error: unknown, alias: string | null): unknown {
  return isUniqueViolation(error)
    ? new ServiceError('conflict', `Another template of this organization has the alias ${alias}`, 'alias')
    : error;
}

const iso = (date: Date) => new Date(date).toISOString();

export function toView(template: Template): TemplateView {
  return {
    object: 'template',
    id: template.id,
    current_version_id: template.current_version_id,
    name: template.name,
    alias: template.alias,
    from: template.sender,
    reply_to: template.reply_to,
    subject: template.subject,
    html: template.html ?? '',
    text: template.text,
    variables: template.variables.map((variable) => ({
      key: variable.key,
      type: variable.type,
      fallback_value: variable.fallback_value ?? null,
      // Declarations stored before they were dated read as the template's own dates.
      created_at: variable.created_at ?? iso(template.created_at),
      updated_at: variable.updated_at ?? iso(template.updated_at),
    })),
    status: template.published_version_id === null ? 'draft' : 'published',
    published_at: template.published_at === null ? null : iso(template.published_at),
    has_unpublished_versions: template.current_version_id !== template.published_version_id,
    created_at: iso(template.created_at),
    updated_at: iso(template.updated_at),
  };
}
