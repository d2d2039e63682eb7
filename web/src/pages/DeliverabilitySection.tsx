import { useId, useState } from 'react';
import { Button, DataTable, ErrorBanner, LearnMore, Loading, type Column } from '../components/index.ts';
import { useApiGet } from '../hooks.ts';

// The Overview's deliverability rates: delivery, bounce and complaint rates per UTC day over the last 30
// days, from GET /emails/metrics (rates are percentages there), each in its own chart with its own scale,
// drawn against the lines mailbox providers and sending services hold senders to:
// - complaints: Gmail's and Yahoo's sender guidelines, below 0.1% and never 0.3% (complaints over
//   delivered mail, which is how GET /emails/metrics counts complaint_rate);
// - bounces: Amazon SES puts an account under review from a 5% bounce rate.
// A day with nothing sent has no rate, so it has no point (rather than a 0% that looks like news).
// The rates over the whole range are coloured by where they stand against bands drawn from the same
// lines (good, watch, poor), and say it in words; a rate with nothing to divide by is neutral, "no data".

export const DAYS = 30;

const METRICS = ['sent', 'delivered', 'bounced', 'complained', 'delivery_rate', 'bounce_rate', 'complaint_rate'];

interface DayRow {
  period: string;
  sent: number;
  delivered: number;
  bounced: number;
  complained: number;
  delivery_rate: number;
  bounce_rate: number;
  complaint_rate: number;
}

interface Metrics {
  object: 'metrics';
  totals: Omit<DayRow, 'period'>;
  data: DayRow[];
}

interface Threshold {
  value: number;
  label: string;
}

/**
 * Where a rate turns from good to watch and from watch to poor. A rate is good below `watch` and poor
 * from `poor` on; for a rate where more is better (delivery), good at or above `watch`, poor below `poor`.
 */
interface Bands {
  higherIsBetter: boolean;
  watch: number;
  poor: number;
}

interface RateChart {
  key: 'delivery_rate' | 'bounce_rate' | 'complaint_rate';
  bands: Bands;
  title: string;
  /** The count the rate divides by: a day where it is 0 has no rate. */
  over: 'sent' | 'delivered';
  /** The chart's top when the rates are below it, so the thresholds are always in view. */
  minTop: number;
  thresholds: Threshold[];
  series: 'delivered' | 'bounced' | 'complained';
}

export const RATE_CHARTS: RateChart[] = [
  {
    key: 'delivery_rate',
    // The mirror of the bounce bands: under 2% of mail not delivered is good, 5% is a review.
    bands: { higherIsBetter: true, watch: 98, poor: 95 },
    title: 'Delivery rate',
    over: 'sent',
    minTop: 100,
    thresholds: [],
    series: 'delivered',
  },
  {
    key: 'bounce_rate',
    // Amazon SES asks senders to stay under 2% and reviews accounts from 5%.
    bands: { higherIsBetter: false, watch: 2, poor: 5 },
    title: 'Bounce rate',
    over: 'sent',
    minTop: 8,
    thresholds: [{ value: 5, label: '5%: Amazon SES puts the account under review' }],
    series: 'bounced',
  },
  {
    key: 'complaint_rate',
    bands: { higherIsBetter: false, watch: 0.1, poor: 0.3 },
    title: 'Complaint rate',
    over: 'delivered',
    minTop: 0.4,
    thresholds: [
      { value: 0.1, label: '0.1%: Gmail and Yahoo ask senders to stay below' },
      { value: 0.3, label: '0.3%: Gmail and Yahoo, never reach' },
    ],
    series: 'complained',
  },
];

const numberFormat = new Intl.NumberFormat();
const dayFormat = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });

/** A rate (already a percentage) for people: up to two decimals, more below 0.1% so it does not read 0. */
export function formatRate(value: number): string {
  const digits = value !== 0 && value < 0.1 ? 3 : 2;
  return `${new Intl.NumberFormat(undefined, { maximumFractionDigits: digits }).format(value)}%`;
}

export type RateTone = 'good' | 'watch' | 'poor' | 'none';

/**
 * Where a rate stands, as a tone (its colour, `.rate-<tone>` in styles.css) and in words naming the line
 * it is on the wrong or right side of. `sample` is the count the rate divides by: 0 means no data.
 */
export function rateVerdict(chart: RateChart, value: number, sample: number): { tone: RateTone; words: string } {
  if (sample === 0)
    return { tone: 'none', words: chart.over === 'sent' ? 'No data: nothing sent' : 'No data: nothing delivered' };
  const { higherIsBetter, watch, poor } = chart.bands;
  if (higherIsBetter) {
    if (value >= watch) return { tone: 'good', words: `Good: ${formatRate(watch)} or more` };
    if (value >= poor) return { tone: 'watch', words: `Watch: below ${formatRate(watch)}` };
    return { tone: 'poor', words: `Poor: below ${formatRate(poor)}` };
  }
  if (value < watch) return { tone: 'good', words: `Good: below ${formatRate(watch)}` };
  if (value < poor) return { tone: 'watch', words: `Watch: ${formatRate(watch)} or more` };
  return { tone: 'poor', words: `Poor: ${formatRate(poor)} or more` };
}

/** The first day of the range: today (UTC) and the DAYS - 1 days before it. */
function firstDay(): string {
  const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  return new Date(today - (DAYS - 1) * 86_400_000).toISOString().slice(0, 10);
}

export function DeliverabilitySection() {
  const [start] = useState(firstDay);
  const metrics = useApiGet<Metrics>('/emails/metrics', {
    start_date: start,
    dimensions: 'period',
    granularity: 'daily',
    metrics: METRICS.join(','),
  });
  const [asTable, setAsTable] = useState(false);
  const titleId = useId();
  const tableId = useId();
  const data = metrics.data;

  const columns: Array<Column<DayRow>> = [
    { header: 'Day', cell: (row) => dayFormat.format(new Date(row.period)), className: 'nowrap' },
    { header: 'Sent', cell: (row) => numberFormat.format(row.sent), className: 'numeric' },
    { header: 'Delivered', cell: (row) => numberFormat.format(row.delivered), className: 'numeric' },
    ...RATE_CHARTS.map((chart) => ({
      header: chart.title,
      cell: (row: DayRow) => (row[chart.over] > 0 ? formatRate(row[chart.key]) : '–'),
      className: 'numeric',
    })),
  ];

  return (
    <section className="card overview-chart" aria-labelledby={titleId}>
      <h2 id={titleId}>Deliverability per day (UTC), last {DAYS} days</h2>
      <ErrorBanner error={metrics.error} title="The rates could not be loaded" onRetry={metrics.reload} />
      {!data && metrics.loading ? <Loading label="Loading the rates…" /> : null}
      {data ? (
        <>
          <dl className="rate-summary" aria-label={`Rates over the last ${DAYS} days`}>
            {RATE_CHARTS.map((chart) => {
              const verdict = rateVerdict(chart, data.totals[chart.key], data.totals[chart.over]);
              return (
                <div key={chart.key}>
                  <dt>{chart.title}</dt>
                  <dd className={`rate-${verdict.tone}`} data-tone={verdict.tone}>
                    <span className="rate-value">
                      {verdict.tone === 'none' ? '–' : formatRate(data.totals[chart.key])}
                    </span>
                    <span className="rate-verdict">{verdict.words}</span>
                  </dd>
                </div>
              );
            })}
            <div>
              <dt>Sent</dt>
              <dd>
                <span className="rate-value">{numberFormat.format(data.totals.sent)}</span>
              </dd>
            </div>
          </dl>
          <p className="muted">
            <LearnMore page="dashboard" section="deliverability-rates" about="how the rates are counted" />
          </p>
          <div className="rate-charts">
            {RATE_CHARTS.map((chart) => (
              <RateLineChart key={chart.key} chart={chart} days={data.data} />
            ))}
          </div>
          <Button variant="quiet" aria-expanded={asTable} aria-controls={tableId} onClick={() => setAsTable(!asTable)}>
            {asTable ? 'Hide the rates table' : 'Show the rates as a table'}
          </Button>
          <div id={tableId} hidden={!asTable}>
            {asTable ? (
              <DataTable
                caption={`Deliverability per day (UTC), last ${DAYS} days`}
                columns={columns}
                rows={data.data}
                rowKey={(row) => row.period}
              />
            ) : null}
          </div>
        </>
      ) : null}
    </section>
  );
}

// Each chart's drawing area, in the SVG's own units (it scales to its column's width).
const WIDTH = 300;
const HEIGHT = 180;
const PAD = { top: 12, right: 8, bottom: 24, left: 42 };

/** A tidy top for a percentage axis: 1, 2, 2.5 or 5 times a power of ten, at least `max`. */
function niceTop(max: number): number {
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

function RateLineChart({ chart, days }: { chart: RateChart; days: DayRow[] }) {
  const titleId = useId();
  const descId = useId();
  const points = days.flatMap((day, index) => (day[chart.over] > 0 ? [{ index, day, value: day[chart.key] }] : []));
  const top = Math.min(100, niceTop(Math.max(chart.minTop, ...points.map((point) => point.value))));
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const x = (index: number) => PAD.left + (days.length <= 1 ? 0 : (index / (days.length - 1)) * plotWidth);
  const y = (value: number) => PAD.top + plotHeight - (value / top) * plotHeight;
  const ticks = [0, top / 2, top];
  const last = points.at(-1);
  const description =
    (last
      ? `Latest: ${formatRate(last.value)} on ${dayFormat.format(new Date(last.day.period))}. `
      : 'Nothing sent in these days. ') + chart.thresholds.map((threshold) => `Line at ${threshold.label}.`).join(' ');

  return (
    <figure className="rate-chart">
      <svg
        className="chart"
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-labelledby={`${titleId} ${descId}`}
        preserveAspectRatio="xMidYMid meet"
      >
        <title id={titleId}>{`${chart.title} per day (UTC), last ${DAYS} days`}</title>
        <desc id={descId}>{description}</desc>
        {ticks.map((tick) => (
          <g key={tick}>
            <line className="chart-grid" x1={PAD.left} x2={WIDTH - PAD.right} y1={y(tick)} y2={y(tick)} />
            <text className="chart-axis" x={PAD.left - 6} y={y(tick) + 4} textAnchor="end">
              {formatRate(tick)}
            </text>
          </g>
        ))}
        {days.length > 0 ? (
          <>
            <text className="chart-axis" x={x(0)} y={HEIGHT - 6} textAnchor="start">
              {dayFormat.format(new Date(days[0]!.period))}
            </text>
            <text className="chart-axis" x={x(days.length - 1)} y={HEIGHT - 6} textAnchor="end">
              {dayFormat.format(new Date(days.at(-1)!.period))}
            </text>
          </>
        ) : null}
        {chart.thresholds.map((threshold, index) => (
          <g key={threshold.value} className="chart-threshold" data-threshold={threshold.value}>
            <line x1={PAD.left} x2={WIDTH - PAD.right} y1={y(threshold.value)} y2={y(threshold.value)} />
            {/* Tagged at alternate ends, so two close lines keep readable tags; the legend says what each is. */}
            <text
              x={index % 2 === 0 ? WIDTH - PAD.right : PAD.left + 4}
              y={y(threshold.value) - 4}
              textAnchor={index % 2 === 0 ? 'end' : 'start'}
            >
              {formatRate(threshold.value)}
            </text>
          </g>
        ))}
        <g className={`series-${chart.series}`}>
          {points.length > 1 ? (
            <polyline
              className="chart-line"
              points={points.map((point) => `${x(point.index)},${y(point.value)}`).join(' ')}
            />
          ) : null}
          {points.map((point) => (
            <circle key={point.day.period} className="chart-dot" cx={x(point.index)} cy={y(point.value)} r={3} />
          ))}
        </g>
      </svg>
      <figcaption>
        {chart.title}
        {chart.thresholds.length > 0 ? (
          <ul className="threshold-legend" aria-label={`${chart.title} limits`}>
            {chart.thresholds.map((threshold) => (
              <li key={threshold.value}>
                <span className="threshold-swatch" aria-hidden="true" />
                {threshold.label}
              </li>
            ))}
          </ul>
        ) : null}
      </figcaption>
    </figure>
  );
}
