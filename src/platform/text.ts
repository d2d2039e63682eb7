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
  // Almost all text is storable: one test, and no new string, in that case.
  return UNSTORABLE.test(text) ? text.replace(UNSTORABLE_ALL, '\uFFFD') : text;
}
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

/**
 * The dotted path (`tags.0.name`) of the first string, or object key, at any depth of `value` that holds
 * a character that cannot be stored; undefined when there is none. `path` names `value` itself. First
 * in document order: an object's key is checked right before its own value, and that value whole before
 * the next key. An explicit stack, not recursion: a value nested however deep cannot exhaust the call stack.
 */
export function findUnstorableText(value: unknown, path = ''): string | undefined {
  const at = (parent: string, key: string | number) => (parent === '' ? String(key) : `${parent}.${key}`);
  // Depth first: children are pushed last-first so the first one is popped first, and a key (a string,
  // named by the same path as its value) is pushed after its value so that it is checked before it.
  const stack: Array<{ value: unknown; path: string }> = [{ value, path }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { value: item, path: where } = next;
    if (typeof item === 'string') {
      if (UNSTORABLE.test(item)) return where;
    } else if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--) stack.push({ value: item[i], path: at(where, i) });
    } else if (item !== null && typeof item === 'object') {
      const entries = Object.entries(item);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!;
        stack.push({ value: child, path: at(where, key) });
        stack.push({ value: key, path: at(where, key) });
      }
    }
  }
  return undefined;
}
