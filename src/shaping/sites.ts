import { BUILT_IN_SITE_LIMITS } from './limits.ts';

// A destination *site*: the set of mail servers that shares one set of limits. Large providers run
// one pool of servers for many domains (gmail.com and every Google Workspace domain), so limits are
// kept per provider, not per domain; any other domain is keyed by its MX host names, so that domains
// sharing the same servers share their limits; a domain without MX (the implicit MX) is its own site.

/** Extra MX host suffixes per site id, e.g. from the shaping file: `{ acme: ['.mx.acme.net'] }`. */
export type MxSuffixes = Readonly<Record<string, readonly string[]>>;

/**
 * The providers known out of the box, and the MX host suffixes of their mail servers. A host matches
 * a suffix when its name ends with it (`aspmx.l.google.com` ends with `.google.com`); the suffix's own
 * name (`google.com`) is not a match. Only suffixes whose hosts receive no one else's mail are listed.
 */
export const PROVIDER_MX_SUFFIXES: MxSuffixes = {
  // gmail.com (gmail-smtp-in.l.google.com), Workspace (aspmx.l.google.com, smtp.google.com, the older
  // aspmx2.googlemail.com) and its DNSSEC-signed set (mx1.smtp.goog).
  google: ['.google.com', '.googlemail.com', '.smtp.goog'],
  // Outlook.com (hotmail-com.olc.protection.outlook.com), Microsoft 365
  // (contoso-com.mail.protection.outlook.com) and its DNSSEC/DANE set (contoso-com.….mx.microsoft).
  microsoft: ['.protection.outlook.com', '.mx.microsoft'],
  // Yahoo and AOL (mta5.am0.yahoodns.net, mx-aol.mail.gm0.yahoodns.net).
  yahoo: ['.yahoodns.net'],
  // iCloud, me.com and mac.com (mx01.mail.icloud.com).
  apple: ['.icloud.com'],
  fastmail: ['.messagingengine.com'],
  zoho: ['.zoho.com', '.zoho.eu'],
  proton: ['.protonmail.ch'],
  gmx: ['.gmx.net'],
  webde: ['.web.de'],
  mailru: ['.mail.ru'],
  yandex: ['.yandex.net', '.yandex.ru'],
};

/** A host name as compared: lower case, without the root's trailing dot. */
export const normalizeHost = (name: string): string => name.trim().toLowerCase().replace(/\.$/, '');

/** A site id as compared: `mx:` ids with their hosts normalized and sorted, anything else as a host name. */
export function normalizeSiteId(site: string): string {
  if (!site.startsWith('mx:')) return normalizeHost(site);
  const hosts = new Set(site.slice(3).split(',').map(normalizeHost));
  hosts.delete('');
  return `mx:${[...hosts].sort().join(',')}`;
}

/** The site of a recipient domain given its MX host names (undefined or empty: no MX). */
export function siteOf(domain: string, mxHosts: readonly string[] | undefined, extraSuffixes: MxSuffixes = {}): string {
  // A null MX (RFC 7505) is the exchange "." and names no server: the same as no MX for keying.
  const hosts = [...new Set((mxHosts ?? []).map(normalizeHost).filter((host) => host !== ''))].sort();
  if (hosts.length === 0) return normalizeHost(domain);
  const providers = new Set(hosts.map((host) => providerOf(host, extraSuffixes)));
  const [only] = providers;
  // One provider for every host; a set mixing a provider with other servers is not that provider's.
  if (providers.size === 1 && only !== undefined) return only;
  return `mx:${hosts.join(',')}`;
}

/** The provider whose longest suffix the host ends with (longest: a more specific entry wins). */
function providerOf(host: string, extraSuffixes: MxSuffixes): string | undefined {
  let best: { site: string; length: number } | undefined;
  for (const table of [PROVIDER_MX_SUFFIXES, extraSuffixes]) {
    for (const [site, suffixes] of Object.entries(table)) {
      for (const suffix of suffixes) {
        const matches = host.endsWith(suffix) && host.length > suffix.length;
        if (matches && (best === undefined || suffix.length > best.length)) best = { site, length: suffix.length };
      }
    }
  }
  return best?.site;
}

/**
 * A domain's MX answer: its MX host names (none: the domain has no MX, or does not exist), and how many
 * seconds the answer may be kept (undefined: the answer did not say).
 */
export interface MxAnswer {
  exchanges: string[];
  ttlSeconds: number | undefined;
  /** Why there are no host names: the domain has no MX records, or does not exist. */
  absent?: 'nodata' | 'nxdomain';
}

export interface SiteResolverOptions {
  /** Asks the DNS for a domain's MX; throws when the DNS fails (a timeout, SERVFAIL). */
  lookupMx(domain: string): Promise<MxAnswer>;
  /** Milliseconds since the epoch; injectable so that tests move time instead of waiting. */
  now?: () => number;
  extraSuffixes?: MxSuffixes;
  /** How long an answer without a TTL is kept (default 5 minutes, at most an hour). */
  cacheMs?: number;
  /** How long the fallback after a DNS failure is kept (default 30 seconds, at most cacheMs). */
  failureCacheMs?: number;
  /** Domains kept at most; the oldest answer goes first (default 10,000). */
  maxEntries?: number;
}

export interface SiteResolver {
  siteFor(domain: string): Promise<string>;
}

export const DEFAULT_SITE_CACHE_MS = 5 * 60_000;
/** An answer is kept at least this long, whatever its TTL (0 would mean a question per message). */
export const MIN_SITE_CACHE_MS = 30_000;
export const MAX_SITE_CACHE_MS = 60 * 60_000;
export const DEFAULT_FAILURE_CACHE_MS = 30_000;

/**
 * Looks up a domain's MX records and keeps its site for the answer's TTL (at least 30 seconds, at most
 * an hour; `cacheMs` when the answer gives none): a domain that moves to another provider is keyed by
 * its new site once the answer it published runs out. A DNS failure never fails a delivery here: the
 * domain itself is the key until the next look-up, which comes sooner.
 */
export function createSiteResolver(options: SiteResolverOptions): SiteResolver {
  const now = options.now ?? Date.now;
  const cacheMs = options.cacheMs ?? DEFAULT_SITE_CACHE_MS;
  const failureCacheMs = options.failureCacheMs ?? Math.min(DEFAULT_FAILURE_CACHE_MS, cacheMs);
  const maxEntries = options.maxEntries ?? 10_000;
  if (!(cacheMs >= 1 && cacheMs <= MAX_SITE_CACHE_MS)) {
    throw new RangeError(`cacheMs: expected 1 to ${MAX_SITE_CACHE_MS} ms`);
  }
  if (!(failureCacheMs >= 0 && failureCacheMs <= cacheMs)) throw new RangeError('failureCacheMs: 0 to cacheMs');
  if (!(Number.isInteger(maxEntries) && maxEntries >= 1)) throw new RangeError('maxEntries: a whole number ≥ 1');

  const cache = new Map<string, { site: string; expiresAt: number }>();
  // Concurrent deliveries to one domain share a single look-up.
  const pending = new Map<string, Promise<string>>();
  const keptFor = (ttlSeconds: number | undefined) =>
    ttlSeconds === undefined ? cacheMs : Math.min(MAX_SITE_CACHE_MS, Math.max(MIN_SITE_CACHE_MS, ttlSeconds * 1000));

  const lookUp = async (domain: string): Promise<string> => {
    let site = domain;
    let keepMs: number;
    try {
      const answer = await options.lookupMx(domain);
      // No MX (the implicit MX) and no such domain are answers, kept like any other.
      if (answer.exchanges.length > 0) site = siteOf(domain, answer.exchanges, options.extraSuffixes);
      keepMs = keptFor(answer.ttlSeconds);
    } catch {
      keepMs = failureCacheMs;
    }
    cache.delete(domain); // re-inserted last: the Map's order is the eviction order
    cache.set(domain, { site, expiresAt: now() + keepMs });
    while (cache.size > maxEntries) cache.delete(cache.keys().next().value!);
    return site;
  };

  return {
    siteFor(domainName: string): Promise<string> {
      const domain = normalizeHost(domainName);
      const cached = cache.get(domain);
      if (cached !== undefined && now() < cached.expiresAt) return Promise.resolve(cached.site);
      let lookup = pending.get(domain);
      if (lookup === undefined) {
        lookup = lookUp(domain).finally(() => pending.delete(domain));
        pending.set(domain, lookup);
      }
      return lookup;
    },
  };
}

/** A site's name as a metrics label: the named sites as they are, every other (`mx:…`, a domain) `other`. */
export function siteLabel(site: string): string {
  return site in PROVIDER_MX_SUFFIXES || site in BUILT_IN_SITE_LIMITS ? site : 'other';
}
