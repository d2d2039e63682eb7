import { Type, type Static } from 'typebox';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { canonicalTimeZone, zoneOffsetMinutes } from '../platform/time-zones.ts';

// The request of GET /emails/metrics (Resend's parameters): the query string read and checked into a
// MetricsRequest, the range in instants, the lists deduplicated, or a validation_error naming the
// parameter at fault. What is counted for a request is metrics.ts.

export const METRICS = [
  'received',
  'delivered',
  'complained',
  'suppressed',
  'bounced',
  'bounced_transient',
  'bounced_permanent',
  'bounced_undetermined',
  'opened',
  'clicked',
  'unsubscribed',
  'delivery_delayed',
  'failed',
  'sent',
  'unique_opened',
  'unique_clicked',
  'delivery_rate',
  'open_rate',
  'click_rate',
  'bounce_rate',
  'complaint_rate',
  'unsubscribe_rate',
] as const;
export type Metric = (typeof METRICS)[number];

/** Metrics Mailroom does not record: accepted in a request, never in an answer. */
export const UNRECORDED_METRICS: ReadonlySet<Metric> = new Set(['received', 'unsubscribed', 'unsubscribe_rate']);

export const DIMENSIONS = ['period', 'domain', 'email', 'broadcast'] as const;
export type Dimension = (typeof DIMENSIONS)[number];
export const GRANULARITIES = ['hourly', 'daily', 'weekly', 'monthly'] as const;
export type Granularity = (typeof GRANULARITIES)[number];

/** Resend's limits: periods one answer may span, and ids one filter may list. */
export const MAX_PERIODS = 10_000;
export const MAX_FILTER_IDS = 100;
const DEFAULT_RANGE_MS = 6 * 86_400_000;

/** The shortest length of a period, to bound the number of periods before asking the database. */
const SHORTEST_MS: Record<Granularity, number> = {
  hourly: 3_600_000,
  daily: 23 * 3_600_000,
  weekly: 7 * 86_400_000 - 3_600_000,
  monthly: 28 * 86_400_000 - 3_600_000,
};

const List = (description: string) =>
  Type.Optional(
    Type.Union([Type.String(), Type.Array(Type.String())], {
      description: `${description} Comma-separated, the parameter repeated, or both.`,
    }),
  );

export const MetricsQuerySchema = Type.Object(
  {
    start_date: Type.Optional(
      Type.String({
        description:
          'ISO 8601 date or date-time, inclusive. A date, or a date-time without offset, is read in `timezone`. Defaults to 6 days before `end_date`.',
      }),
    ),
    end_date: Type.Optional(
      Type.String({
        description: 'ISO 8601 date or date-time, exclusive. Later than now is taken as now. Defaults to now.',
      }),
    ),
    timezone: Type.Optional(Type.String({ description: 'IANA time zone the periods are cut in. Defaults to UTC.' })),
    granularity: Type.Optional(
      Type.Union([Type.Literal('hourly'), Type.Literal('daily'), Type.Literal('weekly'), Type.Literal('monthly')], {
        description: 'Period length with the `period` dimension. Defaults to daily.',
      }),
    ),
    metrics: List(`Metrics to answer, of: ${METRICS.join(', ')}. Defaults to all.`),
    dimensions: List(
      "Break-down: period, domain, email, broadcast (a broadcast's copies; other mail counts in the totals only).",
    ),
    domain_id: List('Only these sending domains (up to 100 ids).'),
    email_id: List('Only these messages (up to 100 ids).'),
    broadcast_id: List("Only these broadcasts' copies (up to 100 ids)."),
  },
  { additionalProperties: false },
);
export type MetricsQuery = Static<typeof MetricsQuerySchema>;

export interface MetricsRequest {
  start: Date;
  end: Date;
  timezone: string;
  granularity: Granularity;
  /** As asked (or all), in the order asked. */
  metrics: Metric[];
  dimensions: Dimension[];
  domainIds: string[] | undefined;
  emailIds: string[] | undefined;
  broadcastIds: string[] | undefined;
}

const invalid = (field: string, message: string) => new ServiceError('validation_error', message, field);

/** `a,b` and [`a`, `b,c`] as [a, b, c]; undefined when absent. */
function listOf(value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const items = (Array.isArray(value) ? value : [value]).flatMap((part) => part.split(','));
  return items.map((item) => item.trim()).filter((item) => item !== '');
}

function enumList<T extends string>(field: string, value: string | string[] | undefined, allowed: readonly T[]) {
  const items = listOf(value);
  if (items === undefined) return undefined;
  const unknown = items.find((item) => !(allowed as readonly string[]).includes(item));
  if (unknown !== undefined) {
    throw invalid(field, `\`${unknown}\` is not one of the ${field}: ${allowed.join(', ')}`);
  }
  return [...new Set(items)] as T[];
}

function idList(field: string, value: string | string[] | undefined): string[] | undefined {
  const items = listOf(value);
  if (items === undefined) return undefined;
  if (items.length > MAX_FILTER_IDS) throw invalid(field, `At most ${MAX_FILTER_IDS} ids, got ${items.length}`);
  const bad = items.find((item) => !isUuid(item));
  if (bad !== undefined) throw invalid(field, `\`${bad}\` is not an id (a UUID)`);
  return [...new Set(items.map((item) => item.toLowerCase()))];
}

function checkedTimezone(value: string | undefined): string {
  if (value === undefined || value === '') return 'UTC';
  // Canonical spelling (`utc` → `UTC`), which PostgreSQL knows too.
  const name = canonicalTimeZone(value);
  if (name === undefined) {
    throw invalid('timezone', `\`${value}\` is not an IANA time zone (e.g. UTC, Europe/Paris, America/New_York)`);
  }
  return name;
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const LOCAL_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$/;
const OFFSET_DATE_TIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})$/i;

/** The instant a wall-clock time in `timeZone` names (the later one when a clock change repeats it). */
function zonedInstant(wallClock: number, timeZone: string): number {
  const first = wallClock - zoneOffsetMinutes(wallClock, timeZone) * 60_000;
  return wallClock - zoneOffsetMinutes(first, timeZone) * 60_000;
}

function parseDate(field: string, value: string, timeZone: string): Date {
  const date = DATE.exec(value);
  const local = LOCAL_DATE_TIME.exec(value);
  let instant = Number.NaN;
  if (date) {
    instant = zonedInstant(Date.UTC(+date[1]!, +date[2]! - 1, +date[3]!), timeZone);
    // Date.UTC rolls 2026-02-31 over to March: a date that does not exist is refused.
    if (new Date(Date.UTC(+date[1]!, +date[2]! - 1, +date[3]!)).getUTCDate() !== +date[3]!) instant = Number.NaN;
  } else if (local) {
    const [, y, mo, d, h, mi, s, fraction] = local;
    const ms = fraction ? Math.floor(Number(`0.${fraction}`) * 1000) : 0;
    instant = zonedInstant(Date.UTC(+y!, +mo! - 1, +d!, +h!, +mi!, s ? +s : 0, ms), timeZone);
  } else if (OFFSET_DATE_TIME.test(value)) {
    instant = Date.parse(value);
  }
  if (!Number.isFinite(instant)) {
    throw invalid(field, `\`${value}\` is not an ISO 8601 date (2026-07-01) or date-time (2026-07-01T09:00:00Z)`);
  }
  return new Date(instant);
}

/** The query string as a request, or a validation_error naming the parameter at fault. */
export function metricsRequest(query: MetricsQuery, now: Date): MetricsRequest {
  const timezone = checkedTimezone(query.timezone);
  const granularity = query.granularity ?? 'daily';
  const metrics = enumList('metrics', query.metrics, METRICS) ?? [...METRICS];
  if (metrics.length === 0) throw invalid('metrics', 'Name at least one metric, or leave `metrics` out for all');
  const dimensions = enumList('dimensions', query.dimensions, DIMENSIONS) ?? [];
  const domainIds = idList('domain_id', query.domain_id);
  const emailIds = idList('email_id', query.email_id);
  const broadcastIds = idList('broadcast_id', query.broadcast_id);

  let end = query.end_date ? parseDate('end_date', query.end_date, timezone) : now;
  if (end > now) end = now;
  const start = query.start_date
    ? parseDate('start_date', query.start_date, timezone)
    : new Date(end.getTime() - DEFAULT_RANGE_MS);
  if (start > end) {
    throw invalid(
      'start_date',
      `start_date (${start.toISOString()}) is after end_date (${end.toISOString()}, which is never later than now)`,
    );
  }
  if ((end.getTime() - start.getTime()) / SHORTEST_MS[granularity] + 1 > MAX_PERIODS) {
    throw invalid(
      'start_date',
      `The range holds more than ${MAX_PERIODS} ${granularity} periods: shorten it or choose a longer granularity`,
    );
  }
  return {
    start,
    end,
    timezone,
    granularity,
    metrics,
    dimensions,
    domainIds,
    emailIds,
    broadcastIds,
  };
}
