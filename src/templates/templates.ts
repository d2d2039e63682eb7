import { withEvent } from '../webhooks/fan-out.ts';
import type { EventType } from '../webhooks/event-types.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import { checkedSources } from './template-syntax.ts';
import {
  checkedVariables,
  type TemplateVariable,
  type TemplateVariableInput,
  type VariableType,
} from './template-variables.ts';

// A template is Handlebars source (subject, html, text) plus the variables it declares, stored per
// organization. Sources are parsed when saved (template-syntax.ts), so a syntax error is the author's
// 400, not a sender's; a send renders the stored template (render-template.ts).

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

const COLUMNS = 'id, organization_id, name, subject, html, text, variables, created_at, updated_at';

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

/** Newest first, a page at a time (platform/db/keyset-page.ts). */
export async function listTemplates(
  db: Queryable,
  organizationId: string,
  page: PageRequest,
): Promise<Page<TemplateView>> {
  const listed = await keysetPage<Template>(
    db,
    { table: 'templates', columns: COLUMNS, organizationId, newestFirst: true },
    page,
  );
  return { ...listed, data: listed.data.map(toView) };
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
  const { subject, html, text } = checkedSources(input, { requireBody: true });
  return { name: input.name, subject, html, text, variables: checkedVariables(input.variables) };
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
