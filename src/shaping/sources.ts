import type { Queryable } from '../platform/db/database.ts';
import type { WarmupStats } from '../platform/metrics.ts';
import { siteLabel } from './sites.ts';
import type { Egress } from './egress.ts';
import { allowanceOf, dayOf, listWarmup, releasedBy, rollOver, type WarmupState } from './warmup.ts';

// What GET /sources, GET /pools, `mailroom sources list`, the Destinations page and the warm-up gauges
// show: the egress sources the shaping file declares (never a relay's credentials), the pools they form,
// and each warming source's stage, allowance and day so far at every site it has sent to.

export interface WarmupSite {
  site: string;
  /** 1-based; `stages + 1` once warm. */
  stage: number;
  stages: number;
  warm: boolean;
  /** The day's volume at this stage; null once warm. */
  allowance_today: number | null;
  /** How much of it is released by now (one 24th more each hour); null once warm. */
  released_now: number | null;
  sent_today: number;
  delivered_today: number;
  deferred_today: number;
  blocked_today: boolean;
  started_at: string;
  last_change: string | null;
  changed_at: string | null;
}

export interface SourceView {
  object: 'source';
  name: string;
  kind: 'address' | 'relay';
  /** The local address connections are bound to; null: the host's default (`default`) or a relay. */
  address: string | null;
  ehlo: string | null;
  /** `host:port` of a relay source. */
  relay: string | null;
  pools: string[];
  warming: boolean;
  /** Per site met so far, while warming (and after: a warm site says so). */
  warmup: WarmupSite[];
}

export interface PoolView {
  object: 'pool';
  name: string;
  sources: string[];
  overflow: string | null;
  /** Site → the pool this pool's mail to it goes through. */
  sites: Record<string, string>;
  default: boolean;
  /** The pool the asking organization's mail goes through (before site routes), when it asks. */
  yours: boolean;
}

/** A warm-up row as it stands at `now` (a new day starts from zero, its stage judged). */
export function warmupView(state: WarmupState, stages: readonly number[], now: Date): WarmupSite {
  const today = rollOver(state, stages, dayOf(now), now);
  const allowance = allowanceOf(today.stage, stages);
  return {
    site: state.site,
    stage: today.stage + 1,
    stages: stages.length,
    warm: allowance === undefined,
    allowance_today: allowance ?? null,
    released_now: allowance === undefined ? null : releasedBy(allowance, now),
    sent_today: today.sent,
    delivered_today: today.delivered,
    deferred_today: today.deferred,
    blocked_today: today.blocked,
    started_at: state.startedAt.toISOString(),
    last_change: today.lastChange,
    changed_at: today.changedAt?.toISOString() ?? null,
  };
}

/** Every source (the operator's view), or only those named in `only` (an organization's). */
export async function listSources(
  db: Queryable,
  egress: Egress,
  now: Date,
  only?: ReadonlySet<string>,
): Promise<SourceView[]> {
  const warmup = await listWarmup(db);
  const shown = [...egress.sources.values()].filter((source) => only === undefined || only.has(source.name));
  return shown.map((source) => ({
    object: 'source',
    name: source.name,
    kind: source.kind,
    address: source.kind === 'address' ? (source.address ?? null) : null,
    ehlo: source.ehlo ?? null,
    relay: source.kind === 'relay' ? `${source.host}:${source.port}` : null,
    pools: [...egress.pools.values()]
      .filter((pool) => pool.sources.includes(source.name) || pool.overflow === source.name)
      .map((pool) => pool.name),
    warming: source.warmup,
    warmup: warmup
      .filter((state) => state.source === source.name)
      .map((state) => warmupView(state, egress.stagesFor(state.site), now)),
  }));
}

/**
 * The pools an organization's mail may go through (by its verified sending domains, then the site routes
 * of those pools), or every pool for the operator; `yours` marks the ones its mail goes through first.
 * Another organization's dedicated pool, and so its sources and their traffic, is not shown.
 */
export function poolsOf(egress: Egress, organization: { id: string; domains: string[] }): Set<string> {
  const own = egress.organizations.get(organization.id.toLowerCase()) ?? egress.defaultPool;
  const first = new Set(organization.domains.map((domain) => egress.domains.get(domain.toLowerCase()) ?? own));
  if (organization.domains.length === 0) first.add(own);
  return first;
}

/** The sources of these pools: their members, their overflow, and those of the pools their sites go through. */
export function sourcesOf(egress: Egress, pools: Iterable<string>): Set<string> {
  const names = new Set<string>();
  for (const name of pools) {
    const pool = egress.pools.get(name)!;
    for (const reached of [pool, ...[...pool.sites.values()].map((other) => egress.pools.get(other)!)]) {
      reached.sources.forEach((source) => names.add(source));
      if (reached.overflow !== undefined) names.add(reached.overflow);
    }
  }
  return names;
}

export function listPools(egress: Egress, organization?: { id: string; domains: string[] }): PoolView[] {
  const theirs = organization ? poolsOf(egress, organization) : new Set<string>();
  const reached = new Set([...theirs].flatMap((name) => [name, ...egress.pools.get(name)!.sites.values()]));
  const shown = [...egress.pools.values()].filter((pool) => organization === undefined || reached.has(pool.name));
  return shown.map((pool) => ({
    object: 'pool',
    name: pool.name,
    sources: [...pool.sources],
    overflow: pool.overflow ?? null,
    sites: Object.fromEntries(pool.sites),
    default: pool.name === egress.defaultPool,
    yours: theirs.has(pool.name),
  }));
}

/** The warm-up gauges: every warming source at every site it has met, as it stands now. */
export async function warmupStats(db: Queryable, egress: Egress, now = new Date()): Promise<WarmupStats[]> {
  if (!egress.declared) return [];
  return (await listWarmup(db))
    .filter((state) => egress.sources.get(state.source)?.warmup)
    .map((state) => {
      const view = warmupView(state, egress.stagesFor(state.site), now);
      return {
        source: state.source,
        site: siteLabel(state.site),
        stage: view.stage,
        allowance: view.allowance_today ?? undefined,
        sentToday: view.sent_today,
      };
    });
}
