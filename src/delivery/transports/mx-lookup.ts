import { getServers } from 'node:dns';
import { NODATA, NOTFOUND, Resolver } from 'node:dns/promises';
import { isIPv6 } from 'node:net';
import dns2 from 'dns2';
import type { Config } from '../../platform/config.ts';
import type { MxAnswer } from '../../shaping/sites.ts';

// Where mail for a domain goes (RFC 5321 §5.1): its MX hosts in preference order, or the domain itself
// when it has no MX (the "implicit MX"). A null MX (RFC 7505) or a domain that does not exist is a
// permanent answer; a DNS failure (timeout, SERVFAIL) says nothing and the attempt is deferred.

export interface MailHost {
  /** The MX host name (for TLS SNI and for messages), or the domain itself for an implicit MX. */
  name: string;
  /** IPv4 first: IPv6 senders meet stricter checks (PTR, reputation) at the large receivers. */
  addresses: string[];
}

export type MailRoute =
  { kind: 'hosts'; hosts: MailHost[] } | { kind: 'bounce'; reason: string } | { kind: 'defer'; reason: string };

type Lookup<T> = { records: T[] } | { absent: true } | { failed: string };

export function createMxResolver(config: Pick<Config, 'dnsServers' | 'dnsTimeoutMs'>): Resolver {
  const resolver = new Resolver({ timeout: config.dnsTimeoutMs, tries: 1 });
  if (config.dnsServers.length > 0) resolver.setServers(config.dnsServers);
  return resolver;
}

export async function findMailRoute(resolver: Resolver, domain: string): Promise<MailRoute> {
  const mx = await lookup(() => resolver.resolveMx(domain));
  if ('failed' in mx) {
    return mx.failed === NOTFOUND
      ? { kind: 'bounce', reason: `Domain ${domain} does not exist (NXDOMAIN)` }
      : { kind: 'defer', reason: `DNS lookup of MX for ${domain} failed (${mx.failed})` };
  }
  if ('absent' in mx || mx.records.length === 0) return implicitMx(resolver, domain);
  // "." (the root) as exchange: the domain accepts no mail at all.
  if (mx.records.some((record) => record.exchange === '' || record.exchange === '.')) {
    return { kind: 'bounce', reason: `Domain ${domain} does not accept mail (null MX, RFC 7505)` };
  }
  const names = inPreferenceOrder(mx.records);
  const resolved = await Promise.all(names.map((name) => addressesOf(resolver, name)));
  const hosts = names
    .map((name, at) => ({ name, addresses: resolved[at]!.addresses }))
    .filter((host) => host.addresses.length > 0);
  if (hosts.length > 0) return { kind: 'hosts', hosts };
  // Usually a mistake being fixed, or a passing DNS failure: try again later.
  return { kind: 'defer', reason: `No MX host of ${domain} has an address (${names.join(', ')})` };
}

async function implicitMx(resolver: Resolver, domain: string): Promise<MailRoute> {
  const { addresses, failure } = await addressesOf(resolver, domain);
  if (addresses.length > 0) return { kind: 'hosts', hosts: [{ name: domain, addresses }] };
  if (failure !== undefined) {
    return { kind: 'defer', reason: `DNS lookup of the address of ${domain} failed (${failure})` };
  }
  return { kind: 'bounce', reason: `Domain ${domain} has no MX and no address record` };
}

async function addressesOf(resolver: Resolver, name: string): Promise<{ addresses: string[]; failure?: string }> {
  const [v4, v6] = await Promise.all([lookup(() => resolver.resolve4(name)), lookup(() => resolver.resolve6(name))]);
  const addresses = [v4, v6].flatMap((answer) => ('records' in answer ? answer.records : []));
  // NXDOMAIN for a host name is as final as "no record"; anything else may pass.
  const failure = [v4, v6].find((answer) => 'failed' in answer && answer.failed !== NOTFOUND);
  return { addresses, failure: failure && 'failed' in failure ? failure.failed : undefined };
}

async function lookup<T>(query: () => Promise<T[]>): Promise<Lookup<T>> {
  try {
    return { records: await query() };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
    return code === NODATA ? { absent: true } : { failed: code };
  }
}

/** Lowest preference first; hosts of equal preference in random order, spreading the load (RFC 5321 §5.1). */
function inPreferenceOrder(records: { exchange: string; priority: number }[]): string[] {
  const shuffled = records.map((record) => ({ ...record, tiebreak: Math.random() }));
  shuffled.sort((a, b) => a.priority - b.priority || a.tiebreak - b.tiebreak);
  return [...new Set(shuffled.map((record) => record.exchange.toLowerCase().replace(/\.$/, '')))];
}

/**
 * A domain's MX host names with the time the answer may be kept (its TTL), for keying the domain by its
 * site. Node's resolver does not report an MX record's TTL, so this asks the same servers itself (the
 * configured ones, else the system's), each in turn until one answers. An answer's TTL is the lowest of
 * its records' (CNAMEs on the way included); a negative answer's is its SOA's (RFC 2308), when given.
 * A failure (timeout, SERVFAIL, an answer truncated for UDP) is thrown.
 */
export function createMxTtlLookup(
  config: Pick<Config, 'dnsServers' | 'dnsTimeoutMs'>,
): (domain: string) => Promise<MxAnswer> {
  const servers = (config.dnsServers.length > 0 ? config.dnsServers : getServers()).map(hostAndPort);
  const clients = servers.map((server) =>
    dns2.UDPClient({
      dns: server.host,
      port: server.port,
      socketType: isIPv6(server.host) ? 'udp6' : 'udp4',
      timeout: config.dnsTimeoutMs,
      // Its TCP client has no timeout and mistakes an IPv6 server for a host name: a truncated answer
      // is taken as a failure instead (the domain is its own site for a while; MX sets that large are rare).
      retryOverTCP: false,
    }),
  );
  return async (domain) => {
    let failure: unknown = new Error('No DNS server to ask');
    for (const ask of clients) {
      try {
        return answerOf(await withTimeout(ask(domain, 'MX'), config.dnsTimeoutMs * 2));
      } catch (error) {
        failure = error;
      }
    }
    throw failure;
  };
}

const RCODE_NXDOMAIN = 3;

function answerOf(response: InstanceType<typeof dns2.Packet>): MxAnswer {
  const rcode = response.header.rcode;
  if (response.header.tc) throw Object.assign(new Error('DNS answer truncated'), { code: 'ETRUNCATED' });
  if (rcode !== 0 && rcode !== RCODE_NXDOMAIN) {
    throw Object.assign(new Error(`DNS answered rcode ${rcode}`), { code: rcode === 2 ? 'ESERVFAIL' : 'EBADRESP' });
  }
  const records = response.answers.filter(
    (record) => record.type === dns2.Packet.TYPE.MX || record.type === dns2.Packet.TYPE.CNAME,
  );
  const exchanges = records
    .filter((record) => record.type === dns2.Packet.TYPE.MX)
    .map((record) => String((record as { exchange?: string }).exchange ?? ''));
  if (rcode === 0 && exchanges.length > 0) {
    return { exchanges, ttlSeconds: Math.min(...records.map((record) => record.ttl)) };
  }
  const soa = response.authorities.find((record) => record.type === dns2.Packet.TYPE.SOA) as
    { ttl: number; minimum?: number } | undefined;
  return {
    exchanges: [],
    absent: rcode === RCODE_NXDOMAIN ? 'nxdomain' : 'nodata',
    ttlSeconds: soa ? Math.min(soa.ttl, soa.minimum ?? soa.ttl) : undefined,
  };
}

/** `1.2.3.4`, `1.2.3.4:53`, `::1`, `[::1]:53`: the forms a resolver's server list takes. */
function hostAndPort(server: string): { host: string; port: number } {
  const bracketed = /^\[(.+)\](?::(\d+))?$/.exec(server);
  if (bracketed) return { host: bracketed[1]!, port: Number(bracketed[2] ?? 53) };
  if (isIPv6(server)) return { host: server, port: 53 };
  const [host, port] = server.split(':');
  return { host: host!, port: Number(port ?? 53) };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('DNS query timed out'), { code: 'ETIMEOUT' })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
