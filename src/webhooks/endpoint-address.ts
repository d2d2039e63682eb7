import { lookup, NODATA, NOTFOUND, Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Config } from '../platform/config.ts';
import { ServiceError } from '../platform/errors.ts';
import { forbiddenAddressReason, isForbiddenAddress, isLocalhostName } from '../platform/network-address.ts';

export { forbiddenAddressReason, isForbiddenAddress, isLocalhostName };

// Which addresses a webhook may reach: only public unicast ones (platform/network-address.ts). The same
// rules serve at registration (parseEndpointUrl) and at connect time (safe-dispatcher.ts), where they
// judge the address the socket is about to connect to. MAILROOM_WEBHOOK_ALLOW_CIDRS exempts ranges, for tests.

export const MAX_ENDPOINT_LENGTH = 2048;

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** A host name that gave no address: `notFound` when DNS says it has none, else the look-up failed. */
export class HostResolutionError extends Error {
  readonly code = 'ERR_WEBHOOK_HOST_RESOLUTION';
  readonly hostname: string;
  readonly notFound: boolean;
  /** The resolver's error codes, e.g. "A: ETIMEOUT". */
  readonly detail: string;
  constructor(hostname: string, notFound: boolean, detail: string) {
    super(notFound ? `${hostname} does not resolve` : `${hostname} could not be resolved (${detail})`);
    this.name = 'HostResolutionError';
    this.hostname = hostname;
    this.notFound = notFound;
    this.detail = detail;
  }
}

const ABSENT = new Set<string>([NOTFOUND, NODATA]);

export type HostResolver = (hostname: string) => Promise<ResolvedAddress[]>;

/**
 * Every address of a host name, IPv4 first: through MAILROOM_DNS_SERVERS (A and AAAA, c-ares) when set,
 * else the system's resolver (getaddrinfo, so /etc/hosts counts), within MAILROOM_DNS_TIMEOUT_MS.
 * Registration and delivery share it, so both judge the same answers. Throws HostResolutionError when
 * no address comes back, and also when one family's look-up failed (its addresses are unknown).
 */
export function createHostResolver(config: Config): HostResolver {
  if (config.dnsServers.length === 0) {
    return async (hostname) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new HostResolutionError(hostname, false, 'timed out')), config.dnsTimeoutMs);
      });
      try {
        const answers = await Promise.race([lookup(hostname, { all: true, order: 'ipv4first' }), timeout]);
        const addresses = answers
          .filter((answer) => answer.family === 4 || answer.family === 6)
          .map(({ address, family }) => ({ address, family: family as 4 | 6 }));
        if (addresses.length === 0) throw new HostResolutionError(hostname, true, NOTFOUND);
        return addresses;
      } catch (error) {
        if (error instanceof HostResolutionError) throw error;
        const code = (error as NodeJS.ErrnoException).code ?? 'error';
        throw new HostResolutionError(hostname, code === 'ENOTFOUND' || code === NODATA, code);
      } finally {
        clearTimeout(timer);
      }
    };
  }
  const resolver = new Resolver({ timeout: config.dnsTimeoutMs, tries: 1 });
  resolver.setServers(config.dnsServers);
  return async (hostname) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)]);
    const addresses: ResolvedAddress[] = [];
    const failures: string[] = [];
    for (const [result, family] of [
      [v4, 4],
      [v6, 6],
    ] as const) {
      if (result.status === 'fulfilled') addresses.push(...result.value.map((address) => ({ address, family })));
      else {
        const code = (result.reason as NodeJS.ErrnoException).code ?? 'error';
        if (!ABSENT.has(code)) failures.push(`${family === 4 ? 'A' : 'AAAA'}: ${code}`);
      }
    }
    if (failures.length > 0) throw new HostResolutionError(hostname, false, failures.join(', '));
    if (addresses.length === 0) throw new HostResolutionError(hostname, true, NOTFOUND);
    return addresses;
  };
}

function refuse(message: string): ServiceError {
  return new ServiceError('invalid_webhook_endpoint', message, 'endpoint');
}

/**
 * Checks a webhook endpoint given at registration and returns it parsed. Refused (400
 * invalid_webhook_endpoint, field endpoint, saying why): not a URL, over 2048 characters, whitespace or
 * control characters, a scheme other than http/https, credentials, no host, a host that is a forbidden
 * IP address in any spelling (WHATWG URL turns 2130706433, 0177.0.0.1, 0x7f.1 and 127.1 into dotted
 * IPv4 first), `localhost` names, and a name that does not resolve or has any forbidden address.
 */
export async function parseEndpointUrl(raw: string, config: Config): Promise<URL> {
  if (typeof raw !== 'string' || raw === '') throw refuse('endpoint must be a non-empty URL');
  if (raw.length > MAX_ENDPOINT_LENGTH) throw refuse(`endpoint is longer than ${MAX_ENDPOINT_LENGTH} characters`);
  // The URL parser would silently drop tabs and newlines and trim spaces: refuse them instead.
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(raw)) throw refuse('endpoint must not contain whitespace or control characters');
  const url = URL.parse(raw);
  if (url === null) throw refuse('endpoint is not a valid URL');
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw refuse(`endpoint must be an http or https URL, not ${url.protocol}`);
  }
  if (url.username !== '' || url.password !== '') {
    throw refuse('endpoint must not contain credentials (user:password@)');
  }
  if (url.hostname === '') throw refuse('endpoint has no host');

  const allow = config.webhookAllowCidrs;
  const literal = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (isIP(literal) !== 0) {
    const problem = forbiddenAddressReason(literal, allow);
    if (problem !== undefined) {
      throw refuse(`endpoint host ${url.hostname} is ${problem}; webhooks must reach a public address`);
    }
    return url;
  }
  if (isLocalhostName(url.hostname)) {
    throw refuse(`endpoint host ${url.hostname} is a local name; webhooks must reach a public address`);
  }

  let addresses: ResolvedAddress[];
  try {
    addresses = await createHostResolver(config)(url.hostname);
  } catch (error) {
    if (!(error instanceof HostResolutionError)) throw error;
    throw refuse(
      error.notFound
        ? `endpoint host ${url.hostname} does not resolve to any address`
        : `endpoint host ${url.hostname} could not be resolved (${error.detail}); try again later`,
    );
  }
  for (const { address } of addresses) {
    const problem = forbiddenAddressReason(address, allow);
    if (problem !== undefined) {
      throw refuse(
        `endpoint host ${url.hostname} resolves to ${address}, ${problem}; webhooks must reach a public address`,
      );
    }
  }
  return url;
}
