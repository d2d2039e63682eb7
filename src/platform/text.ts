// Control characters (C0 and DEL) end header lines or hide what a person reads; CR and LF above all.

function isControl(code: number, allowTab: boolean): boolean {
  return (code < 0x20 && !(allowTab && code === 0x09)) || code === 0x7f;
}

/** Whether the text has a control character (a tab is allowed when `allowTab`, as in header values). */
export function hasControlCharacter(text: string, { allowTab = false } = {}): boolean {
  for (let i = 0; i < text.length; i++) if (isControl(text.charCodeAt(i), allowTab)) return true;
  return false;
}

/** The text without its control characters. */
export function withoutControlCharacters(text: string): string {
  let out = '';
  for (const char of text) if (!isControl(char.charCodeAt(0), false)) out += char;
  return out;
}

/**
 * Without control characters (a NUL cannot be stored in jsonb), at most `max` UTF-16 units, never
 * splitting a surrogate pair (a lone surrogate cannot be stored either). For text from outside
 * (SMTP answers, reports) kept in the timeline.
 */
export function cappedText(text: string, max: number): string {
  const clean = withoutControlCharacters(text);
  if (clean.length <= max) return clean;
  const highSurrogate = /[\uD800-\uDBFF]/.test(clean.charAt(max - 1));
  return clean.slice(0, highSurrogate ? max - 1 : max);
}

/** U+0000, or a surrogate without its pair: text PostgreSQL cannot store (nor JSON carry faithfully). */
// eslint-disable-next-line no-control-regex -- U+0000 is exactly what is looked for
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The text with each character PostgreSQL cannot store replaced by U+FFFD (for text from outside kept as it came). */
export function storableText(text: string): string {
  return text.replace(new RegExp(UNSTORABLE.source, 'g'), '\uFFFD');
}

/**
 * The dotted path (`tags.0.name`) of the first string, or object key, at any depth of `value` that holds
 * a character that cannot be stored; undefined when there is none. `path` names `value` itself.
 */
export function findUnstorableText(value: unknown, path = ''): string | undefined {
  const at = (key: string | number) => (path === '' ? String(key) : `${path}.${key}`);
  if (typeof value === 'string') return UNSTORABLE.test(value) ? path : undefined;
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = findUnstorableText(item, at(index));
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (UNSTORABLE.test(key)) return at(key);
      const found = findUnstorableText(item, at(key));
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
