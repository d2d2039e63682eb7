import { isIP } from 'node:net';
import type { Resolver } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

// SPF (RFC 7208) as a receiver evaluates it, for the doctor: would mail from `address` with this envelope
// domain pass? Mechanisms all, ip4, ip6, a, mx, include, exists and ptr (ptr is deprecated and counted,
// never matched), the redirect modifier, qualifiers; the 10 DNS look-up limit (include, a, mx, ptr,
// exists, redirect each count; RFC 7208 §4.6.4) and the limit of 2 look-ups that find nothing.

export type SpfResult = 'pass' | 'fail' | 'softfail' | 'neutral' | 'none' | 'permerror' | 'temperror';

export interface SpfEvaluation {
  result: SpfResult;
  /** DNS look-ups the evaluation took (the limit is 10). */
  lookups: number;
  /** Why, in words: the mechanism that matched, or the error. */
  reason: string;
}

export const SPF_LOOKUP_LIMIT = 10;
const VOID_LOOKUP_LIMIT = 2;

class SpfError extends Error {
  readonly result: 'permerror' | 'temperror';
  constructor(result: 'permerror' | 'temperror', message: string) {
    super(message);
    this.result = result;
  }
}

const QUALIFIERS: Record<string, SpfResult> = { '+': 'pass', '-': 'fail', '~': 'softfail', '?': 'neutral' };

export async function evaluateSpf(resolver: Resolver, address: string, domain: string): Promise<SpfEvaluation> {
  const counter = { lookups: 0, voids: 0 };
  try {
    const { result, reason } = await check(resolver, address, domain.toLowerCase(), counter, 0);
    return { result, lookups: counter.lookups, reason };
  } catch (error) {
    if (error instanceof SpfError) return { result: error.result, lookups: counter.lookups, reason: error.message };
    throw error;
  }
}

async function spfRecord(resolver: Resolver, domain: string): Promise<string | undefined> {
  let records: string[][];
  try {
    records = await resolver.resolveTxt(domain);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') return undefined;
    throw new SpfError('temperror', `the TXT look-up of ${domain} failed (${code})`);
  }
  const spf = records.map((chunks) => chunks.join('')).filter((text) => /^v=spf1(\s|$)/i.test(text));
  if (spf.length > 1) throw new SpfError('permerror', `${domain} publishes ${spf.length} SPF records (one is allowed)`);
  return spf[0];
}

async function check(
  resolver: Resolver,
  address: string,
  domain: string,
  counter: { lookups: number; voids: number },
  depth: number,
): Promise<{ result: SpfResult; reason: string }> {
  const record = await spfRecord(resolver, domain);
  if (record === undefined) {
    return { result: 'none', reason: depth === 0 ? `${domain} publishes no SPF record` : `no SPF record at ${domain}` };
  }
  const terms = record.split(/\s+/).slice(1).filter(Boolean);
  let redirect: string | undefined;
  for (const term of terms) {
    const modifier = /^([a-z][a-z0-9_.-]*)=(.*)$/i.exec(term);
    if (modifier) {
      if (modifier[1]!.toLowerCase() === 'redirect') redirect = modifier[2]!.toLowerCase();
      continue;
    }
    const match = /^([+?~-]?)([a-z0-9]+)(?::([^/]+))?(?:\/(\d+))?(?:\/\/(\d+))?$/i.exec(term);
    if (!match) throw new SpfError('permerror', `${domain}: "${term}" is not an SPF term`);
    const qualifier = QUALIFIERS[match[1] || '+']!;
    const mechanism = match[2]!.toLowerCase();
    const target = (match[3] ?? domain).toLowerCase();
    const cidr4 = match[4] === undefined ? undefined : Number(match[4]);
    const cidr6 = match[5] === undefined ? undefined : Number(match[5]);
    const said = `${domain}: ${term}`;
    // A prefix length out of range is a syntax error (RFC 7208 §5.6), never a loop over huge numbers.
    const ip6Term = mechanism === 'ip6';
    if (cidr4 !== undefined && cidr4 > (ip6Term ? 128 : 32))
      throw new SpfError('permerror', `${said}: prefix length out of range`);
    if (cidr6 !== undefined && cidr6 > 128) throw new SpfError('permerror', `${said}: prefix length out of range`);
    // Macros (%{i}, %{d} …) are not expanded here: such a term is passed over, neither matched nor looked up.
    if (target.includes('%')) continue;
    switch (mechanism) {
      case 'all':
        return { result: qualifier, reason: said };
      case 'ip4':
      case 'ip6': {
        if (!match[3] || isIP(match[3]) !== (mechanism === 'ip4' ? 4 : 6)) {
          throw new SpfError('permerror', `${said}: not an ${mechanism === 'ip4' ? 'IPv4' : 'IPv6'} address`);
        }
        if (inNetwork(address, match[3], match[4])) return { result: qualifier, reason: said };
        break;
      }
      case 'a': {
        const addresses = await lookupAddresses(resolver, target, counter);
        if (addresses.some((a) => inNetwork(address, a, String(isIP(a) === 4 ? (cidr4 ?? 32) : (cidr6 ?? 128)))))
          return { result: qualifier, reason: said };
        break;
      }
      case 'mx': {
        count(counter, said);
        const exchanges = await resolveOrVoid(() => resolver.resolveMx(target), counter, target);
        if (exchanges.length > 10) throw new SpfError('permerror', `${said}: more than 10 MX records`);
        for (const { exchange } of exchanges) {
          const addresses = await addressesOf(resolver, exchange);
          if (addresses.some((a) => inNetwork(address, a, String(isIP(a) === 4 ? (cidr4 ?? 32) : (cidr6 ?? 128)))))
            return { result: qualifier, reason: said };
        }
        break;
      }
      case 'include': {
        if (!match[3]) throw new SpfError('permerror', `${said} names no domain`);
        count(counter, said);
        if (depth > SPF_LOOKUP_LIMIT) throw new SpfError('permerror', `${said}: includes nest too deep`);
        const inner = await check(resolver, address, target, counter, depth + 1);
        if (inner.result === 'pass') return { result: qualifier, reason: `${said} (${inner.reason})` };
        if (inner.result === 'none') throw new SpfError('permerror', `${said}: ${target} publishes no SPF record`);
        if (inner.result === 'permerror' || inner.result === 'temperror') return inner;
        break;
      }
      case 'exists': {
        count(counter, said);
        const found = await resolveOrVoid(() => resolver.resolve4(target), counter, target);
        if (found.length > 0) return { result: qualifier, reason: said };
        break;
      }
      case 'ptr':
        // Deprecated (RFC 7208 §5.5): counted as a look-up, never relied on.
        count(counter, said);
        break;
      default:
        throw new SpfError('permerror', `${said}: unknown mechanism ${mechanism}`);
    }
  }
  if (redirect !== undefined) {
    count(counter, `${domain}: redirect=${redirect}`);
    const inner = await check(resolver, address, redirect, counter, depth + 1);
    if (inner.result === 'none') throw new SpfError('permerror', `${domain}: redirect=${redirect} has no SPF record`);
    return inner;
  }
  return { result: 'neutral', reason: `${domain}: no mechanism matched and there is no "all"` };
}

function count(counter: { lookups: number }, term: string): void {
  counter.lookups += 1;
  if (counter.lookups > SPF_LOOKUP_LIMIT) {
    throw new SpfError('permerror', `more than ${SPF_LOOKUP_LIMIT} DNS look-ups (at ${term})`);
  }
}

async function resolveOrVoid<T>(lookup: () => Promise<T[]>, counter: { voids: number }, name: string): Promise<T[]> {
  try {
    const found = await lookup();
    if (found.length === 0) countVoid(counter, name);
    return found;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') {
      countVoid(counter, name);
      return [];
    }
    throw new SpfError('temperror', `the look-up of ${name} failed (${code})`);
  }
}

function countVoid(counter: { voids: number }, name: string): void {
  counter.voids += 1;
  if (counter.voids > VOID_LOOKUP_LIMIT) {
    throw new SpfError(
      'permerror',
      `more than ${VOID_LOOKUP_LIMIT} void look-ups, names that do not exist (at ${name})`,
    );
  }
}

async function lookupAddresses(resolver: Resolver, name: string, counter: { lookups: number; voids: number }) {
  count(counter, `a:${name}`);
  const found = await addressesOf(resolver, name);
  if (found.length === 0) countVoid(counter, name);
  return found;
}

async function addressesOf(resolver: Resolver, name: string): Promise<string[]> {
  const settle = async (lookup: () => Promise<string[]>) => {
    try {
      return await lookup();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA') return [];
      throw new SpfError('temperror', `the address look-up of ${name} failed (${code})`);
    }
  };
  return [...(await settle(() => resolver.resolve4(name))), ...(await settle(() => resolver.resolve6(name)))];
}

/** Whether `address` is within `network` (an address, optionally with a prefix length). */
function inNetwork(address: string, network: string, prefix: string | undefined): boolean {
  if (!ipaddr.isValid(address) || !ipaddr.isValid(network)) return false;
  const a = ipaddr.process(address);
  const n = ipaddr.process(network);
  if (a.kind() !== n.kind()) return false;
  const bits = prefix === undefined ? (n.kind() === 'ipv4' ? 32 : 128) : Number(prefix);
  return a.match(n, bits);
}
