import type Handlebars from 'handlebars';
import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { handlebars } from './template-syntax.ts';
import { resolveVariables } from './template-variables.ts';
import { findPublishedVersion, type PublishedVersion } from './template-versions.ts';

// A send renders the template's published version (never a draft saved since), with the values of its
// declared variables. Values are HTML-escaped in html only: subject and text are plain text.

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
 * Renders the published version of the organization's template for a send (`template: { id, variables }`
 * on POST /emails, id being the template's id or alias). Errors name the send's fields: template.id,
 * template.variables.<key>.
 */
export async function renderTemplate(
  db: Queryable,
  organizationId: string,
  ref: { id: string; variables?: Record<string, unknown> },
): Promise<RenderedTemplate> {
  return renderPublishedVersion(await findPublishedVersion(db, organizationId, ref.id), ref.variables ?? {});
}

/**
 * Renders a published version already read (findPublishedVersion) with a send's variables: a batch
 * reads each template once and renders it for every entry that uses it.
 */
export function renderPublishedVersion(
  version: PublishedVersion,
  variables: Record<string, unknown>,
): RenderedTemplate {
  const data = resolveVariables(version.variables, variables);
  return renderSources(version, data, (part, message) => ({
    message: `Template ${version.template_id} could not be rendered (${part}): ${message}`,
    field: 'template',
  }));
}

export type TemplatePart = 'subject' | 'html' | 'text';

/** The compiled sources kept hold at most this many characters of source in all ... */
const MAX_COMPILED_CHARS = 16 * 1024 * 1024;
/** ... and a source longer than this is compiled for each use, not kept. */
const MAX_KEPT_SOURCE_CHARS = 512 * 1024;
const compiledSources = new Map<string, Handlebars.TemplateDelegate>();
let compiledChars = 0;

/**
 * The source compiled, kept by its text: an update of a template is another text, so it takes effect at
 * once in every process, and a template sent many times is compiled once. The least recently used go
 * first when the sources kept grow past MAX_COMPILED_CHARS.
 */
function compiledSource(source: string, noEscape: boolean): Handlebars.TemplateDelegate {
  const key = `${noEscape ? 'plain' : 'html'}\u0000${source}`;
  const kept = compiledSources.get(key);
  if (kept) {
    // Used again: it moves to the end of the order of use.
    compiledSources.delete(key);
    compiledSources.set(key, kept);
    return kept;
  }
  const compiled = handlebars.compile(source, { strict: false, noEscape });
  if (key.length > MAX_KEPT_SOURCE_CHARS) return compiled;
  compiledSources.set(key, compiled);
  compiledChars += key.length;
  for (const oldest of compiledSources.keys()) {
    if (compiledChars <= MAX_COMPILED_CHARS) break;
    compiledSources.delete(oldest);
    compiledChars -= oldest.length;
  }
  return compiled;
}

/**
 * Renders subject, html and text with the values in `data`: the one rendering of a send and of a
 * preview (POST /templates/render). `describe` words a failure at render time and names its field.
 */
export function renderSources(
  sources: Record<TemplatePart, string | null>,
  data: Record<string, unknown>,
  describe: (part: TemplatePart, message: string) => { message: string; field: string },
): RenderedTemplate {
  const render = (part: TemplatePart, source: string | null) => {
    if (source === null) return null;
    try {
      return compiledSource(source, part !== 'html')(data, RUNTIME_OPTIONS);
    } catch (error) {
      // Runtime failures the save-time checks cannot foresee, such as {{#each}} without an argument.
      if (error instanceof handlebars.Exception) {
        const { message, field } = describe(part, error.message);
        throw new ServiceError('validation_error', message, field);
      }
      throw error;
    }
  };
  const subject = render('subject', sources.subject);
  return {
    // A variable could carry a line break into the Subject header: never let it start a new header.
    subject: subject === null ? null : subject.replace(/\r\n|[\r\n]/g, ' '),
    html: render('html', sources.html),
    text: render('text', sources.text),
  };
}

const PRINTABLE = Object.assign(Object.create(null), { [Symbol.toPrimitive]: () => 'the variables' }) as object;

/**
 * The variables a source prints ({{name}}) that `data` lacks, in order of appearance: Handlebars' strict
 * mode finds them. A variable only tested ({{#if name}}) or iterated may be left out.
 */
export function missingVariable(source: string, data: Record<string, unknown>): string | undefined {
  // Strict mode's error message prints the object searched: give it a way to print, under a key that
  // no template can name.
  const printable = Object.assign(Object.create(PRINTABLE), data) as Record<string, unknown>;
  try {
    handlebars.compile(source, { strict: true })(printable, RUNTIME_OPTIONS);
    return undefined;
  } catch (error) {
    // Anything else (strict mode looking inside a string value, {{name.length}}) is left to the
    // rendering itself, which reports what fails as a render error.
    if (!(error instanceof handlebars.Exception)) return undefined;
    return /^"([^"]*)" not defined/.exec(error.message)?.[1];
  }
}
