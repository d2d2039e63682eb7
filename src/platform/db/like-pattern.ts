/** Text to find as itself inside a LIKE pattern: its `%`, `_` and `\\` are not wildcards. */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
