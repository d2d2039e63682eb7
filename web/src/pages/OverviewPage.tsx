import { useId, useState } from 'react';
import { Button, DataTable, EmptyState, ErrorBanner, Loading, PageHeader, type Column } from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { FirstRunChecklist } from './FirstRunChecklist.tsx';
import { DeliverabilitySection } from './DeliverabilitySection.tsx';

// The home page: this month's quota, the rate limit, and what happened to the organization's mail per
// hour (24 hours) or per day (30 days), from GET /overview in one request; then the delivery, bounce and
// complaint rates per day against the providers' limits (DeliverabilitySection, GET /emails/metrics).

interface Bucket {
  start: string;
  delivered: number;
  bounced: number;
  complained: number;
  failed: number;
  opened: number;
  clicked: number;
}

interface Overview {
  object: 'overview';
  quota: {
    monthly_limit: number | null;
    used: number;
    remaining: number | null;
    period_start: string;
    period_end: string;
  };
  rate_limit: { per_second: number };
  hourly: Bucket[];
  daily: Bucket[];
}

type Outcome = Exclude<keyof Bucket, 'start'>;

/** The outcomes charted, in the legend's order; each has its colour in styles.css (`.series-<kind>`). */
const OUTCOMES: Array<{ key: Outcome; label: string }> = [
  { key: 'delivered', label: 'Delivered' },
  { key: 'bounced', label: 'Bounced' },
  { key: 'complained', label: 'Complained' },
  { key: 'failed', label: 'Failed' },
  { key: 'opened', label: 'Opened' },
  { key: 'clicked', label: 'Clicked' },
];

type Range = 'hourly' | 'daily';

const numberFormat = new Intl.NumberFormat();
// Buckets are UTC hours and days: labelled in UTC, so a day is not shown as the one before west of UTC.
const hourFormat = new Intl.DateTimeFormat(undefined, { hour: 'numeric', minute: '2-digit', timeZone: 'UTC' });
const dayFormat = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });

const bucketLabel = (bucket: Bucket, range: Range) =>
  (range === 'hourly' ? hourFormat : dayFormat).format(new Date(bucket.start));

export function OverviewPage(_props: PageProps) {
  const overview = useApiGet<Overview>('/overview');
  const [range, setRange] = useState<Range>('hourly');
  const data = overview.data;

  const nothingYet =
    data !== undefined &&
    data.quota.used === 0 &&
    [...data.hourly, ...data.daily].every((bucket) => OUTCOMES.every(({ key }) => bucket[key] === 0));

  return (
    <>
      <PageHeader
        title="Overview"
        description="How your organization's email is doing: what was sent, delivered, bounced and opened lately."
      />
      <FirstRunChecklist />
      <ErrorBanner error={overview.error} title="The overview could not be loaded" onRetry={overview.reload} />
      {!data && overview.loading ? <Loading label="Loading the overview…" /> : null}
      {data ? (
        <>
          <section className="overview-limits" aria-label="Limits">
            <Quota quota={data.quota} />
            <div className="card overview-stat">
              <h2>Rate limit</h2>
              <p className="overview-figure">
                {numberFormat.format(data.rate_limit.per_second)} <span className="muted">messages per second</span>
              </p>
              <p className="muted">Faster sending is answered 429 rate_limit_exceeded; retry after a second.</p>
            </div>
          </section>
          {nothingYet ? (
            <FirstMessage />
          ) : (
            <>
              <OutcomeChart buckets={range === 'hourly' ? data.hourly : data.daily} range={range} onRange={setRange} />
              <DeliverabilitySection />
            </>
          )}
        </>
      ) : null}
    </>
  );
}

function Quota({ quota }: { quota: Overview['quota'] }) {
  const meterId = useId();
  const limit = quota.monthly_limit;
  const resets = new Date(quota.period_end);
  return (
    <div className="card overview-stat">
      <h2>
        <label htmlFor={meterId}>This month's quota</label>
      </h2>
      <p className="overview-figure">
        {numberFormat.format(quota.used)}
        {limit !== null ? <span className="muted"> of {numberFormat.format(limit)} recipients used</span> : null}
      </p>
      {limit !== null ? (
        <meter
          id={meterId}
          className="quota-meter"
          min={0}
          max={Math.max(limit, 1)}
          low={limit * 0.8}
          high={limit * 0.95}
          optimum={0}
          value={quota.used}
          aria-valuetext={`${numberFormat.format(quota.used)} of ${numberFormat.format(limit)} recipients used`}
        >
          {numberFormat.format(quota.used)} of {numberFormat.format(limit)}
        </meter>
      ) : null}
      <p className="muted">
        {quota.remaining !== null ? `${numberFormat.format(quota.remaining)} left` : 'No limit'}; the count starts again
        on {dayFormat.format(resets)} (UTC). Every recipient (to, cc and bcc) counts.
      </p>
    </div>
  );
}

function FirstMessage() {
  const origin = window.location.origin;
  const example = [
    `curl -X POST ${origin}/emails \\`,
    `  -H "Authorization: Bearer $MAILROOM_KEY" \\`,
    `  -H "Content-Type: application/json" \\`,
    `  -d '{"from": "you@your-domain.example", "to": ["someone@example.com"], "subject": "Hello", "text": "It works."}'`,
  ].join('\n');
  return (
    <EmptyState title="Nothing sent yet">
      <p>
        Send your first message with the API: put an API key in <code>MAILROOM_KEY</code> (the first start printed two;
        make more on the <Link to="/api-keys">API keys</Link> page) and send from an address on a{' '}
        <Link to="/domains">verified domain</Link>:
      </p>
      <pre className="code-block" tabIndex={0} aria-label="Example: send a message with curl">
        {example}
      </pre>
      <p>Its delivery, bounces, opens and clicks will show here.</p>
    </EmptyState>
  );
}

// The chart's drawing area, in the SVG's own units (it scales to the width of the page).
const WIDTH = 720;
const HEIGHT = 240;
const PAD = { top: 12, right: 16, bottom: 28, left: 44 };

/** A tidy top for the y axis: 1, 2 or 5 times a power of ten, at least `max`. */
function niceTop(max: number): number {
  if (max <= 4) return 4;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

function OutcomeChart({
  buckets,
  range,
  onRange,
}: {
  buckets: Bucket[];
  range: Range;
  onRange: (range: Range) => void;
}) {
  const [asTable, setAsTable] = useState(false);
  const titleId = useId();
  const descId = useId();
  const tableId = useId();
  const rangeWords = range === 'hourly' ? 'per hour (UTC), last 24 hours' : 'per day (UTC), last 30 days';

  const max = Math.max(0, ...buckets.flatMap((bucket) => OUTCOMES.map(({ key }) => bucket[key])));
  const top = niceTop(max);
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const x = (index: number) => PAD.left + (buckets.length <= 1 ? 0 : (index / (buckets.length - 1)) * plotWidth);
  const y = (value: number) => PAD.top + plotHeight - (value / top) * plotHeight;
  const ticks = [0, top / 4, top / 2, (3 * top) / 4, top];
  const labelEvery = range === 'hourly' ? 4 : 5;

  const totals = OUTCOMES.map(({ key, label }) => ({
    label,
    total: buckets.reduce((sum, bucket) => sum + bucket[key], 0),
  }));
  const description = `${totals.map(({ label, total }) => `${label}: ${numberFormat.format(total)}`).join(', ')} in all.`;

  const columns: Array<Column<Bucket>> = [
    { header: range === 'hourly' ? 'Hour' : 'Day', cell: (bucket) => bucketLabel(bucket, range), className: 'nowrap' },
    ...OUTCOMES.map(({ key, label }) => ({
      header: label,
      cell: (bucket: Bucket) => numberFormat.format(bucket[key]),
      className: 'numeric',
    })),
  ];

  return (
    <section className="card overview-chart" aria-labelledby={titleId}>
      <div className="overview-chart-header">
        <h2 id={titleId}>Outcomes {rangeWords}</h2>
        <div className="segmented" role="group" aria-label="Period">
          <Button
            variant={range === 'hourly' ? 'primary' : 'secondary'}
            aria-pressed={range === 'hourly'}
            onClick={() => onRange('hourly')}
          >
            24 hours
          </Button>
          <Button
            variant={range === 'daily' ? 'primary' : 'secondary'}
            aria-pressed={range === 'daily'}
            onClick={() => onRange('daily')}
          >
            30 days
          </Button>
        </div>
      </div>
      <ul className="chart-legend" aria-label="Legend">
        {totals.map(({ label, total }, index) => (
          <li key={label}>
            <span className={`legend-swatch series-${OUTCOMES[index]!.key}`} aria-hidden="true" />
            {label} <span className="muted">({numberFormat.format(total)})</span>
          </li>
        ))}
      </ul>
      <svg
        className="chart"
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-labelledby={`${titleId}-svg ${descId}`}
        preserveAspectRatio="xMidYMid meet"
      >
        <title id={`${titleId}-svg`}>{`Outcomes ${rangeWords}`}</title>
        <desc id={descId}>{description}</desc>
        {ticks.map((tick) => (
          <g key={tick}>
            <line className="chart-grid" x1={PAD.left} x2={WIDTH - PAD.right} y1={y(tick)} y2={y(tick)} />
            <text className="chart-axis" x={PAD.left - 6} y={y(tick) + 4} textAnchor="end">
              {numberFormat.format(tick)}
            </text>
          </g>
        ))}
        {buckets.map((bucket, index) =>
          index % labelEvery === (buckets.length - 1) % labelEvery ? (
            <text
              key={bucket.start}
              className="chart-axis"
              x={x(index)}
              y={HEIGHT - 8}
              textAnchor={index === buckets.length - 1 ? 'end' : 'middle'}
            >
              {bucketLabel(bucket, range)}
            </text>
          ) : null,
        )}
        {OUTCOMES.map(({ key }) => (
          <g key={key} className={`series-${key}`}>
            <polyline
              className="chart-line"
              points={buckets.map((bucket, index) => `${x(index)},${y(bucket[key])}`).join(' ')}
            />
            {buckets.map((bucket, index) =>
              bucket[key] > 0 ? (
                <circle key={bucket.start} className="chart-dot" cx={x(index)} cy={y(bucket[key])} r={3} />
              ) : null,
            )}
          </g>
        ))}
      </svg>
      <Button variant="quiet" aria-expanded={asTable} aria-controls={tableId} onClick={() => setAsTable(!asTable)}>
        {asTable ? 'Hide table' : 'Show as table'}
      </Button>
      <div id={tableId} hidden={!asTable}>
        {asTable ? (
          <DataTable
            caption={`Outcomes ${rangeWords}`}
            columns={columns}
            rows={buckets}
            rowKey={(bucket) => bucket.start}
          />
        ) : null}
      </div>
    </section>
  );
}
