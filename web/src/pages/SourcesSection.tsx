import {
  DataTable,
  ErrorBanner,
  LearnMore,
  Loading,
  RelativeTime,
  StatusBadge,
  type Column,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { siteName } from './site-names.ts';

// The egress sources of the install (GET /sources) and its pools (GET /pools), on the Destinations
// page: where mail leaves from, which pool this organization's mail goes through, and how far each new
// address has come in its warm-up at each mailbox provider. Shown only when the shaping file declares
// sources (an install without them sends from its one host address).

interface WarmupSite {
  site: string;
  stage: number;
  stages: number;
  warm: boolean;
  allowance_today: number | null;
  released_now: number | null;
  sent_today: number;
  delivered_today: number;
  deferred_today: number;
  blocked_today: boolean;
  last_change: string | null;
  changed_at: string | null;
}

export interface Source {
  object: 'source';
  name: string;
  kind: 'address' | 'relay';
  address: string | null;
  ehlo: string | null;
  relay: string | null;
  pools: string[];
  warming: boolean;
  warmup: WarmupSite[];
}

interface Pool {
  object: 'pool';
  name: string;
  sources: string[];
  overflow: string | null;
  sites: Record<string, string>;
  default: boolean;
  yours: boolean;
}

const number = new Intl.NumberFormat();

const SOURCE_COLUMNS: Array<Column<Source>> = [
  { header: 'Source', cell: (s) => <strong>{s.name}</strong> },
  {
    header: 'Sends from',
    cell: (s) =>
      s.kind === 'relay' ? (
        <>
          <span>Relay {s.relay}</span>
          {s.ehlo ? <span className="cell-note">EHLO {s.ehlo}</span> : null}
        </>
      ) : (
        <>
          <span>{s.address ?? 'The host address'}</span>
          {s.ehlo ? <span className="cell-note">EHLO {s.ehlo}</span> : null}
        </>
      ),
  },
  { header: 'Pools', cell: (s) => s.pools.join(', ') },
  {
    header: 'Warm-up',
    cell: (s) =>
      s.warming ? <StatusBadge tone="throttled">Warming up</StatusBadge> : <span className="muted">Warm</span>,
  },
];

interface WarmupRow extends WarmupSite {
  source: string;
}

const WARMUP_COLUMNS: Array<Column<WarmupRow>> = [
  { header: 'Source', cell: (w) => w.source },
  { header: 'Site', cell: (w) => <span className="break-anywhere">{siteName(w.site)}</span> },
  {
    header: 'Stage',
    cell: (w) =>
      w.warm ? (
        <span>Warm (all {w.stages} stages)</span>
      ) : (
        <>
          <span className="nowrap">
            {w.stage} of {w.stages}
          </span>
          <span className="cell-note">{number.format(w.allowance_today ?? 0)} a day</span>
        </>
      ),
  },
  {
    header: 'Today',
    cell: (w) => (
      <>
        <span className="nowrap">
          {number.format(w.sent_today)} sent
          {w.allowance_today !== null ? ` of ${number.format(w.released_now ?? 0)} released so far` : ''}
        </span>
        <span className="cell-note">
          {number.format(w.delivered_today)} delivered · {number.format(w.deferred_today)} deferred
          {w.blocked_today ? ' · blocked today' : ''}
        </span>
      </>
    ),
  },
  {
    header: 'Last change',
    cell: (w) =>
      w.last_change ? (
        <>
          <span>{w.last_change}</span>
          {w.changed_at ? (
            <span className="cell-note">
              <RelativeTime value={w.changed_at} />
            </span>
          ) : null}
        </>
      ) : (
        <span className="muted">None yet</span>
      ),
  },
];

export function SourcesSection() {
  const sources = useApiGet<{ object: 'list'; data: Source[] }>('/sources');
  const pools = useApiGet<{ object: 'list'; data: Pool[] }>('/pools');
  const list = sources.data?.data ?? [];
  const failure = sources.error ?? pools.error;
  if (failure) {
    const retry = () => (sources.reload(), pools.reload());
    return <ErrorBanner error={failure} title="The egress sources could not be loaded" onRetry={retry} />;
  }
  if (sources.loading && !sources.data) return <Loading label="Loading egress sources…" />;
  // One source, the host's own: nothing to choose between.
  if (list.length === 0 || (list.length === 1 && list[0]!.name === 'default')) return null;
  const warmup = list.flatMap((source) => source.warmup.map((site) => ({ ...site, source: source.name })));
  const yours = (pools.data?.data ?? []).filter((pool) => pool.yours);
  return (
    <section className="egress-sources" aria-labelledby="egress-sources-title">
      <h2 id="egress-sources-title">Sources</h2>
      <p>
        The addresses and relays mail leaves from. {yours.length > 0 ? 'Your mail goes through ' : null}
        {yours.map((pool, at) => (
          <span key={pool.name}>
            {at > 0 ? ', ' : null}
            pool <strong>{pool.name}</strong> ({pool.sources.join(', ')}
            {pool.overflow ? `; over a warming source's allowance: ${pool.overflow}` : ''}
            {Object.keys(pool.sites).length > 0
              ? `; ${Object.entries(pool.sites)
                  .map(([site, other]) => `${siteName(site)} through pool ${other}`)
                  .join(', ')}`
              : ''}
            )
          </span>
        ))}
        {yours.length > 0 ? '.' : null}
      </p>
      <DataTable caption="Egress sources" captionHidden columns={SOURCE_COLUMNS} rows={list} rowKey={(s) => s.name} />
      {warmup.length > 0 ? (
        <>
          <h3>Warm-up</h3>
          <p className="muted">
            A new address sends a little more each day it delivers well.{' '}
            <LearnMore page="shaping" section="warm-up" about="warm-up" />
          </p>
          <DataTable
            caption="Warm-up per source and site"
            captionHidden
            columns={WARMUP_COLUMNS}
            rows={warmup}
            rowKey={(w) => `${w.source} ${w.site}`}
          />
        </>
      ) : null}
    </section>
  );
}
