import type Handlebars from 'handlebars';
import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { handlebars } from './template-syntax.ts';
import { resolveVariables } from './template-variables.ts';
import { findTemplate } from './templates.ts';

// A send renders the template as stored at that moment, with the values of its declared variables.
// Values are HTML-escaped in html only: subject and text are plain text.

export interface RenderedTemplate {
  subject: string | null;
  html: string | null;
  text: string | null;
}

// Explicitly false (also Handlebars' default since 4.6): {{constructor}} and the like resolve to nothing.
// Saying so also silences Handlebars' console warning for each denied property.
const RUNTIME_OPTIONS: Handlebars.RuntimeOptions = {
  allowProtoPropertiesByDefault: false,
  allowProtoMethodsByDefault: false,
};

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
