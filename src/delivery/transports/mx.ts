import { isIP } from 'node:net';
import type { Config } from '../../platform/config.ts';
import { forbiddenAddressReason } from '../../platform/network-address.ts';
import type { ConnectionOptions } from 'node:tls';
import type { ShapedConnection, ShapeTarget, Shaper } from '../../shaping/shaper.ts';
import { compileEgress, type AddressSource, type Egress } from '../../shaping/egress.ts';
import type { SiteResolver } from '../../shaping/sites.ts';
import { composeInline, type Composer } from '../composer.ts';
import { isTlsFailure } from '../smtp-outcome.ts';
import type { OutgoingMessage, RecipientResult, Transport } from '../transport.ts';
import { createMxResolver, findMailRoute, type MailHost } from './mx-lookup.ts';
import { enforcedTlsFailure, RouteFailure, shapedSend } from './shaped-send.ts';
import { SmtpSession } from './smtp-session.ts';
import { openRelaySession } from './smtp-relay.ts';
import { mxMatches, type MtaSts, type MtaStsPolicy, type TlsRule } from './mta-sts.ts';

// Direct delivery: recipients are grouped by domain, and each domain gets one SMTP transaction with
// all of its recipients, over a connection to the domain's destination *site* (src/shaping/): the
// provider that runs its mail, its set of MX hosts, or the domain. Connections are kept and reused
// across messages and domains of one site, within the site's limits, which hold across every worker
// process. A new connection tries the domain's mail hosts in preference order while they fail before
// the transaction begins (no connection, timeout, refusing greeting or EHLO); once one has answered
// MAIL FROM, its answer stands.
//
// TLS is opportunistic, as between MTAs on the Internet without MTA-STS or DANE: STARTTLS is used
// whenever the server offers it, certificates are not checked (MX certificates are often self-signed
// or name another host, and refusing them would only push the message to plaintext), and when the TLS
// handshake itself fails the same address is tried once more without STARTTLS. A domain with an
// MTA-STS policy in `enforce` mode (mta-sts.ts), or one the operator marks TLS-required, gets its mail
// only over TLS with a certificate valid for an MX host its policy names; otherwise its recipients are
// deferred with the reason. A policy in `testing` mode delivers as usual and says on the timeline when
// TLS fell short of it.
//
// A sending domain with tls 'enforced' (Resend's option) never has its mail sent in the clear: STARTTLS
// is required (no fallback), though the certificate need not be valid unless the recipient domain's
// terms above say so; a host without STARTTLS, or whose handshake fails, is not given the message, and
// when no host gives TLS the recipients are deferred with the reason, as for a TLS-required domain. A
// relay source's connection must be TLS too (smtp-relay.ts).
//
// Each domain's mail goes through the egress pool of its sending domain (or organization), from one of
// the pool's sources in turn: bound to a source's local address and greeting with its EHLO name, or
// handed to a relay source (src/shaping/egress.ts).

type MxConfig = Pick<Config, 'mxPort' | 'heloName' | 'smtpTimeoutMs' | 'dnsServers' | 'dnsTimeoutMs' | 'mxAllowCidrs'>;

/** Addresses tried per domain at most, so a domain listing many dead hosts cannot hold a worker for long. */
const MAX_ADDRESSES_PER_DOMAIN = 6;

export interface MxTransportOptions {
  composer?: Composer;
  /** Traffic shaping: connections, rates and holds per destination site, shared by every process. */
  shaper: Shaper;
  /** The site of each recipient domain (from its MX hosts, cached). */
  sites: SiteResolver;
  /** Sources, pools and routing (default: the one source `default`, the host's own address). */
  egress?: Egress;
  /** TLS settings for relay sources (tests relax certificate checks here). */
  relayTls?: ConnectionOptions;
  /** MTA-STS policies and the operator's TLS-required domains; default: opportunistic TLS everywhere. */
  mtaSts?: MtaSts;
}

export function createMxTransport(config: MxConfig, options: MxTransportOptions): Transport {
  const resolver = createMxResolver(config);
  const composer = options.composer ?? composeInline;
  const { shaper, sites } = options;
  const egress = options.egress ?? compileEgress({});

  /** The ways a domain's mail may go: its pool's sources (a relay source's site is `relay`), then its overflow. */
  const targetsFor = (message: OutgoingMessage, site: string): ShapeTarget[] => {
    const pool = egress.poolFor({ organizationId: message.organizationId, senderDomain: message.dkim.domain, site });
    const targetOf = (name: string): ShapeTarget => {
      const source = egress.sources.get(name)!;
      if (source.kind === 'relay') return { source: name, site: 'relay' };
      return source.warmup ? { source: name, site, warmup: egress.stagesFor(site) } : { source: name, site };
    };
    const targets = pool.sources.map(targetOf);
    if (pool.overflow !== undefined) targets.push({ ...targetOf(pool.overflow), overflow: true });
    return targets;
  };

  /**
   * A connection to one of the domain's mail hosts, tried in preference order while they fail before
   * the transaction begins (no connection, timeout, refusing greeting or EHLO). A domain that cannot be
   * reached at all gives its recipients' results (RouteFailure).
   */
  async function connectToDomain(
    domain: string,
    recipients: string[],
    tried: { last?: string },
    source: AddressSource,
    rule: TlsRule,
    sender: { domain: string; enforced: boolean },
  ): Promise<SmtpSession> {
    const route = await findMailRoute(resolver, domain);
    if (route.kind !== 'hosts') {
      const outcome = route.kind === 'bounce' ? 'bounced' : 'deferred';
      throw new RouteFailure(
        recipients.map((address) => ({ address, outcome, smtpCode: undefined, response: route.reason }) as const),
      );
    }
    // A recipient domain is anyone's to point at any address: only public ones are connected to, so no
    // organization can make Mailroom talk to hosts on the operator's own network.
    const refused: string[] = [];
    const hosts = route.hosts
      .map(({ name, addresses }) => ({
        name,
        addresses: addresses.filter((address) => {
          const reason = forbiddenAddressReason(address, config.mxAllowCidrs);
          if (reason !== undefined) refused.push(`${name} [${address}]: ${reason}`);
          return reason === undefined;
        }),
      }))
      .filter(({ addresses }) => addresses.length > 0);
    if (hosts.length === 0) {
      const response = `5.4.4 Not delivered: the mail servers of ${domain} resolve only to addresses Mailroom does not connect to (${refused.join('; ')})`;
      throw new RouteFailure(
        recipients.map((address) => ({ address, outcome: 'bounced', smtpCode: undefined, response }) as const),
      );
    }
    const { strict, named } = tlsTerms(rule);
    // The sending domain's 'enforced' asks for TLS only; the recipient domain's terms may ask for more.
    const encryptedOnly = !strict && sender.enforced;
    const why =
      rule.kind === 'required'
        ? `${domain} requires TLS (the operator's setting)`
        : `the MTA-STS policy of ${domain} (${rule.kind === 'mta-sts' ? rule.policy.mode : ''})`;
    const deferAll = (response: string): never => {
      throw new RouteFailure(
        recipients.map((address) => ({ address, outcome: 'deferred', smtpCode: undefined, response }) as const),
      );
    };
    const candidates = strict ? hosts.filter(({ name }) => named(name)) : hosts;
    if (candidates.length === 0) {
      const patterns = rule.kind === 'mta-sts' ? rule.policy.mx.join(', ') : '';
      deferAll(
        `4.7.5 Not delivered: no MX host of ${domain} (${hosts.map((h) => h.name).join(', ')}) is one that ${why} names (mx: ${patterns})`,
      );
    }
    let lastError: unknown;
    const refusals: string[] = [];
    for (const { host, address } of attemptsFor(candidates)) {
      tried.last = `${host} [${address}]`;
      try {
        const session = strict
          ? await openVerified(config, { host, address }, source, options.mtaSts!.ca)
          : encryptedOnly
            ? await openSession(config, { host, address }, source, 'required', options.mtaSts?.ca)
            : await openWithTlsFallback(config, { host, address }, source, options.mtaSts?.ca);
        session.mxHost = host;
        return session;
      } catch (error) {
        lastError = error;
        if (strict || encryptedOnly) refusals.push(`${host} [${address}]: ${(error as Error).message}`);
      }
    }
    if (strict) {
      deferAll(
        `4.7.5 Not delivered: ${why} requires TLS with a certificate valid for the MX host: ${refusals.join('; ')}`,
      );
    }
    if (encryptedOnly) throw enforcedTlsFailure(recipients, sender.domain, refusals);
    throw lastError;
  }

  return {
    name: 'mx',
    async send(message: OutgoingMessage): Promise<RecipientResult[]> {
      if (message.envelope.to.length === 0) return [];
      const raw = await composer.compose(message);
      const senderDomain = message.dkim.domain;
      const perDomain = await Promise.all(
        [...groupByDomain(message.envelope.to)].map(async ([domain, recipients]) => {
          const site = await sites.siteFor(domain);
          const tried: { last?: string } = {};
          // Read before any connection is chosen: a kept connection of the site serves this domain only
          // if it meets the domain's TLS terms.
          const rule: TlsRule = (await options.mtaSts?.ruleFor(domain)) ?? { kind: 'opportunistic' };
          const { strict, named } = tlsTerms(rule);
          const sender = { domain: senderDomain, enforced: message.tls === 'enforced' };
          const request = {
            site,
            senderDomain,
            organizationId: message.organizationId,
            fresh: message.firstAttempt,
            targets: targetsFor(message, site),
            recipients: recipients.length,
            // With the sending domain's tls 'enforced', any session (relay or MX) must be TLS. Otherwise a
            // relay session (no MX host) is the relay's matter; a strict MX session must be verified for a
            // named host.
            reuse:
              strict || sender.enforced
                ? (connection: ShapedConnection) => {
                    const session = connection as SmtpSession;
                    if (sender.enforced && !session.tlsState().secure) return false;
                    if (!strict || session.mxHost === undefined) return true;
                    return named(session.mxHost) && session.tlsState().authorized;
                  }
                : undefined,
          };
          const connect = (target: ShapeTarget) => {
            const source = egress.sources.get(target.source)!;
            if (source.kind === 'address') return connectToDomain(domain, recipients, tried, source, rule, sender);
            tried.last = `relay ${source.host}:${source.port}`;
            const relay = { ...source, tls: options.relayTls };
            return openRelaySession(relay, source.ehlo ?? config.heloName, config.smtpTimeoutMs, {
              enforcedFor: sender.enforced ? { domain: senderDomain, recipients } : undefined,
            });
          };
          return shapedSend(shaper, request, { from: message.envelope.from, to: recipients }, raw, connect, {
            context: () => tried.last,
            tellSource: egress.declared,
            tlsNote: rule.kind === 'mta-sts' ? (session) => testingNote(domain, rule.policy, session) : undefined,
          });
        }),
      );
      // Answer in the order the addresses were given.
      const byAddress = new Map(perDomain.flat().map((result) => [result.address, result]));
      return message.envelope.to.map((address) => byAddress.get(address)!);
    },
    close: async () => {
      await shaper.close();
      await composer.close();
      await options.mtaSts?.close();
    },
  };
}

/** Whether the domain's mail must go over verified TLS, and which MX hosts it may go to. */
function tlsTerms(rule: TlsRule) {
  return {
    strict: rule.kind === 'required' || (rule.kind === 'mta-sts' && rule.policy.mode === 'enforce'),
    named: (host: string) => rule.kind !== 'mta-sts' || rule.policy.mx.some((pattern) => mxMatches(pattern, host)),
  };
}

/** Testing mode: delivered whatever TLS gave; what the timeline says where the session fell short of the policy. */
function testingNote(domain: string, policy: MtaStsPolicy, session: SmtpSession): string | undefined {
  if (policy.mode !== 'testing' || session.mxHost === undefined) return undefined;
  const host = session.mxHost;
  const tls = session.tlsState();
  const problems = [
    ...(policy.mx.some((pattern) => mxMatches(pattern, host))
      ? []
      : [`${host} is not named by the policy (mx: ${policy.mx.join(', ')})`]),
    ...(tls.authorized ? [] : [`${host}: ${tls.problem}`]),
  ];
  return problems.length > 0
    ? `MTA-STS policy of ${domain} in testing mode not met: ${problems.join('; ')}`
    : undefined;
}

function groupByDomain(addresses: string[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const address of addresses) {
    const domain = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
    groups.set(domain, [...(groups.get(domain) ?? []), address]);
  }
  return groups;
}

function* attemptsFor(hosts: MailHost[]): Generator<{ host: string; address: string }> {
  let tried = 0;
  for (const { name, addresses } of hosts) {
    for (const address of addresses) {
      if (tried++ === MAX_ADDRESSES_PER_DOMAIN) return;
      yield { host: name, address };
    }
  }
}

/** A session to one address: STARTTLS when offered, and once more in the clear if the handshake fails. */
async function openWithTlsFallback(
  config: MxConfig,
  target: { host: string; address: string },
  source: AddressSource,
  ca: string[] | undefined,
): Promise<SmtpSession> {
  try {
    return await openSession(config, target, source, 'opportunistic', ca);
  } catch (error) {
    if (!isTlsFailure(error)) throw error;
    return openSession(config, target, source, 'none', ca);
  }
}

/** A session that is TLS with a certificate valid for the MX host name, or none: never in the clear. */
function openVerified(
  config: MxConfig,
  { host, address }: { host: string; address: string },
  source: AddressSource,
  ca: string[],
): Promise<SmtpSession> {
  return SmtpSession.open({
    host: address,
    port: config.mxPort,
    secure: false,
    requireTLS: true,
    ...(source.address !== undefined ? { localAddress: source.address } : {}),
    name: source.ehlo ?? config.heloName,
    connectionTimeout: config.smtpTimeoutMs,
    greetingTimeout: config.smtpTimeoutMs,
    socketTimeout: config.smtpTimeoutMs,
    tls: { rejectUnauthorized: true, servername: host, ca },
  });
}

/**
 * A session to one address, its certificate not checked. STARTTLS: 'opportunistic' when offered, 'none'
 * never (the retry after a failed handshake), 'required' always, or no session (tls 'enforced').
 */
function openSession(
  config: MxConfig,
  { host, address }: { host: string; address: string },
  source: AddressSource,
  starttls: 'opportunistic' | 'none' | 'required',
  ca: string[] | undefined,
): Promise<SmtpSession> {
  return SmtpSession.open({
    host: address,
    port: config.mxPort,
    secure: false,
    ...(starttls === 'required'
      ? { requireTLS: true }
      : // A server that refuses STARTTLS after offering it gets the message in the clear, as any MTA would.
        { ignoreTLS: starttls === 'none', opportunisticTLS: true }),
    // The source's own address and name: a provider checks that the name and the address's PTR agree.
    ...(source.address !== undefined ? { localAddress: source.address } : {}),
    name: source.ehlo ?? config.heloName,
    connectionTimeout: config.smtpTimeoutMs,
    greetingTimeout: config.smtpTimeoutMs,
    socketTimeout: config.smtpTimeoutMs,
    // Not checked, but with the trusted certificates, so that an MTA-STS policy in testing can be told.
    tls: { rejectUnauthorized: false, servername: isIP(host) === 0 ? host : undefined, ...(ca ? { ca } : {}) },
  });
}
