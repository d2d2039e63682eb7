import { Script, createContext } from 'node:vm';
import { ServiceError } from '../platform/errors.ts';

// The regular expressions of inbound routes (a `regex` recipient, a header condition) are written by
// users and run against addresses and header values from anyone on the internet, so a pattern that
// backtracks catastrophically must not stall the listener. Two guards: a pattern is refused when it is
// long or has the shapes that backtrack without bound (a repeated group holding a repetition or an
// alternation, a back-reference, more than a few repetitions in all), and every evaluation runs under a
// time limit, past which the pattern counts as not matching. Patterns compare without case.

export const MAX_PATTERN_LENGTH = 200;
/** Repetitions (`*`, `+`, `{n,m}`) in one pattern: k of them over n characters cost up to n^k steps. */
const MAX_REPETITIONS = 3;
/** What one evaluation may take before it counts as no match. */
const EVALUATION_LIMIT_MS = 50;
/** Header values are tried on their first characters only; addresses are at most this long anyway. */
export const MAX_SUBJECT_LENGTH = 1000;

/** Compiles a user's pattern, or refuses it with a 400 naming `field`. `whole`: anchored at both ends. */
export function compilePattern(source: string, field: string, whole: boolean): RegExp {
  const refuse = (why: string) => new ServiceError('validation_error', `${field}: ${why}`, field);
  if (source.length === 0) throw refuse('the pattern is empty');
  if (source.length > MAX_PATTERN_LENGTH) throw refuse(`a pattern is at most ${MAX_PATTERN_LENGTH} characters`);
  let compiled: RegExp;
  try {
    // The pattern alone first: `a)|(.*` is not one, but wrapped it would compile and match anything.
    compiled = new RegExp(source, 'i');
    if (whole) compiled = new RegExp(`^(?:${source})$`, 'i');
  } catch (error) {
    throw refuse(`not a valid regular expression (${(error as Error).message})`);
  }
  const risk = backtrackingRisk(source);
  if (risk) throw refuse(risk);
  return compiled;
}

/**
 * Why a pattern could backtrack without bound, or undefined. A scan of the pattern's structure: escapes
 * and character classes are skipped, groups are tracked on a stack.
 */
function backtrackingRisk(source: string): string | undefined {
  // Per open group: whether it holds a repetition, whether it holds an alternation.
  const groups: Array<{ repeats: boolean; alternates: boolean }> = [];
  let repetitions = 0;
  let closed: { repeats: boolean; alternates: boolean } | undefined;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    const justClosed = closed;
    closed = undefined;
    if (c === '\\') {
      const next = source[i + 1] ?? '';
      if (/[1-9]/.test(next) || next === 'k') return 'back-references are not allowed';
      i += 1;
      continue;
    }
    if (c === '[') {
      // To the closing bracket, skipping escaped characters.
      for (i += 1; i < source.length && source[i] !== ']'; i++) if (source[i] === '\\') i += 1;
      continue;
    }
    if (c === '(') {
      groups.push({ repeats: false, alternates: false });
      continue;
    }
    if (c === ')') {
      const group = groups.pop();
      if (group) {
        closed = group;
        const outer = groups.at(-1);
        if (outer && group.repeats) outer.repeats = true;
      }
      continue;
    }
    if (c === '|') {
      const current = groups.at(-1);
      if (current) current.alternates = true;
      continue;
    }
    const repeats = c === '*' || c === '+' || (c === '{' && /^\{\d+(,\d*)?\}/.test(source.slice(i)));
    if (!repeats) continue;
    if (justClosed && (justClosed.repeats || justClosed.alternates)) {
      return 'a repeated group may not itself hold a repetition or an alternation (it can backtrack without bound)';
    }
    repetitions += 1;
    if (repetitions > MAX_REPETITIONS) return `at most ${MAX_REPETITIONS} repetitions (*, +, {n,m}) in one pattern`;
    const current = groups.at(-1);
    if (current) current.repeats = true;
    if (c === '{') i = source.indexOf('}', i);
  }
  return undefined;
}

// One context for every evaluation: the pattern and the text are handed in, and the time limit stops
// the match itself (V8 interrupts a running regular expression).
const context = createContext({ pattern: /$^/, subject: '' });
const evaluate = new Script('pattern.test(subject)');

/** Whether `pattern` matches `subject` (its first MAX_SUBJECT_LENGTH characters) within the time limit. */
export function testPattern(pattern: RegExp, subject: string): boolean {
  if (typeof subject !== 'string') return false;
  context.pattern = pattern;
  context.subject = subject.slice(0, MAX_SUBJECT_LENGTH);
  try {
    return evaluate.runInContext(context, { timeout: EVALUATION_LIMIT_MS }) === true;
  } catch {
    return false;
  } finally {
    context.subject = '';
  }
}
