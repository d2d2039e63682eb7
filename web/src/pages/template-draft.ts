import { type Template, type VariableType } from './TemplatesPage.tsx';

// A template as its page's form edits it: the draft, its declared variables, and the sample values a
// preview is rendered with.

/** A declared variable as the form edits it: the fallback as typed ('' = none). */
export interface VariableRow {
  key: string;
  type: VariableType;
  fallback: string;
}

export interface Draft {
  name: string;
  alias: string;
  from: string;
  /** Reply-To addresses, separated by commas. */
  replyTo: string;
  subject: string;
  html: string;
  text: string;
  variables: VariableRow[];
}

export interface Rendered {
  subject: string | null;
  html: string | null;
  text: string | null;
}

export const EMPTY: Draft = {
  name: '',
  alias: '',
  from: '',
  replyTo: '',
  subject: '',
  html: '<p>Hello {{name}},</p>\n<p>…</p>',
  text: 'Hello {{name}},\n\n…',
  variables: [{ key: 'name', type: 'string', fallback: 'there' }],
};

export function draftOf(template: Template): Draft {
  return {
    name: template.name,
    alias: template.alias ?? '',
    from: template.from ?? '',
    replyTo: (template.reply_to ?? []).join(', '),
    subject: template.subject ?? '',
    html: template.html,
    text: template.text ?? '',
    variables: template.variables.map((variable) => ({
      key: variable.key,
      type: variable.type,
      fallback:
        variable.fallback_value === null
          ? ''
          : typeof variable.fallback_value === 'object'
            ? JSON.stringify(variable.fallback_value)
            : String(variable.fallback_value),
    })),
  };
}

/**
 * A fallback as the API takes it (null when empty): a number, a boolean, or JSON for an object or a
 * list, when the text reads as one; otherwise the text, which the API refuses next to the row.
 */
export function fallbackValue(row: VariableRow): unknown {
  if (row.fallback === '') return null;
  const text = row.fallback.trim();
  if (row.type === 'number' && text !== '' && Number.isFinite(Number(text))) return Number(text);
  if (row.type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  if (row.type === 'object' || row.type === 'list') {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return row.fallback;
    }
  }
  return row.fallback;
}

/** A row left blank (no key, no fallback) is not a variable: it is neither saved nor an error. */
export const isBlank = (row: VariableRow) => row.key.trim() === '' && row.fallback.trim() === '';

/** Sample values to start the preview with: each declared variable's fallback, else an example. */
export function sampleOf(variables: VariableRow[]): string {
  const sample: Record<string, string | number> = {};
  for (const row of variables) {
    if (!row.key || (row.type !== 'string' && row.type !== 'number')) continue;
    const fallback = fallbackValue(row);
    sample[row.key] =
      typeof fallback === 'string' || typeof fallback === 'number'
        ? fallback
        : row.type === 'number'
          ? 1
          : `Example ${row.key}`;
  }
  return JSON.stringify(sample, null, 2);
}

/** The sample as an object of values, or the reason it is not one. */
export function parseSample(text: string): { values: Record<string, unknown> } | { error: string } {
  if (text.trim() === '') return { values: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { error: `Not valid JSON: ${error instanceof Error ? error.message : 'cannot be read'}` };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { error: 'Give the values as a JSON object, e.g. {"name": "Ann"}.' };
  }
  return { values: parsed as Record<string, unknown> };
}
