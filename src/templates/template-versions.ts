import { withEvent } from '../webhooks/fan-out.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { TEMPLATE_COLUMNS, byIdOrAlias, templateEvent, type Template } from './templates.ts';
import type { TemplateVariable } from './template-variables.ts';

// Publishing, duplicating, and the version a send renders. A template's row is the version being
// edited; publishing copies it into template_versions as the next numbered version and points
// published_version_id at it. Sends read only that copy, so saving a draft never changes what
// recipients get, and a template never published cannot be sent.

/** What a send renders: the published version's content and sender defaults. */
export interface PublishedVersion {
  template_id: string;
  version_id: string;
  subject: string | null;
  html: string | null;
  text: string | null;
  variables: TemplateVariable[];
  sender: string | null;
  reply_to: string[] | null;
}

/**
 * Makes the version being edited the published one. Publishing what is already published changes
 * nothing (the retry of a publish is harmless) and answers the same.
 */
export async function publishTemplate(
  db: Database,
  organizationId: string,
  idOrAlias: string,
): Promise<{ id: string }> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<Template>(
      `SELECT ${TEMPLATE_COLUMNS} FROM templates WHERE ${byIdOrAlias(idOrAlias)} FOR UPDATE`,
      [idOrAlias, organizationId],
    );
    const template = rows[0];
    if (!template) throw notFound('Template');
    if (template.current_version_id === template.published_version_id) return { id: template.id };
    await tx.query(
      `INSERT INTO template_versions (id, template_id, number, subject, html, text, variables, sender, reply_to)
       SELECT current_version_id, id,
              (SELECT coalesce(max(number), 0) + 1 FROM template_versions WHERE template_id = $1),
              subject, html, text, variables, sender, reply_to
         FROM templates WHERE id = $1`,
      [template.id],
    );
    await tx.query(
      withEvent(
        `UPDATE templates SET published_version_id = current_version_id, published_at = now(), updated_at = now()
          WHERE id = $1 AND organization_id = $2 RETURNING id, name, created_at, updated_at`,
        templateEvent('$2::uuid', 'template.updated'),
      ),
      [template.id, organizationId],
    );
    return { id: template.id };
  });
}

/**
 * A new draft template with the content and sender defaults of the version being edited, named
 * "<name> (copy)" and without an alias (aliases are unique).
 */
export async function duplicateTemplate(
  db: Queryable,
  organizationId: string,
  idOrAlias: string,
): Promise<{ id: string }> {
  const { rows } = await db.query<{ id: string }>(
    withEvent(
      `INSERT INTO templates (organization_id, name, sender, reply_to, subject, html, text, variables)
       SELECT organization_id, left(name, 193) || ' (copy)', sender, reply_to, subject, html, text,
              -- The copy declares its variables when it is made: their dates are the copy's own.
              coalesce((SELECT jsonb_agg(v - 'created_at' - 'updated_at' ORDER BY o)
                          FROM jsonb_array_elements(variables) WITH ORDINALITY AS e (v, o)), '[]'::jsonb)
         FROM templates WHERE ${byIdOrAlias(idOrAlias)}
       RETURNING id, name, created_at, updated_at`,
      templateEvent('$2::uuid', 'template.created'),
    ),
    [idOrAlias, organizationId],
  );
  if (rows.length === 0) throw notFound('Template');
  return { id: rows[0]!.id };
}

/**
 * The published version of the organization's template named by id or alias, for a send. A template
 * that does not exist, and one never published, are the send's 400 template_not_found at template.id.
 */
export async function findPublishedVersion(
  db: Queryable,
  organizationId: string,
  idOrAlias: string,
): Promise<PublishedVersion> {
  const { rows } = await db.query<PublishedVersion & { published: boolean }>(
    `SELECT t.id AS template_id, v.id AS version_id, v.subject, v.html, v.text, v.variables, v.sender, v.reply_to,
            v.id IS NOT NULL AS published
       FROM templates t LEFT JOIN template_versions v ON v.id = t.published_version_id
      WHERE ${byIdOrAlias(idOrAlias, 't.')}`,
    [idOrAlias, organizationId],
  );
  const found = rows[0];
  if (!found) throw new ServiceError('template_not_found', `Template ${idOrAlias} not found`, 'template.id');
  if (!found.published) {
    throw new ServiceError(
      'template_not_found',
      `Template ${idOrAlias} has never been published: publish it first with ` +
        `POST /templates/${found.template_id}/publish, or Publish on its page in the dashboard`,
      'template.id',
    );
  }
  return found;
}
