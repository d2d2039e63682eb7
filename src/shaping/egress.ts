import { isIP } from 'node:net';
import { parseConnectionUrl } from 'nodemailer/lib/shared';
import type { SiteLimits } from './limits.ts';
import { normalizeSiteId } from './sites.ts';
import {
  describe,
  keyPath,
  limitsTable,
  onlyKeys,
  ShapingFileError,
  table,
  text,
  wholeNumber,
  type Table,
} from './file-values.ts';

// Egress: where mail leaves from. A *source* is a local IP address to connect from (with its own EHLO
// name) or a relay (an upstream SMTP service). Sources form *pools*; a message goes through the pool of
// its sending domain, else of its organization, else the default pool, and a pool may send one site
// (say Microsoft) through another pool. Every limit of traffic shaping holds per source and site: two
// addresses may each open Gmail's five connections, as Gmail judges each address on its own.
//
// Without a [source] table there is one source, `default`: the host's own address and MAILROOM_HELO_NAME.

/** A local address mail is sent from, with the name it gives in EHLO (its PTR record should say the same). */
export interface AddressSource {
  kind: 'address';
  name: string;
  /** The IPv4 or IPv6 address the connection is bound to; undefined: the host's default route (`default`). */
  address: string | undefined;
  /** The EHLO name; undefined: MAILROOM_HELO_NAME. */
  ehlo: string | undefined;
  /** New to the mailbox providers: its daily volume per site follows the warm-up schedule. */
  warmup: boolean;
}

/** An upstream SMTP service every message of this source is handed to. */
export interface RelaySource {
  kind: 'relay';
  name: string;
  host: string;
  port: number;
  /** TLS from the first byte (smtps://); otherwise STARTTLS, required when the relay offers it. */
  secure: boolean;
  auth: { user: string; pass: string } | undefined;
  ehlo: string | undefined;
  /** The relay's own limits (an ESP's sending rate), over `[site.relay]`. */
  limits: Partial<SiteLimits>;
  warmup: false;
}

export type EgressSource = AddressSource | RelaySource;

export interface EgressPool {
  name: string;
  /** Source names, in the order they take turns. */
  sources: readonly string[];
  /** A source that takes the mail over a warming source's allowance; undefined: such mail waits. */
  overflow: string | undefined;
  /** Site → pool: this pool's mail to that site goes through the other pool's sources. */
  sites: ReadonlyMap<string, string>;
}

/** The warm-up schedule: messages a day per source and site, stage by stage. */
export interface WarmupSchedule {
  /** Every site's stages unless `sites` names it. */
  stages: readonly number[];
  sites: ReadonlyMap<string, readonly number[]>;
}

/**
 * Daily volume per stage of a warming address at one site: SparkPost's published IP warm-up plan (200 a
 * day, doubling or so, to 10 million), which SendGrid's and SES's automatic warm-ups resemble. A stage
 * lasts at least a day and advances only after a good day (see warmup.ts).
 */
export const DEFAULT_WARMUP_STAGES: readonly number[] = [
  200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 40_000, 70_000, 100_000, 150_000, 250_000, 400_000, 600_000, 1_000_000,
  2_000_000, 4_000_000, 10_000_000,
];

export interface Egress {
  /** False when the file declares no source: the one source `default`. */
  readonly declared: boolean;
  readonly sources: ReadonlyMap<string, EgressSource>;
  readonly pools: ReadonlyMap<string, EgressPool>;
  readonly defaultPool: string;
  /** Organization id → pool. */
  readonly organizations: ReadonlyMap<string, string>;
  /** Sending domain → pool. */
  readonly domains: ReadonlyMap<string, string>;
  readonly warmup: WarmupSchedule;
  /** The pool a message goes through: its sending domain's, its organization's, or the default; then the site's route. */
  poolFor(message: { organizationId: string; senderDomain: string; site: string }): EgressPool;
  /** The day's volume of each warm-up stage at a site. */
  stagesFor(site: string): readonly number[];
}

export const DEFAULT_SOURCE = 'default';
/** The pool every source is in when the file declares none. */
export const DEFAULT_POOL = 'default';

const NAME = /^[a-z0-9][a-z0-9_-]*$/;
const HOST_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;

/** The `[source]`, `[pool]`, `[routing]` and `[warmup]` tables of a parsed shaping file. */
export function compileEgress(raw: Table, isSite: (id: string) => boolean = () => true): Egress {
  const siteKey = (key: string, path: string) => {
    const id = normalizeSiteId(key);
    if (!isSite(id)) {
      throw new ShapingFileError(
        path,
        'not a known site: a provider, relay, "mx:<hosts>", a domain, or a site the file names',
      );
    }
    return id;
  };
  const sources = new Map<string, EgressSource>();
  for (const [name, value] of Object.entries(raw.source === undefined ? {} : table(raw.source, 'source'))) {
    const path = keyPath('source', name);
    if (!NAME.test(name)) throw new ShapingFileError(path, 'a source name is lower case letters, digits, "-" and "_"');
    sources.set(name, source(name, table(value, path), path));
  }
  const declared = sources.size > 0;
  if (!declared) {
    if (raw.pool !== undefined)
      throw new ShapingFileError('pool', 'pools are made of sources: declare [source.<name>]');
    if (raw.routing !== undefined)
      throw new ShapingFileError('routing', 'routing chooses pools: declare [source.<name>]');
    sources.set(DEFAULT_SOURCE, {
      kind: 'address',
      name: DEFAULT_SOURCE,
      address: undefined,
      ehlo: undefined,
      warmup: false,
    });
  }

  const pools = new Map<string, EgressPool>();
  const poolTables = raw.pool === undefined ? {} : table(raw.pool, 'pool');
  for (const [name, value] of Object.entries(poolTables)) {
    const path = keyPath('pool', name);
    if (!NAME.test(name)) throw new ShapingFileError(path, 'a pool name is lower case letters, digits, "-" and "_"');
    pools.set(name, pool(name, table(value, path), path, sources, siteKey));
  }
  // Without pools, every source is in one pool, `default`.
  if (pools.size === 0) {
    pools.set(DEFAULT_POOL, {
      name: DEFAULT_POOL,
      sources: [...sources.keys()],
      overflow: undefined,
      sites: new Map(),
    });
  }
  for (const [name, value] of pools) {
    for (const [site, target] of value.sites) {
      if (!pools.has(target)) {
        throw new ShapingFileError(`${keyPath(keyPath('pool', name), 'sites')}.${site}`, `no pool "${target}"`);
      }
    }
  }

  const routing = raw.routing === undefined ? {} : table(raw.routing, 'routing');
  onlyKeys(routing, ['default_pool', 'organizations', 'domains'], 'routing');
  const knownPool = (value: unknown, path: string) => {
    const name = text(value, path);
    if (!pools.has(name))
      throw new ShapingFileError(path, `no pool "${name}" (pools: ${[...pools.keys()].join(', ')})`);
    return name;
  };
  let defaultPool: string;
  if (routing.default_pool !== undefined) defaultPool = knownPool(routing.default_pool, 'routing.default_pool');
  else if (pools.has(DEFAULT_POOL)) defaultPool = DEFAULT_POOL;
  else if (pools.size === 1) defaultPool = [...pools.keys()][0]!;
  else
    throw new ShapingFileError('routing.default_pool', 'required when there are several pools and none is "default"');

  const assignments = (key: 'organizations' | 'domains', check: (id: string, path: string) => string) => {
    const found = new Map<string, string>();
    const given = routing[key] === undefined ? {} : table(routing[key], `routing.${key}`);
    for (const [id, value] of Object.entries(given)) {
      const path = keyPath(`routing.${key}`, id);
      found.set(check(id, path), knownPool(value, path));
    }
    return found;
  };
  const organizations = assignments('organizations', (id, path) => {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) {
      throw new ShapingFileError(path, 'expected an organization id (a UUID, as `mailroom org list` shows)');
    }
    return id.toLowerCase();
  });
  const domains = assignments('domains', (id, path) => {
    const domain = id.toLowerCase().replace(/\.$/, '');
    if (!HOST_NAME.test(domain) || !domain.includes('.')) throw new ShapingFileError(path, 'expected a sending domain');
    return domain;
  });

  const warmup = warmupTable(raw.warmup, siteKey);
  for (const [name, value] of pools) {
    if (value.overflow === undefined) continue;
    const overflow = sources.get(value.overflow)!;
    if (overflow.warmup) {
      throw new ShapingFileError(
        keyPath(keyPath('pool', name), 'overflow'),
        `source "${overflow.name}" is warming up itself: the overflow is a warm source or a relay`,
      );
    }
  }

  return {
    declared,
    sources,
    pools,
    defaultPool,
    organizations,
    domains,
    warmup,
    poolFor({ organizationId, senderDomain, site }) {
      const name =
        domains.get(senderDomain.toLowerCase()) ?? organizations.get(organizationId.toLowerCase()) ?? defaultPool;
      const chosen = pools.get(name)!;
      // One step only: the other pool's own site routes are not followed, so routes never loop.
      const routed = chosen.sites.get(site);
      return routed === undefined ? chosen : pools.get(routed)!;
    },
    stagesFor: (site) => warmup.sites.get(site) ?? warmup.stages,
  };
}

function source(name: string, value: Table, path: string): EgressSource {
  const ehlo = value.ehlo === undefined ? undefined : hostName(value.ehlo, `${path}.ehlo`);
  if ((value.address === undefined) === (value.relay === undefined)) {
    throw new ShapingFileError(path, 'a source has either `address` (a local IP address) or `relay` (an smtp:// URL)');
  }
  if (value.address !== undefined) {
    onlyKeys(value, ['address', 'ehlo', 'warmup'], path);
    const address = text(value.address, `${path}.address`);
    if (isIP(address) === 0) {
      throw new ShapingFileError(
        `${path}.address`,
        `expected an IPv4 or IPv6 address of this host, got ${describe(address)}`,
      );
    }
    const warmup = value.warmup ?? false;
    if (typeof warmup !== 'boolean')
      throw new ShapingFileError(`${path}.warmup`, `expected true or false, got ${describe(warmup)}`);
    return { kind: 'address', name, address, ehlo, warmup };
  }
  const limits = limitsTable(value, path, ['relay', 'ehlo']);
  const url = text(value.relay, `${path}.relay`);
  // The URL holds the relay's password: no message here repeats it.
  const expected = 'expected an smtp:// or smtps:// URL without options, e.g. "smtp://user:pass@smtp.example.net:587"';
  if (!/^smtps?:\/\/[^?#]+$/i.test(url) || URL.parse(url) === null)
    throw new ShapingFileError(`${path}.relay`, expected);
  let parsed: { host?: string; port?: number; secure?: boolean; auth?: { user: string; pass: string } };
  try {
    parsed = parseConnectionUrl(url);
  } catch {
    throw new ShapingFileError(`${path}.relay`, expected);
  }
  if (!parsed.host) throw new ShapingFileError(`${path}.relay`, 'the URL names no host');
  return {
    kind: 'relay',
    name,
    host: parsed.host,
    port: parsed.port ?? (parsed.secure ? 465 : 587),
    secure: parsed.secure ?? false,
    auth: parsed.auth,
    ehlo,
    limits,
    warmup: false,
  };
}

function pool(
  name: string,
  value: Table,
  path: string,
  sources: ReadonlyMap<string, EgressSource>,
  siteKey: (key: string, path: string) => string,
): EgressPool {
  onlyKeys(value, ['sources', 'overflow', 'sites'], path);
  const knownSource = (item: unknown, at: string) => {
    const sourceName = text(item, at);
    if (!sources.has(sourceName)) {
      throw new ShapingFileError(at, `no source "${sourceName}" (sources: ${[...sources.keys()].join(', ')})`);
    }
    return sourceName;
  };
  if (!Array.isArray(value.sources) || value.sources.length === 0) {
    throw new ShapingFileError(
      `${path}.sources`,
      `expected a non-empty array of source names, got ${describe(value.sources)}`,
    );
  }
  const members = value.sources.map((item, at) => knownSource(item, `${path}.sources[${at}]`));
  if (new Set(members).size !== members.length)
    throw new ShapingFileError(`${path}.sources`, 'a source is listed twice');
  const overflow = value.overflow === undefined ? undefined : knownSource(value.overflow, `${path}.overflow`);
  const sites = new Map<string, string>();
  for (const [site, target] of Object.entries(value.sites === undefined ? {} : table(value.sites, `${path}.sites`))) {
    const at = keyPath(`${path}.sites`, site);
    sites.set(siteKey(site, at), text(target, at));
  }
  return { name, sources: members, overflow, sites };
}

function warmupTable(value: unknown, siteKey: (key: string, path: string) => string): WarmupSchedule {
  if (value === undefined) return { stages: DEFAULT_WARMUP_STAGES, sites: new Map() };
  const given = table(value, 'warmup');
  onlyKeys(given, ['schedule', 'sites'], 'warmup');
  const stages = given.schedule === undefined ? DEFAULT_WARMUP_STAGES : schedule(given.schedule, 'warmup.schedule');
  const sites = new Map<string, readonly number[]>();
  for (const [site, list] of Object.entries(given.sites === undefined ? {} : table(given.sites, 'warmup.sites'))) {
    sites.set(siteKey(site, keyPath('warmup.sites', site)), schedule(list, keyPath('warmup.sites', site)));
  }
  return { stages, sites };
}

function schedule(value: unknown, path: string): number[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new ShapingFileError(
      path,
      `expected a non-empty array of daily volumes, e.g. [200, 500, 1000], got ${describe(value)}`,
    );
  }
  const stages = value.map((item, at) => wholeNumber(item, `${path}[${at}]`));
  for (let at = 1; at < stages.length; at++) {
    if (stages[at]! < stages[at - 1]!)
      throw new ShapingFileError(`${path}[${at}]`, 'each stage sends at least as much as the one before');
  }
  return stages;
}

function hostName(value: unknown, path: string): string {
  const name = typeof value === 'string' ? value.replace(/\.$/, '') : '';
  if (!HOST_NAME.test(name) || !name.includes('.')) {
    throw new ShapingFileError(
      path,
      `expected a fully qualified host name such as "mta1.example.com", got ${describe(value)}`,
    );
  }
  return name.toLowerCase();
}
