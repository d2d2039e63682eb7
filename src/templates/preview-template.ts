import { ServiceError } from '../platform/errors.ts';
import { missingVariable, renderSources, type RenderedTemplate, type TemplatePart } from './render-template.ts';
import { checkedSources } from './template-syntax.ts';
import { describe, invalidVariableKey, isOfType, isVariableKey } from './template-variables.ts';

// POST /templates/render: sources and values in, the rendered parts out, nothing stored. The sources get
// the checks a saved template gets and are rendered by the same code as a send (renderSources). With no
// declared variables to go by, a variable the sources print ({{name}}) must be given a value; one only
// tested ({{#if name}}) may be left out. Values are strings or numbers, as a send's.

export interface TemplatePreviewInput {
  subject?: string;
  html?: string;
  text?: string;
  variables?: Record<string, unknown>;
}

const PARTS: TemplatePart[] = ['subject', 'html', 'text'];

export function renderTemplatePreview(input: TemplatePreviewInput): RenderedTemplate {
  const sources = checkedSources(input, { requireBody: false });

  // No prototype: the sources see the given variables and nothing else.
  const data: Record<string, unknown> = Object.create(null);
  for (const [key, value] of Object.entries(input.variables ?? {})) {
    const field = `variables.${key}`;
    if (!isVariableKey(key)) throw invalidVariableKey(key, field);
    if (!isOfType(value, 'string') && !isOfType(value, 'number')) {
      throw new ServiceError(
        'validation_error',
        `Variable ${key} must be a string or a number, not ${describe(value)}`,
        field,
      );
    }
    data[key] = value;
  }

  for (const part of PARTS) {
    const source = sources[part];
    const missing = source === null ? undefined : missingVariable(source, data);
    if (missing !== undefined) {
      throw new ServiceError('validation_error', `Missing template variable in ${part}: ${missing}`, part);
    }
  }
  return renderSources(sources, data, (part, message) => ({
    message: `Could not render ${part}: ${message}`,
    field: part,
  }));
}
