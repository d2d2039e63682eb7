import { Resolver } from 'node:dns/promises';
import { authenticate } from 'mailauth';
import type { Config } from '../platform/config.ts';

// The sender's authentication of a received message, checked with mailauth: SPF against the client's
// address, its HELO name and the MAIL FROM; every DKIM signature; DMARC for the From domain; the ARC
// chain. Only the verdicts are kept (the shape below, stored as received_emails.authentication), not
// mailauth's whole report. Look-ups go to MAILROOM_DNS_SERVERS (the system resolver when unset), each
// within MAILROOM_DNS_TIMEOUT_MS; a look-up that fails makes that check temperror, never the message.

export interface AuthenticationResults {
  spf: { result: string; domain: string | null };
  dkim: Array<{ result: string; domain: string | null; selector: string | null }>;
  /** null when DMARC could not be evaluated (no From domain, or several). */
  dmarc: { result: string; domain: string | null; policy: string | null } | null;
  arc: { result: string };
}

export interface SenderInfo {
  clientAddress: string;
  helo: string;
  mailFrom: string;
}

export type Authenticator = (raw: Buffer, sender: SenderInfo) => Promise<AuthenticationResults>;

/** SPF's whole evaluation (up to ten look-ups, each within the DNS timeout) is cut at this many. */
const SPF_LOOKUPS_BUDGET = 4;

/** How long a DNS answer (or failure) is reused: mail from one sender comes in runs. */
const DNS_CACHE_MS = 30_000;
const DNS_CACHE_ENTRIES = 10_000;

/**
 * Look-ups shared for DNS_CACHE_MS, and one in flight at a time per name and type, so that a run of
 * messages from one sender asks for its SPF, DKIM key and DMARC record once rather than per message.
 */
function cached<T>(
  lookup: (name: string, type: string) => Promise<T>,
  clock: () => number,
): (name: string, type: string) => Promise<T> {
  const entries = new Map<string, { at: number; answer: Promise<T> }>();
  return (name, type) => {
    const key = `${type} ${name.toLowerCase()}`;
    const now = clock();
    const entry = entries.get(key);
    if (entry && now - entry.at < DNS_CACHE_MS) return entry.answer;
    entries.delete(key);
    if (entries.size >= DNS_CACHE_ENTRIES) entries.delete(entries.keys().next().value!);
    const answer = lookup(name, type);
    answer.catch(() => {}); // the caller handles the failure; the copy kept here must not go unhandled
    entries.set(key, { at: now, answer });
    return answer;
  };
}

export function createAuthenticator(
  config: Pick<Config, 'dnsServers' | 'dnsTimeoutMs' | 'heloName'>,
  options: { clock?: () => number } = {},
): Authenticator {
  const resolver = new Resolver({ timeout: config.dnsTimeoutMs, tries: 1 });
  if (config.dnsServers.length > 0) resolver.setServers(config.dnsServers);
  const resolve = cached(
    (name: string, type: string) => resolver.resolve(name, type) as Promise<string[][] | string[]>,
    options.clock ?? Date.now,
  );
  return async (raw, sender) => {
    const result = await authenticate(raw, {
      ip: sender.clientAddress.replace(/^::ffff:/, ''),
      helo: sender.helo,
      sender: sender.mailFrom,
      ...(config.heloName === undefined ? {} : { mta: config.heloName }),
      resolver: resolve,
      disableBimi: true,
      maxElapsedTime: SPF_LOOKUPS_BUDGET * config.dnsTimeoutMs,
    } as Parameters<typeof authenticate>[1]);
    const spf = result.spf || null;
    const dmarc = result.dmarc || null;
    return {
      spf: { result: spf?.status.result ?? 'none', domain: spf?.domain ?? null },
      dkim: (result.dkim.results ?? []).map((signature) => ({
        // A body changed after signing is a PERMFAIL, which RFC 8601 reports as fail; mailauth's lenient
        // mode says neutral (its strict mode says fail, but is strict about everything else too).
        result:
          signature.status.result === 'neutral' && signature.status.comment === 'body hash did not verify'
            ? 'fail'
            : signature.status.result,
        domain: signature.signingDomain ?? null,
        selector: signature.selector ?? null,
      })),
      dmarc:
        dmarc === null
          ? null
          : {
              result: dmarc.status.result,
              // The From domain the verdict is about (mailauth's `domain` is its organizational domain).
              domain: dmarc.status.header?.from ?? dmarc.domain ?? null,
              policy: dmarc.policy ?? null,
            },
      arc: { result: result.arc ? result.arc.status.result : 'none' },
    };
  };
}
