import { isIP } from 'node:net';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { Config } from '../../platform/config.ts';
import { forbiddenAddressReason } from '../../platform/network-address.ts';
import { composeInline, type Composer } from '../composer.ts';
import { isTlsFailure, resultsFromSendError, resultsFromSendInfo, type SmtpSendInfo } from '../smtp-outcome.ts';
import type { OutgoingMessage, RecipientResult, Transport } from '../transport.ts';
import { createMxResolver, findMailRoute, type MailHost } from './mx-lookup.ts';
import { ConnectionSlots, NoFreeSlot, deferredForNoSlot } from './connection-slots.ts';

// Direct delivery: recipients are grouped by domain, and each domain gets one SMTP transaction with
// all of its recipients. Its mail hosts are tried in preference order while they fail before the
// transaction begins (no connection, timeout, refusing greeting or EHLO); once one has answered MAIL
// FROM, its answer stands. Domains are delivered to concurrently, each by at most CONNECTIONS_PER_DOMAIN
// connections at once (connection-slots.ts).
//
// TLS is opportunistic, as between MTAs on the Internet without MTA-STS or DANE: STARTTLS is used
// whenever the server offers it, certificates are not checked (MX certificates are often self-signed
// or name another host, and refusing them would only push the message to plaintext), and when the TLS
// handshake itself fails the same address is tried once more without STARTTLS.

type MxConfig = Pick<Config, 'mxPort' | 'heloName' | 'smtpTimeoutMs' | 'dnsServers' | 'dnsTimeoutMs' | 'mxAllowCidrs'>;

/** Addresses tried per domain at most, so a domain listing many dead hosts cannot hold a worker for long. */
const MAX_ADDRESSES_PER_DOMAIN = 6;

export function createMxTransport(config: MxConfig, composer: Composer = composeInline): Transport {
  const resolver = createMxResolver(config);
  const slots = new ConnectionSlots();

  async function deliverToDomain(domain: string, recipients: string[], from: string, raw: Buffer) {
    const route = await findMailRoute(resolver, domain);
    if (route.kind !== 'hosts') {
      const outcome = route.kind === 'bounce' ? 'bounced' : 'deferred';
      return recipients.map((address) => ({ address, outcome, smtpCode: undefined, response: route.reason }) as const);
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
      return recipients.map((address) => ({ address, outcome: 'bounced', smtpCode: undefined, response }) as const);
    }
    let lastFailure: { error: unknown; host: string } | undefined;
    for (const { host, address } of attemptsFor(hosts)) {
      const attempt = await sendWithTlsFallback(config, { host, address }, { from, to: recipients }, raw);
      if ('info' in attempt) return resultsFromSendInfo(recipients, attempt.info);
      // Once the transaction has begun, this server has answered for the message: do not send twice.
      if (!attempt.beforeTransaction) return resultsFromSendError(recipients, attempt.error);
      lastFailure = { error: attempt.error, host: `${host} [${address}]` };
    }
    return resultsFromSendError(recipients, lastFailure!.error, lastFailure!.host);
  }

  return {
    name: 'mx',
    async send(message: OutgoingMessage): Promise<RecipientResult[]> {
      if (message.envelope.to.length === 0) return [];
      const raw = await composer.compose(message);
      const byDomain = groupByDomain(message.envelope.to);
      const perDomain = await Promise.all(
        [...byDomain].map(([domain, recipients]) =>
          slots
            .run(domain, () => deliverToDomain(domain, recipients, message.envelope.from, raw))
            .catch((error: unknown) =>
              error instanceof NoFreeSlot
                ? deferredForNoSlot(recipients, error)
                : resultsFromSendError(recipients, error),
            ),
        ),
      );
      // Answer in the order the addresses were given.
      const byAddress = new Map(perDomain.flat().map((result) => [result.address, result]));
      return message.envelope.to.map((address) => byAddress.get(address)!);
    },
    close: () => composer.close(),
  };
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

type Attempt = { info: SmtpSendInfo } | { error: unknown; beforeTransaction: boolean };

async function sendWithTlsFallback(
  config: MxConfig,
  target: { host: string; address: string },
  envelope: { from: string; to: string[] },
  raw: Buffer,
): Promise<Attempt> {
  const first = await sendOnce(config, target, envelope, raw, { ignoreTLS: false });
  const failedHandshake = 'error' in first && first.beforeTransaction && isTlsFailure(first.error);
  return failedHandshake ? sendOnce(config, target, envelope, raw, { ignoreTLS: true }) : first;
}

/** One connection, one transaction. Whether it failed before MAIL FROM decides if the next host is tried. */
function sendOnce(
  config: MxConfig,
  { host, address }: { host: string; address: string },
  envelope: { from: string; to: string[] },
  raw: Buffer,
  { ignoreTLS }: { ignoreTLS: boolean },
): Promise<Attempt> {
  return new Promise((resolve) => {
    const connection = new SMTPConnection({
      host: address,
      port: config.mxPort,
      secure: false,
      ignoreTLS,
      // A server that refuses STARTTLS after offering it gets the message in the clear, as any MTA would.
      opportunisticTLS: true,
      name: config.heloName,
      connectionTimeout: config.smtpTimeoutMs,
      greetingTimeout: config.smtpTimeoutMs,
      socketTimeout: config.smtpTimeoutMs,
      tls: { rejectUnauthorized: false, servername: isIP(host) === 0 ? host : undefined },
    });
    let beforeTransaction = true;
    let settled = false;
    const finish = (attempt: Attempt) => {
      if (settled) return;
      settled = true;
      if ('info' in attempt) connection.quit();
      else connection.close();
      resolve(attempt);
    };
    const fail = (error: unknown) => finish({ error, beforeTransaction });
    connection.once('error', fail);
    connection.once('end', () => fail(Object.assign(new Error('Connection closed'), { code: 'ECONNECTION' })));
    connection.connect((error) => {
      if (error) return fail(error);
      beforeTransaction = false;
      connection.send(envelope, raw, (error, info) => (error ? fail(error) : finish({ info })));
    });
  });
}
