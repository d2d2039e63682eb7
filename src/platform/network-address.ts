import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import ipaddr from 'ipaddr.js';

// Which addresses Mailroom may connect to on behalf of an organization (a webhook endpoint, a recipient
// domain's mail servers): only public unicast ones, so that no customer can point Mailroom at the
// operator's own network (loopback, RFC 1918, cloud metadata on 169.254.169.254, CGNAT, unique-local,
// and the mapped, translated and tunnelled forms of those). Each caller passes the ranges its operator
// setting exempts (for tests, or a private relay network).

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/**
 * IPv4 ranges that are never public, listed here as well as in ipaddr.js's range() so the rule does not
 * hang on one library's table: "this network", RFC 1918, CGNAT, loopback, link-local, IETF protocol
 * assignments, the documentation and benchmarking nets, the 6to4 relay anycast, multicast and 240/4.
 */
const NON_PUBLIC_V4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
].map((cidr) => ipaddr.IPv4.parseCIDR(cidr));

/** 2000::/3, the only IPv6 space allocated for global unicast. */
const GLOBAL_UNICAST_V6: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('2000::'), 3];
/** RFC 6052 well-known NAT64 prefix: the last 32 bits are the IPv4 address the gateway reaches. */
const NAT64_WELL_KNOWN: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('64:ff9b::'), 96];

const RANGE_WORDS: Record<string, string> = {
  unspecified: 'an unspecified address',
  broadcast: 'a broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT address',
  private: 'a private address',
  uniqueLocal: 'a unique-local address',
  reserved: 'a reserved address',
  benchmarking: 'a benchmarking address',
  ipv4Mapped: 'an IPv4-mapped address',
  rfc6145: 'an IPv4-translated address',
  rfc6052: 'a NAT64 address',
  '6to4': 'a 6to4 tunnel address',
  teredo: 'a Teredo tunnel address',
  discard: 'a discard-only address',
  deprecatedSiteLocal: 'a site-local address',
  segmentRouting: 'a segment-routing address',
  as112: 'an AS112 address',
  as112v6: 'an AS112 address',
  amt: 'an AMT relay address',
};

const parsedAllowLists = new WeakMap<readonly string[], [Address, number][]>();

function allowList(allowCidrs: readonly string[]): [Address, number][] {
  let parsed = parsedAllowLists.get(allowCidrs);
  if (parsed === undefined) {
    parsed = [];
    // The config already checked the shape; an entry ipaddr.js still cannot read exempts nothing.
    for (const cidr of allowCidrs) {
      try {
        parsed.push(ipaddr.parseCIDR(cidr));
      } catch {
        // ignored: fails closed
      }
    }
    parsedAllowLists.set(allowCidrs, parsed);
  }
  return parsed;
}

function isAllowed(address: Address, allowCidrs: readonly string[]): boolean {
  const cidrs = allowList(allowCidrs);
  if (cidrs.length === 0) return false;
  // An IPv4-mapped address (::ffff:127.0.0.1) is the IPv4 address for every purpose: test both forms.
  const v6 = address.kind() === 'ipv6' ? (address as ipaddr.IPv6) : (address as ipaddr.IPv4).toIPv4MappedAddress();
  const v4 =
    address.kind() === 'ipv4' ? (address as ipaddr.IPv4) : v6.isIPv4MappedAddress() ? v6.toIPv4Address() : null;
  return cidrs.some(([network, bits]) =>
    network.kind() === 'ipv4' ? v4 !== null && v4.match(network, bits) : v6.match(network, bits),
  );
}

function v4Problem(address: ipaddr.IPv4): string | undefined {
  const range = address.range();
  if (range !== 'unicast') return RANGE_WORDS[range] ?? `a ${range} address`;
  if (NON_PUBLIC_V4.some(([network, bits]) => address.match(network, bits))) return 'a non-public address';
  return undefined;
}

function v6Problem(address: ipaddr.IPv6): string | undefined {
  if (address.match(NAT64_WELL_KNOWN)) {
    // DNS64 networks synthesise these for IPv4-only names; judge the IPv4 address the gateway would reach.
    const [a, b] = [address.parts[6]!, address.parts[7]!];
    const embedded = new ipaddr.IPv4([a >> 8, a & 0xff, b >> 8, b & 0xff]);
    const problem = v4Problem(embedded);
    return problem === undefined ? undefined : `a NAT64 address embedding ${embedded.toString()}, ${problem}`;
  }
  const range = address.range();
  if (range !== 'unicast') {
    // 6to4, Teredo, the local-use NAT64 prefix and IPv4-translated forms all tunnel or translate to an
    // IPv4 address that may be private; none is needed to reach a real receiver, so all are refused.
    return RANGE_WORDS[range] ?? `a ${range} address`;
  }
  // Outside 2000::/3 lie the IPv4-compatible ::a.b.c.d form and space the IETF never allocated.
  if (!address.match(GLOBAL_UNICAST_V6)) return 'a reserved address';
  return undefined;
}

/**
 * Why Mailroom may not connect to `address`, in words ("a loopback address"), or undefined when it may.
 * `address` must be a plain IP address (as a resolver or a WHATWG URL host gives it, IPv6 without
 * brackets); anything else is refused. IPv4-mapped IPv6 is judged as the IPv4 address it carries.
 */
export function forbiddenAddressReason(address: string, allowCidrs: readonly string[]): string | undefined {
  // node:net is strict (dotted-quad IPv4 only), where ipaddr.js would also read 0x7f.1 and the like.
  if (isIP(address) === 0) return 'not an IP address';
  let parsed: Address;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return 'not an IP address';
  }
  if (isAllowed(parsed, allowCidrs)) return undefined;
  const processed =
    parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()
      ? (parsed as ipaddr.IPv6).toIPv4Address()
      : parsed;
  return processed.kind() === 'ipv4' ? v4Problem(processed as ipaddr.IPv4) : v6Problem(processed as ipaddr.IPv6);
}

/** True when Mailroom must not connect to `address` (see forbiddenAddressReason). */
export function isForbiddenAddress(address: string, allowCidrs: readonly string[]): boolean {
  return forbiddenAddressReason(address, allowCidrs) !== undefined;
}

/** `localhost` and `*.localhost` (RFC 6761): local by definition, refused without a look-up. */
export function isLocalhostName(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.+$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * Whether a connection can be bound to `address` on this host: one of its interfaces' addresses, or
 * within a loopback interface's network (Linux answers for all of 127.0.0.0/8 on `lo`).
 */
export function isLocalAddress(address: string, interfaces = networkInterfaces()): boolean {
  if (!ipaddr.isValid(address)) return false;
  const wanted = ipaddr.process(address);
  for (const entries of Object.values(interfaces)) {
    for (const entry of entries ?? []) {
      if (!ipaddr.isValid(entry.address)) continue;
      const own = ipaddr.process(entry.address);
      if (own.kind() !== wanted.kind()) continue;
      if (own.toNormalizedString() === wanted.toNormalizedString()) return true;
      if (entry.internal && entry.cidr && wanted.match(ipaddr.parseCIDR(entry.cidr) as [Address, number])) return true;
    }
  }
  return false;
}
