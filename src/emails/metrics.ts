import { Type } from 'typebox';
import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import {
  GRANULARITIES,
  UNRECORDED_METRICS,
  type Dimension,
  type Granularity,
  type Metric,
  type MetricsRequest,
} from './metrics-request.ts';
import { countsInRatesSql } from './test-addresses.ts';

// GET /emails/metrics (Resend's shape): what happened to the organization's mail in a date range, in
// total and broken down by period, sending domain, message or broadcast (its copies, emails.broadcast_id;
// mail that is no broadcast's copy counts in the totals only, as a message whose domain is gone does in
// a domain breakdown). Everything is counted per recipient from the timeline (email_events), when each
// entry was recorded, except the recipients at resend.dev (Resend's test addresses, whose outcomes are
// simulated: test-addresses.ts):
// - sent: recipients Mailroom tried to deliver whose attempt ended (delivered, bounced when sent, or
//   failed after being tried: refused or retries exhausted);
// - delivered, complained, opened, clicked, delivery_delayed: their timeline entries (opens are kept once
//   per recipient, clicks once per recipient and link, so `opened` equals `unique_opened`);
// - bounced: bounces when sent and those reported later (DSN); permanent = hard, transient = soft;
// - suppressed: recipients not sent to because they are on the suppression list;
// - failed: recipients that failed for any other reason (refused, retries exhausted, unsubscribed);
// - rates are percentages: delivery = delivered / sent, bounce = bounced / sent, complaint =
//   complained / delivered (as mailbox providers count spam rates), open and click = unique opens and
//   clicks / delivered; 0 when the divisor is 0.
// `received`, `unsubscribed` and `unsubscribe_rate` are not recorded per message, so they are left out of
// the answer (its `metrics` says what it holds) rather than answered with a zero that would be a guess.
//
// Cost: one range scan of email_events_metrics_idx (organization, time) over the range's entries (the
// test-address rule is a comparison of each entry's recipient once read, no index of its own), plus
// the message row of each for a domain or broadcast breakdown or filter; one statement for totals and rows together
// (GROUPING SETS), and the periods are generated, not scanned.

/**
 * Rows one answer may hold. Resend bounds only the periods; with a breakdown by message each period
 * repeats for every message, so the rows are bounded too, before they are built: an answer is read whole
 * into memory, and one that would not fit a dashboard's chart is refused with what to narrow.
 */
export const MAX_ROWS = 10_000;

const COUNTS = [
  'sent',
  'delivered',
  'bounced',
  'bounced_permanent',
  'bounced_transient',
  'bounced_undetermined',
  'complained',
  'suppressed',
  'failed',
  'delivery_delayed',
  'opened',
  'unique_opened',
  'clicked',
  'unique_clicked',
] as const satisfies readonly Metric[];
type Count = (typeof COUNTS)[number];

/** Each rate as [numerator, divisor]. */
const RATES = {
  delivery_rate: ['delivered', 'sent'],
  bounce_rate: ['bounced', 'sent'],
  complaint_rate: ['complained', 'delivered'],
  open_rate: ['unique_opened', 'delivered'],
  click_rate: ['unique_clicked', 'delivered'],
} as const satisfies Partial<Record<Metric, readonly [Count, Count]>>;

// Each count as an aggregate over the scanned entries (alias `ev`). A bounce reported later by a DSN
// (source `dsn`, with its status) is a bounce but not a delivery attempt: that recipient's attempt was
// counted when it ended (usually as delivered).
const BOUNCE_TYPE = `ev.data #>> '{bounce,type}'`;
const REASON = `ev.data ->> 'reason'`;
const AGGREGATES: Record<Count, string> = {
  sent: `count(*) FILTER (WHERE ev.type = 'delivered'
           OR (ev.type = 'bounced' AND NOT (ev.data ? 'status' AND ev.data ->> 'source' = 'dsn'))
           OR (ev.type = 'failed' AND ${REASON} IN ('refused', 'retries_exhausted')))`,
  delivered: `count(*) FILTER (WHERE ev.type = 'delivered')`,
  bounced: `count(*) FILTER (WHERE ev.type = 'bounced')`,
  bounced_permanent: `count(*) FILTER (WHERE ev.type = 'bounced' AND ${BOUNCE_TYPE} = 'hard')`,
  bounced_transient: `count(*) FILTER (WHERE ev.type = 'bounced' AND ${BOUNCE_TYPE} = 'soft')`,
  bounced_undetermined: `count(*) FILTER (WHERE ev.type = 'bounced' AND coalesce(${BOUNCE_TYPE}, '') NOT IN ('hard', 'soft'))`,
  complained: `count(*) FILTER (WHERE ev.type = 'complained')`,
  suppressed: `count(*) FILTER (WHERE ev.type = 'failed' AND ${REASON} = 'suppressed')`,
  failed: `count(*) FILTER (WHERE ev.type = 'failed' AND coalesce(${REASON}, '') <> 'suppressed')`,
  delivery_delayed: `count(*) FILTER (WHERE ev.type = 'delivery_delayed')`,
  opened: `count(*) FILTER (WHERE ev.type = 'opened')`,
  // Opens are kept once per recipient: every open entry is a unique open.
  unique_opened: `count(*) FILTER (WHERE ev.type = 'opened')`,
  clicked: `count(*) FILTER (WHERE ev.type = 'clicked')`,
  unique_clicked: `count(DISTINCT (ev.email_id, ev.recipient)) FILTER (WHERE ev.type = 'clicked')`,
};
const COUNTED_TYPES = `('delivered', 'bounced', 'complained', 'failed', 'delivery_delayed', 'opened', 'clicked')`;

const UNIT: Record<Granularity, string> = { hourly: 'hour', daily: 'day', weekly: 'week', monthly: 'month' };

// Metric values by name; which names depends on `metrics`.
const Numbers = (properties: Record<string, ReturnType<typeof Type.String>> = {}, description?: string) =>
  Type.Object(properties, { additionalProperties: Type.Number(), ...(description ? { description } : {}) });

export const MetricsSchema = Type.Unsafe<Metrics>(
  Type.Object({
    object: Type.Literal('metrics'),
    start_date: Type.String({ format: 'date-time', description: 'Start of the range, inclusive' }),
    end_date: Type.String({ format: 'date-time', description: 'End of the range, exclusive (never later than now)' }),
    metrics: Type.Array(Type.String(), { description: 'The metrics in `totals` and each row' }),
    dimensions: Type.Array(Type.String()),
    granularity: Type.Union(GRANULARITIES.map((g) => Type.Literal(g))),
    totals: Numbers({}, 'Each metric over the whole range'),
    data: Type.Optional(
      Type.Array(
        Numbers({
          period: Type.Optional(Type.String({ description: 'Start of the period (UTC date-time), cut in `timezone`' })),
          domain_id: Type.Optional(Type.String()),
          domain_name: Type.Optional(Type.String()),
          email_id: Type.Optional(Type.String()),
          broadcast_id: Type.Optional(Type.String()),
          broadcast_name: Type.Optional(Type.String({ description: "The broadcast's name ('' when it has none)" })),
        } as Record<string, ReturnType<typeof Type.String>>),
        { description: 'One row per combination of the dimensions; left out without dimensions' },
      ),
    ),
  }),
);
type Row = Record<string, string | number>;
export interface Metrics {
  object: 'metrics';
  start_date: string;
  end_date: string;
  metrics: Metric[];
  dimensions: Dimension[];
  granularity: Granularity;
  totals: Record<string, number>;
  data?: Row[];
}

interface CountedRow extends Record<Count, number> {
  total: boolean;
  period: Date | null;
  domain_id: string | null;
  domain_name: string | null;
  email_id: string | null;
  broadcast_id: string | null;
  broadcast_name: string | null;
}

export async function readEmailMetrics(
  db: Queryable,
  organizationId: string,
  request: MetricsRequest,
  maxRows = MAX_ROWS,
): Promise<Metrics> {
  const byPeriod = request.dimensions.includes('period');
  const byDomain = request.dimensions.includes('domain');
  const byEmail = request.dimensions.includes('email');
  const byBroadcast = request.dimensions.includes('broadcast');
  const needsMessage = byDomain || byBroadcast || request.domainIds !== undefined || request.broadcastIds !== undefined;
  const answered = request.metrics.filter((metric) => !UNRECORDED_METRICS.has(metric));

  const params: unknown[] = [organizationId, request.start, request.end];
  const param = (value: unknown) => `$${params.push(value)}`;
  const groups: string[] = [];
  const columns: string[] = [];
  if (byPeriod) {
    const expression = `date_trunc(${param(UNIT[request.granularity])}, ev.created_at, ${param(request.timezone)})`;
    groups.push(expression);
    columns.push(`${expression} AS period`);
  }
  if (byDomain) {
    groups.push('e.domain_id');
    columns.push('e.domain_id', '(SELECT name FROM domains WHERE id = e.domain_id) AS domain_name');
  }
  if (byEmail) {
    groups.push('ev.email_id');
    columns.push('ev.email_id');
  }
  if (byBroadcast) {
    groups.push('e.broadcast_id');
    columns.push('e.broadcast_id', '(SELECT name FROM broadcasts WHERE id = e.broadcast_id) AS broadcast_name');
  }
  const filters = [
    request.domainIds ? `e.domain_id = ANY (${param(request.domainIds)}::uuid[])` : '',
    request.emailIds ? `ev.email_id = ANY (${param(request.emailIds)}::uuid[])` : '',
    request.broadcastIds ? `e.broadcast_id = ANY (${param(request.broadcastIds)}::uuid[])` : '',
  ].filter(Boolean);

  // Only what the metrics need; with nothing to count (only unrecorded metrics asked), still one aggregate,
  // so that the statement aggregates rather than lists the entries.
  const needed = countsFor(answered);
  const aggregates =
    needed.length > 0 ? needed.map((name) => `${AGGREGATES[name]}::int AS ${name}`) : ['count(*)::int AS entries'];
  // One scan: the totals are the grouping set (), the rows the set of the dimensions. The totals row sorts
  // first (total is true), and one row more than may be answered tells that there are too many.
  const { rows } = await db.query<CountedRow>(
    `SELECT ${groups.length > 0 ? `GROUPING(${groups.join(', ')}) <> 0` : 'true'} AS total,
            ${[...columns, ...aggregates].join(',\n            ')}
       FROM email_events ev
       ${needsMessage ? 'JOIN emails e ON e.id = ev.email_id' : ''}
      WHERE ev.organization_id = $1 AND ev.created_at >= $2 AND ev.created_at < $3
        AND ev.type IN ${COUNTED_TYPES} AND ${countsInRatesSql('ev.recipient')}
        ${filters.map((filter) => `AND ${filter}`).join(' ')}
      ${groups.length > 0 ? `GROUP BY GROUPING SETS ((${groups.join(', ')}), ()) ORDER BY 1 DESC LIMIT ${maxRows + 2}` : ''}`,
    params,
  );
  if (rows.length > maxRows + 1) throw tooManyRows(maxRows);

  const values = (counts: Record<Count, number> | undefined): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const metric of answered) out[metric] = valueOf(metric, counts);
    return out;
  };
  const totals = rows.find((row) => row.total);
  const answer: Metrics = {
    object: 'metrics',
    start_date: request.start.toISOString(),
    end_date: request.end.toISOString(),
    metrics: answered,
    dimensions: request.dimensions,
    granularity: request.granularity,
    totals: values(totals),
  };
  if (request.dimensions.length === 0) return answer;

  // Rows of messages whose domain was deleted since have no domain to show, and those of mail that is no
  // broadcast's copy no broadcast: they count in the totals only.
  const counted = rows.filter(
    (row) => !row.total && !(byDomain && row.domain_id === null) && !(byBroadcast && row.broadcast_id === null),
  );
  const key = (row: { domain_id?: string | null; email_id?: string | null; broadcast_id?: string | null }) =>
    `${row.domain_id ?? ''}|${row.email_id ?? ''}|${row.broadcast_id ?? ''}`;
  const dimensionsOf = (row: CountedRow): Row => ({
    ...(byDomain ? { domain_id: row.domain_id!, domain_name: row.domain_name ?? '' } : {}),
    ...(byEmail ? { email_id: row.email_id! } : {}),
    ...(byBroadcast ? { broadcast_id: row.broadcast_id!, broadcast_name: row.broadcast_name ?? '' } : {}),
  });

  let data: Row[];
  if (byPeriod) {
    // Every period of the range, for each domain or message with anything in it, so a chart has no gaps.
    const periods = await periodsOf(db, request);
    const found = new Map(counted.map((row) => [`${row.period!.toISOString()}|${key(row)}`, row]));
    const groupsSeen = new Map<string, CountedRow>();
    for (const row of counted) if (!groupsSeen.has(key(row))) groupsSeen.set(key(row), row);
    if (periods.length * groupsSeen.size > maxRows) throw tooManyRows(maxRows, periods.length, groupsSeen.size);
    const orderedGroups = [...groupsSeen.values()].sort(compareGroups);
    if (!byDomain && !byEmail && !byBroadcast && orderedGroups.length === 0) orderedGroups.push({} as CountedRow);
    data = periods.flatMap((period) =>
      orderedGroups.map((group) => ({
        period: period.toISOString(),
        ...dimensionsOf(group),
        ...values(found.get(`${period.toISOString()}|${key(group)}`)),
      })),
    );
  } else {
    data = counted.sort(compareGroups).map((row) => ({ ...dimensionsOf(row), ...values(row) }));
  }
  return { ...answer, data };
}

function tooManyRows(maxRows: number, periods?: number, groups?: number): ServiceError {
  const size =
    periods === undefined ? '' : ` (${periods} periods for each of ${groups} ${groups === 1 ? 'group' : 'groups'})`;
  return new ServiceError(
    'validation_error',
    `The answer would hold more than ${maxRows} rows${size}: shorten the range, choose a longer granularity, filter by domain_id, email_id or broadcast_id, or break down by fewer dimensions`,
    'dimensions',
  );
}

/** Domains by name, then broadcasts by name, then messages by id: the same order in every period. */
function compareGroups(a: CountedRow, b: CountedRow): number {
  return (
    (a.domain_name ?? '').localeCompare(b.domain_name ?? '') ||
    (a.domain_id ?? '').localeCompare(b.domain_id ?? '') ||
    (a.broadcast_name ?? '').localeCompare(b.broadcast_name ?? '') ||
    (a.broadcast_id ?? '').localeCompare(b.broadcast_id ?? '') ||
    (a.email_id ?? '').localeCompare(b.email_id ?? '')
  );
}

/** The start of every period from the one holding `start` to the one holding the range's last instant. */
async function periodsOf(db: Queryable, request: MetricsRequest): Promise<Date[]> {
  // Stepped on the wall clock of the time zone, so a day is a day across a change to or from summer time.
  const { rows } = await db.query<{ period: Date }>(
    `SELECT local AT TIME ZONE $2 AS period
       FROM generate_series(
              date_trunc($1, $3::timestamptz, $2) AT TIME ZONE $2,
              date_trunc($1, greatest($3::timestamptz, $4::timestamptz - interval '1 microsecond'), $2) AT TIME ZONE $2,
              ('1 ' || $1)::interval) AS local
      ORDER BY 1`,
    [UNIT[request.granularity], request.timezone, request.start, request.end],
  );
  return rows.map((row) => row.period);
}

/** The counts the metrics need (a rate needs its two), so that nothing else is aggregated. */
function countsFor(metrics: Metric[]): Count[] {
  const needed = new Set<Count>(
    metrics.flatMap((metric) => (metric in RATES ? RATES[metric as keyof typeof RATES] : [metric as Count])),
  );
  return COUNTS.filter((count) => needed.has(count));
}

function valueOf(metric: Metric, counts: Record<Count, number> | undefined): number {
  if (metric in RATES) {
    const [numerator, divisor] = RATES[metric as keyof typeof RATES];
    const over = counts?.[divisor] ?? 0;
    // Percent, to four decimals: a complaint rate of 0.0040% still shows.
    return over === 0 ? 0 : Math.round(((counts![numerator] * 100) / over) * 10_000) / 10_000;
  }
  return counts?.[metric as Count] ?? 0;
}
