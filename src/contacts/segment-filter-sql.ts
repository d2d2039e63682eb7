import {
  canonicalTimestamp,
  propertyTypeOf,
  targetOf,
  type FilterNode,
  type FilterOperator,
  type FilterRule,
  type FilterScalar,
  type SegmentFilter,
} from './segment-filter.ts';

// A segment's filter (segment-filter.ts has its grammar and checks) as one SQL condition over a
// contacts row, evaluated whenever the segment's contacts are asked for.

/**
 * A SQL condition over the contacts row `c` (organization already fixed by the caller) that holds for the
 * contacts of the segment: its members, and, when it has a filter, the contacts the filter matches.
 * Values are pushed onto `params` and referenced as $n.
 *
 * Every subquery but the membership's is uncorrelated (the segment's organization, a property's
 * fallback, a topic's default: each computed once per statement), and the membership and topic choices
 * are `c.id IN (…)` over one index range each (a hashed set), so the condition costs one pass over the
 * organization's contacts whatever the filter. Each rule's condition is true or false, never NULL, so
 * `not` is plain negation. A property or topic deleted since the filter was saved (or a property made
 * again with the other type) matches nobody.
 */
export function segmentAudienceCondition(
  segment: { id: string; filter: SegmentFilter | null },
  params: unknown[],
): string {
  const $ = (value: unknown, cast: string) => {
    params.push(value);
    return `$${params.length}::${cast}`;
  };
  const segmentId = $(segment.id, 'uuid');
  const members = `c.id IN (SELECT cs.contact_id FROM contact_segments cs WHERE cs.segment_id = ${segmentId})`;
  if (segment.filter === null) return members;
  const organization = `(SELECT s.organization_id FROM segments s WHERE s.id = ${segmentId})`;
  return `(${members} OR ${nodeSql(segment.filter, { $, organization })})`;
}

interface SqlContext {
  $: (value: unknown, cast: string) => string;
  /** The segment's organization, as an uncorrelated subquery. */
  organization: string;
}

function nodeSql(node: FilterNode, context: SqlContext): string {
  if (node.type === 'not') return `(NOT ${nodeSql(node.rule, context)})`;
  if (node.type === 'rule') return ruleSql(node, context);
  const joined = node.rules.map((child) => nodeSql(child, context)).join(node.type === 'and' ? ' AND ' : ' OR ');
  return `(${joined})`;
}

function ruleSql(rule: FilterRule, context: SqlContext): string {
  const target = targetOf(rule.field);
  // A stored filter was checked when written; anything else matches nobody rather than failing a send.
  if (target === undefined) return 'false';
  if (target.on === 'topic') return topicSql(rule, target.id, context);
  if (target.on === 'property') return propertySql(rule, target.key, context);
  const column = `c.${target.name}`;
  switch (target.kind) {
    case 'email':
      return comparisonSql(`lower(${column})`, rule, 'text', context, (value) => String(value).toLowerCase());
    case 'string':
      return comparisonSql(column, rule, 'text', context);
    case 'boolean':
      return comparisonSql(column, rule, 'boolean', context);
    case 'timestamp': {
      // In its canonical form (microseconds kept, a date alone at midnight UTC whatever the session's
      // zone), which PostgreSQL reads as checked here; a stored value that is not one (saved before the
      // check was this strict) matches nobody rather than failing every read of the segment.
      const canonical = typeof rule.value === 'string' ? canonicalTimestamp(rule.value) : undefined;
      if (canonical === undefined) return 'false';
      return comparisonSql(column, { ...rule, value: canonical }, 'timestamptz', context);
    }
    default:
      return 'false';
  }
}

/** The rule's test of `expression` (SQL of type `cast`, NULL when the contact has no value), never NULL. */
function comparisonSql(
  expression: string,
  rule: FilterRule,
  cast: string,
  { $ }: SqlContext,
  convert: (value: FilterScalar) => FilterScalar = (value) => value,
): string {
  const value = () => $(convert(rule.value as FilterScalar), cast);
  switch (rule.operator) {
    case 'is_set':
      return `(${expression} IS NOT NULL)`;
    case 'is_not_set':
      return `(${expression} IS NULL)`;
    // A contact without a value is "not equal" and "does not contain".
    case 'neq':
      return `(${expression} IS DISTINCT FROM ${value()})`;
    case 'not_contains':
      return `(${expression} IS NULL OR strpos(${expression}, ${value()}) = 0)`;
    case 'in':
      return `coalesce(${expression} = ANY (${$((rule.value as FilterScalar[]).map(convert), `${cast}[]`)}), false)`;
    default: {
      const tests: Partial<Record<FilterOperator, () => string>> = {
        eq: () => `${expression} = ${value()}`,
        gt: () => `${expression} > ${value()}`,
        gte: () => `${expression} >= ${value()}`,
        lt: () => `${expression} < ${value()}`,
        lte: () => `${expression} <= ${value()}`,
        contains: () => `strpos(${expression}, ${value()}) > 0`,
        starts_with: () => `starts_with(${expression}, ${value()})`,
        ends_with: () => {
          const given = value();
          return `right(${expression}, length(${given})) = ${given}`;
        },
      };
      const test = tests[rule.operator];
      return test ? `coalesce(${test()}, false)` : 'false';
    }
  }
}

/**
 * A property rule: the contact's value, else the property's fallback, compared as the property's type.
 * The property is looked up by key and type once per statement; when there is none (deleted, or made
 * again with the other type) the rule matches nobody.
 */
function propertySql(rule: FilterRule, key: string, context: SqlContext): string {
  const { $, organization } = context;
  const type = propertyTypeOf(rule);
  const keyParam = $(key, 'text');
  const property = `FROM contact_properties p WHERE p.organization_id = ${organization} AND p.key = ${keyParam}${
    type === undefined ? '' : ` AND p.type = ${$(type, 'text')}`
  }`;
  const value = `coalesce(c.properties -> ${keyParam}, (SELECT p.fallback_value ${property}))`;
  const typed =
    type === 'number'
      ? `(CASE WHEN jsonb_typeof(${value}) = 'number' THEN (${value} #>> '{}')::numeric END)`
      : type === 'string'
        ? `(CASE WHEN jsonb_typeof(${value}) = 'string' THEN ${value} #>> '{}' END)`
        : value;
  const compared = comparisonSql(typed, rule, type === 'number' ? 'numeric' : 'text', context);
  return `(EXISTS (SELECT 1 ${property}) AND ${compared})`;
}

/**
 * A topic rule: the contact's effective subscription, their own choice else the topic's default. The
 * choices are read as two hashed sets (opted in, any choice), the default once per statement; a topic
 * that is gone has no default and no choices, and the rule matches nobody.
 */
function topicSql(rule: FilterRule, topicId: string, { $, organization }: SqlContext): string {
  const topic = $(topicId, 'uuid');
  const defaultSubscription = `(SELECT t.default_subscription FROM topics t WHERE t.id = ${topic} AND t.organization_id = ${organization})`;
  const chose = (subscription?: string) =>
    `c.id IN (SELECT ct.contact_id FROM contact_topics ct WHERE ct.topic_id = ${topic}${
      subscription ? ` AND ct.subscription = ${$(subscription, 'text')}` : ''
    })`;
  const effective = (subscription: 'opt_in' | 'opt_out') =>
    `(${chose(subscription)} OR (coalesce(${defaultSubscription} = ${$(subscription, 'text')}, false) AND NOT ${chose()}))`;
  const values = (Array.isArray(rule.value) ? rule.value : [rule.value]) as Array<'opt_in' | 'opt_out'>;
  const wanted = new Set(
    rule.operator === 'neq' ? (['opt_in', 'opt_out'] as const).filter((s) => s !== values[0]) : values,
  );
  const exists = `(${defaultSubscription} IS NOT NULL)`;
  if (wanted.size === 0) return 'false';
  if (wanted.size === 2) return exists;
  return `(${exists} AND ${effective([...wanted][0]!)})`;
}
