import { ServiceError } from '../platform/errors.ts';

// The rule trees of `condition` steps and of a wait's `filter_rule`: a `rule` compares one field with a
// value; `and` and `or` combine rules. A field names what it reads: `contact.<field>` (email,
// first_name, last_name, unsubscribed) or `contact.properties.<key>` reads the run's contact; `event.<key>`
// (or a bare `<key>`) reads the event's payload, dots going into nested objects.

export const OPERATORS = [
  'eq',
  'neq',
  'gt',
  'gte',
  'lt',
  'lte',
  'contains',
  'starts_with',
  'ends_with',
  'exists',
  'is_empty',
] as const;
export type Operator = (typeof OPERATORS)[number];

export type ConditionRule =
  | { type: 'rule'; field: string; operator: Operator; value?: string | number | boolean | null }
  | { type: 'and' | 'or'; rules: ConditionRule[] };

/** What a rule reads: the event's payload and the contact. */
export interface RuleContext {
  event: Record<string, unknown>;
  contact: {
    email: string;
    first_name: string | null;
    last_name: string | null;
    unsubscribed: boolean;
    properties: Record<string, unknown>;
  } | null;
}

const MAX_DEPTH = 10;
const NUMERIC: readonly Operator[] = ['gt', 'gte', 'lt', 'lte'];
const TEXTUAL: readonly Operator[] = ['contains', 'starts_with', 'ends_with'];
const UNARY: readonly Operator[] = ['exists', 'is_empty'];

const invalid = (path: string, message: string) => new ServiceError('validation_error', `${path}: ${message}`, path);
const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Checks a rule tree; a 400 naming the field at fault, under `path` (e.g. `config`). */
export function checkRule(rule: unknown, path: string, depth = 0): ConditionRule {
  if (!isObject(rule)) throw invalid(path, 'must be a rule: an object with type "rule", "and" or "or"');
  if (depth > MAX_DEPTH) throw invalid(path, `rules nest at most ${MAX_DEPTH} deep`);
  if (rule.type === 'and' || rule.type === 'or') {
    if (!Array.isArray(rule.rules) || rule.rules.length === 0) {
      throw invalid(`${path}.rules`, `must be a non-empty array of rules`);
    }
    return {
      type: rule.type,
      rules: rule.rules.map((inner, i) => checkRule(inner, `${path}.rules[${i}]`, depth + 1)),
    };
  }
  if (rule.type !== 'rule') throw invalid(`${path}.type`, 'must be "rule", "and" or "or"');
  if (typeof rule.field !== 'string' || rule.field.trim() === '') {
    throw invalid(`${path}.field`, 'must name a field, e.g. "event.plan" or "contact.first_name"');
  }
  const operator = rule.operator;
  if (typeof operator !== 'string' || !(OPERATORS as readonly string[]).includes(operator)) {
    throw invalid(`${path}.operator`, `unknown operator ${JSON.stringify(operator)}: one of ${OPERATORS.join(', ')}`);
  }
  const op = operator as Operator;
  const value = rule.value;
  if (UNARY.includes(op)) return { type: 'rule', field: rule.field, operator: op };
  if (NUMERIC.includes(op) && typeof value !== 'number') {
    throw invalid(`${path}.value`, `operator ${op} compares with a number`);
  }
  if (TEXTUAL.includes(op) && typeof value !== 'string') {
    throw invalid(`${path}.value`, `operator ${op} compares with a string`);
  }
  if ((op === 'eq' || op === 'neq') && !(value === null || ['string', 'number', 'boolean'].includes(typeof value))) {
    throw invalid(`${path}.value`, `operator ${op} compares with a string, number, boolean or null`);
  }
  return { type: 'rule', field: rule.field, operator: op, value: value as string | number | boolean | null };
}

/** A `{ "var": "<field>" }` value: what the field reads, put in its place when a step runs. */
export const isVariable = (value: unknown): value is { var: string } =>
  isObject(value) && Object.keys(value).length === 1 && typeof value.var === 'string' && value.var.trim() !== '';

/** The value a field names in the context; undefined when there is none. */
export function fieldValue(field: string, context: RuleContext): unknown {
  const parts = field.split('.');
  let value: unknown;
  if (parts[0] === 'contact') {
    value = context.contact;
    parts.shift();
  } else {
    value = context.event;
    if (parts[0] === 'event') parts.shift();
  }
  for (const part of parts) {
    if (!isObject(value)) return undefined;
    value = value[part];
  }
  return value;
}

/** Whether the rule holds in the context. A comparison with a missing or mistyped field does not. */
export function ruleHolds(rule: ConditionRule, context: RuleContext): boolean {
  if (rule.type !== 'rule') {
    const holds = (inner: ConditionRule) => ruleHolds(inner, context);
    return rule.type === 'and' ? rule.rules.every(holds) : rule.rules.some(holds);
  }
  const actual = fieldValue(rule.field, context);
  const expected = rule.value;
  switch (rule.operator) {
    case 'exists':
      return actual !== undefined && actual !== null;
    case 'is_empty':
      return (
        actual === undefined ||
        actual === null ||
        actual === '' ||
        (Array.isArray(actual) && actual.length === 0) ||
        (isObject(actual) && Object.keys(actual).length === 0)
      );
    case 'eq':
      return (actual ?? null) === expected;
    case 'neq':
      return (actual ?? null) !== expected;
    case 'gt':
      return typeof actual === 'number' && actual > (expected as number);
    case 'gte':
      return typeof actual === 'number' && actual >= (expected as number);
    case 'lt':
      return typeof actual === 'number' && actual < (expected as number);
    case 'lte':
      return typeof actual === 'number' && actual <= (expected as number);
    case 'contains':
      if (Array.isArray(actual)) return actual.includes(expected);
      return typeof actual === 'string' && actual.includes(expected as string);
    case 'starts_with':
      return typeof actual === 'string' && actual.startsWith(expected as string);
    case 'ends_with':
      return typeof actual === 'string' && actual.endsWith(expected as string);
  }
}
