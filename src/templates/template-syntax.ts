import Handlebars from 'handlebars';
import { ServiceError } from '../platform/errors.ts';

// The Handlebars a template may use, checked when it is saved so that a syntax error is the author's 400,
// not a sender's: no partials, no decorators, and only the built-in helpers.

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
export const handlebars = Handlebars.create();
handlebars.registerHelper('log', () => undefined);

/** A template's sources, empty ones as null. */
export interface TemplateSources {
  subject: string | null;
  html: string | null;
  text: string | null;
}

/**
 * The checks every source gets, saved or only rendered: a subject on one line, html or text present when
 * `requireBody` (a saved template), each source within the Handlebars this environment allows. Returns
 * the sources with empty ones as null.
 */
export function checkedSources(
  input: { subject?: string | null; html?: string | null; text?: string | null },
  { requireBody }: { requireBody: boolean },
): TemplateSources {
  const sources = { subject: input.subject || null, html: input.html || null, text: input.text || null };
  if (sources.subject !== null && /[\r\n]/.test(sources.subject)) {
    throw new ServiceError('validation_error', 'subject must not contain line breaks', 'subject');
  }
  if (requireBody && sources.html === null && sources.text === null) {
    throw new ServiceError('missing_required_field', 'Missing required field: html or text', 'html');
  }
  for (const part of ['subject', 'html', 'text'] as const) {
    const source = sources[part];
    if (source !== null) checkSource(part, source);
  }
  return sources;
}

/** Parses one source and refuses what could only fail when rendered: partials, decorators, unknown helpers. */
export function checkSource(field: 'subject' | 'html' | 'text', source: string): void {
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
