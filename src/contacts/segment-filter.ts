import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { PROPERTY_KEY, PROPERTY_STRING_MAX, type PropertyType } from './contact-properties.ts';

// A segment's `filter` (Resend's segment field, whose document says only "filter conditions"): a rule
// tree in the shape Resend's automations use for their conditions. A node is a group
// `{ type: 'and' | 'or', rules: [...] }`, a negation `{ type: 'not', rule }`, or a rule
// `{ type: 'rule', field, operator, value }` on one of the contact's fields, one of the organization's
// contact properties (its fallback counting for contacts without a value) or one of its topics (the
// contact's effective subscription: their choice, else the topic's default). docs/audience.md has the
// grammar. A filter is checked twice when written: its shape here (parseSegmentFilter), then what it
// names against the organization (checkFilterReferences). It is stored as given and evaluated in SQL
// whenever the segment's contacts are asked for (segment-filter-sql.ts), so a segment's audience is
// always today's.

export const FILTER_OPERATORS = [
  'eq',
  'neq',
  'contains',
  'not_contains',
  'starts_with',
  'ends_with',
  'gt',
  'gte',
  'lt',
  'lte',
  'is_set',
  'is_not_set',
  'in',
] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];
export type FilterScalar = string | number | boolean;

export interface FilterRule {
  type: 'rule';
  field: string;
  operator: FilterOperator;
  value?: FilterScalar | FilterScalar[];
}
export interface FilterGroup {
  type: 'and' | 'or';
  rules: FilterNode[];
}
export interface FilterNot {
  type: 'not';
  rule: FilterNode;
}
export type FilterNode = FilterRule | FilterGroup | FilterNot;

/** A parsed, checked filter (kept as given, in segments.filter). */
export type SegmentFilter = FilterNode;

/** Rules in one group. */
export const GROUP_RULES_MAX = 50;
/** Groups (and, or, not) nested in one another, the outermost counting as the first. */
export const NESTING_MAX = 5;
/** Rules in the whole filter, so that one filter stays one modest SQL condition. */
export const FILTER_RULES_MAX = 200;
/** Values of an `in` rule. */
export const IN_VALUES_MAX = 100;

type ValueKind = 'email' | 'string' | 'number' | 'boolean' | 'timestamp' | 'subscription';

const STRING_OPERATORS: FilterOperator[] = ['eq', 'neq', 'contains', 'not_contains', 'starts_with', 'ends_with', 'in'];
const ORDER_OPERATORS: FilterOperator[] = ['gt', 'gte', 'lt', 'lte'];
const PRESENCE_OPERATORS: FilterOperator[] = ['is_set', 'is_not_set'];

/** What each kind of field may be compared with. */
const OPERATORS: Record<ValueKind, FilterOperator[]> = {
  email: STRING_OPERATORS,
  string: [...STRING_OPERATORS, ...PRESENCE_OPERATORS],
  number: ['eq', 'neq', ...ORDER_OPERATORS, 'in', ...PRESENCE_OPERATORS],
  boolean: ['eq', 'neq'],
  timestamp: ORDER_OPERATORS,
  subscription: ['eq', 'neq', 'in'],
};

const CONTACT_FIELDS: Record<string, ValueKind> = {
  email: 'email',
  first_name: 'string',
  last_name: 'string',
  unsubscribed: 'boolean',
  created_at: 'timestamp',
};

/**
 * A date (midnight UTC) or a date and time with Z or an offset: never a time read in the server's zone.
 * Groups: year, month, day, hour, minute, second, fraction, Z or the offset's sign, hours and minutes.
 */
const TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?(?:(Z)|([+-])(\d{2}):?(\d{2})))?$/i;

/** The widest offset a timestamp may carry (the zones in use run from -12:00 to +14:00). */
const OFFSET_MAX_MINUTES = 14 * 60;

const isLeapYear = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * A TIMESTAMP in its one canonical form (`2026-01-31T09:00:00.5+02:00`: date, time with seconds, the
 * fraction as given, the offset with a colon, `+00:00` for Z and for a date alone), which PostgreSQL
 * reads as the instant checked here; undefined when it is not one. The year runs from 0001 to 9999
 * (PostgreSQL refuses year 0), the day exists in its month (2026-02-30 is no day, not March 2), the time
 * of day from 00:00:00 to 23:59:59, and the offset within ±14:00, the zones in use (PostgreSQL refuses
 * one past ±15:59). The offset is kept rather than the instant written in UTC, which could fall in year
 * 0 (0001-01-01T00:00:00+01:00) or in year 10000.
 */
export function canonicalTimestamp(value: string): string | undefined {
  const parts = TIMESTAMP.exec(value);
  if (parts === null) return undefined;
  const [
    ,
    year,
    month,
    day,
    hour = '00',
    minute = '00',
    second = '00',
    fraction,
    zulu,
    sign,
    offsetHours,
    offsetMinutes,
  ] = parts;
  const [y, m, d] = [Number(year), Number(month), Number(day)];
  if (y < 1 || m < 1 || m > 12 || d < 1) return undefined;
  if (d > (m === 2 && isLeapYear(y) ? 29 : DAYS_IN_MONTH[m - 1]!)) return undefined;
  if (Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) return undefined;
  let offset = '+00:00';
  if (zulu === undefined && sign !== undefined) {
    if (Number(offsetMinutes) > 59 || Number(offsetHours) * 60 + Number(offsetMinutes) > OFFSET_MAX_MINUTES) {
      return undefined;
    }
    offset = `${sign}${offsetHours}:${offsetMinutes}`;
  }
  return `${year}-${month}-${day}T${hour}:${minute}:${second}${fraction === undefined ? '' : `.${fraction}`}${offset}`;
}

const refuse = (field: string, why: string): never => {
  throw new ServiceError('validation_error', `${field}: ${why}`, field);
};

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** What a rule's field names: a contact field, a property (by key) or a topic (by id). */
export type Target =
  { on: 'contact'; name: string; kind: ValueKind } | { on: 'property'; key: string } | { on: 'topic'; id: string };

export function targetOf(field: string): Target | undefined {
  const kind = CONTACT_FIELDS[field];
  if (kind !== undefined) return { on: 'contact', name: field, kind };
  if (field.startsWith('properties.')) {
    const key = field.slice('properties.'.length);
    return PROPERTY_KEY.test(key) ? { on: 'property', key } : undefined;
  }
  if (field.startsWith('topics.')) {
    const id = field.slice('topics.'.length);
    return isUuid(id) ? { on: 'topic', id: id.toLowerCase() } : undefined;
  }
  return undefined;
}

/**
 * The type a property rule compares with, read from its operator and value: what the property must be.
 * Undefined for is_set and is_not_set, which hold for a property of either type.
 */
export function propertyTypeOf(rule: FilterRule): PropertyType | undefined {
  if (PRESENCE_OPERATORS.includes(rule.operator)) return undefined;
  if (ORDER_OPERATORS.includes(rule.operator)) return 'number';
  const first = Array.isArray(rule.value) ? rule.value[0] : rule.value;
  return typeof first === 'number' ? 'number' : 'string';
}

/** Checks a filter as given to POST/PATCH /segments; a 400 on `field` says what is wrong. */
export function parseSegmentFilter(value: unknown, field: string): SegmentFilter {
  let rules = 0;
  const node = (given: unknown, path: string, depth: number): FilterNode => {
    if (!isObject(given)) return refuse(path, 'must be an object: a rule, or an and, or or not group');
    const type = given.type;
    if (type !== 'rule' && type !== 'and' && type !== 'or' && type !== 'not') {
      return refuse(path, 'needs a type: rule, and, or or not');
    }
    const allowed =
      type === 'rule' ? ['type', 'field', 'operator', 'value'] : type === 'not' ? ['type', 'rule'] : ['type', 'rules'];
    const unknown = Object.keys(given).find((key) => !allowed.includes(key));
    if (unknown !== undefined) return refuse(`${path}.${unknown}`, `a ${type} node has only ${allowed.join(', ')}`);
    if (type === 'rule') {
      rules += 1;
      if (rules > FILTER_RULES_MAX) return refuse(path, `a filter has at most ${FILTER_RULES_MAX} rules in all`);
      return parseRule(given, path);
    }
    if (depth > NESTING_MAX) return refuse(path, `groups nest at most ${NESTING_MAX} deep`);
    if (type === 'not') {
      if (given.rule === undefined) return refuse(`${path}.rule`, 'a not node needs the rule it negates');
      return { type, rule: node(given.rule, `${path}.rule`, depth + 1) };
    }
    const children = given.rules;
    if (!Array.isArray(children) || children.length === 0 || children.length > GROUP_RULES_MAX) {
      return refuse(`${path}.rules`, `must be an array of 1 to ${GROUP_RULES_MAX} rules or groups`);
    }
    return { type, rules: children.map((child, index) => node(child, `${path}.rules[${index}]`, depth + 1)) };
  };
  return node(value, field, 1);
}

function parseRule(given: Record<string, unknown>, path: string): FilterRule {
  const { field, operator, value } = given;
  if (typeof field !== 'string') return refuse(`${path}.field`, 'must be a string');
  const target = targetOf(field);
  if (target === undefined) {
    return refuse(
      `${path}.field`,
      `unknown field ${JSON.stringify(field)}: use email, first_name, last_name, unsubscribed, created_at, ` +
        'properties.<key> or topics.<topic id>',
    );
  }
  if (typeof operator !== 'string' || !(FILTER_OPERATORS as readonly string[]).includes(operator)) {
    return refuse(`${path}.operator`, `must be one of ${FILTER_OPERATORS.join(', ')}`);
  }
  const op = operator as FilterOperator;
  const rule: FilterRule = { type: 'rule', field, operator: op };
  if (value !== undefined) rule.value = value as FilterScalar | FilterScalar[];
  if (target.on === 'property') {
    // The property's type is checked against the organization's properties later; here, only that the
    // operator and value suit a string or a number.
    const type = propertyTypeOf(rule);
    const kind: ValueKind = type === 'number' ? 'number' : 'string';
    if (type !== undefined && typeof (Array.isArray(value) ? value[0] : value) === 'boolean') {
      return refuse(`${path}.value`, 'must be a string or a number: contact properties hold nothing else');
    }
    checkOperatorAndValue(rule, kind, path);
    return rule;
  }
  checkOperatorAndValue(rule, target.on === 'topic' ? 'subscription' : target.kind, path);
  return rule;
}

function checkOperatorAndValue(rule: FilterRule, kind: ValueKind, path: string): void {
  if (!OPERATORS[kind].includes(rule.operator)) {
    return refuse(
      `${path}.operator`,
      `${rule.operator} does not apply to ${rule.field}; use ${OPERATORS[kind].join(', ')}`,
    );
  }
  const at = `${path}.value`;
  if (PRESENCE_OPERATORS.includes(rule.operator)) {
    if (rule.value !== undefined) refuse(at, `${rule.operator} takes no value`);
    return;
  }
  if (rule.value === undefined) return refuse(at, `${rule.operator} needs a value`);
  if (rule.operator === 'in') {
    if (!Array.isArray(rule.value) || rule.value.length === 0 || rule.value.length > IN_VALUES_MAX) {
      return refuse(at, `in needs an array of 1 to ${IN_VALUES_MAX} values`);
    }
    rule.value.forEach((item, index) => checkScalar(item, kind, rule.operator, `${at}[${index}]`));
    return;
  }
  if (Array.isArray(rule.value)) return refuse(at, `${rule.operator} takes one value (in takes an array)`);
  checkScalar(rule.value, kind, rule.operator, at);
}

function checkScalar(value: unknown, kind: ValueKind, operator: FilterOperator, at: string): void {
  switch (kind) {
    case 'email':
    case 'string':
      if (typeof value !== 'string') return refuse(at, 'must be a string');
      if (value.length > PROPERTY_STRING_MAX) return refuse(at, `at most ${PROPERTY_STRING_MAX} characters`);
      if (value === '' && operator !== 'eq' && operator !== 'neq' && operator !== 'in') {
        return refuse(at, `${operator} needs a non-empty string`);
      }
      return;
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) return refuse(at, 'must be a number');
      return;
    case 'boolean':
      if (typeof value !== 'boolean') return refuse(at, 'must be true or false');
      return;
    case 'timestamp':
      if (typeof value !== 'string' || canonicalTimestamp(value) === undefined) {
        return refuse(
          at,
          'must be a date (2026-01-31) or a date and time with its zone (2026-01-31T09:00:00Z), ' +
            'in the years 0001 to 9999, with an offset within ±14:00',
        );
      }
      return;
    case 'subscription':
      if (value !== 'opt_in' && value !== 'opt_out') return refuse(at, 'must be opt_in or opt_out');
      return;
  }
}

/** Every rule of a filter with its path, in the order given. */
function rulesOf(filter: FilterNode, path: string, found: Array<[FilterRule, string]> = []) {
  if (filter.type === 'rule') found.push([filter, path]);
  else if (filter.type === 'not') rulesOf(filter.rule, `${path}.rule`, found);
  else filter.rules.forEach((child, index) => rulesOf(child, `${path}.rules[${index}]`, found));
  return found;
}

/**
 * Checks what a parsed filter names against the organization: each `properties.<key>` one of its
 * contact properties, compared with a value of the property's type, and each `topics.<id>` one of its
 * topics. The first rule at fault is a 400 on its path.
 */
export async function checkFilterReferences(
  db: Queryable,
  organizationId: string,
  filter: SegmentFilter,
  field: string,
): Promise<void> {
  const rules = rulesOf(filter, field);
  const keys = new Set<string>();
  const topicIds = new Set<string>();
  for (const [rule] of rules) {
    const target = targetOf(rule.field)!;
    if (target.on === 'property') keys.add(target.key);
    if (target.on === 'topic') topicIds.add(target.id);
  }
  const { rows: properties } = keys.size
    ? await db.query<{ key: string; type: PropertyType }>(
        'SELECT key, type FROM contact_properties WHERE organization_id = $1 AND key = ANY ($2::text[])',
        [organizationId, [...keys]],
      )
    : { rows: [] };
  const { rows: topics } = topicIds.size
    ? await db.query<{ id: string }>('SELECT id FROM topics WHERE organization_id = $1 AND id = ANY ($2::uuid[])', [
        organizationId,
        [...topicIds],
      ])
    : { rows: [] };
  const types = new Map(properties.map((row) => [row.key, row.type]));
  const knownTopics = new Set(topics.map((row) => row.id));
  for (const [rule, path] of rules) {
    const target = targetOf(rule.field)!;
    if (target.on === 'topic' && !knownTopics.has(target.id)) {
      refuse(`${path}.field`, `no topic has the id ${target.id}`);
    }
    if (target.on !== 'property') continue;
    const type = types.get(target.key);
    if (type === undefined) {
      refuse(
        `${path}.field`,
        `no contact property has the key ${target.key}; create it first with POST /contact-properties`,
      );
    }
    const compared = propertyTypeOf(rule);
    if (compared === undefined || compared === type) continue;
    if (!OPERATORS[type!].includes(rule.operator)) {
      refuse(
        `${path}.operator`,
        `${rule.operator} does not apply to ${rule.field}, a ${type} property; use ${OPERATORS[type!].join(', ')}`,
      );
    }
    refuse(`${path}.value`, `must be a ${type}: ${target.key} is a ${type} property`);
  }
}
