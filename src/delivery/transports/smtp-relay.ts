import type { ConnectionOptions } from 'node:tls';
import { parseConnectionUrl } from 'nodemailer/lib/shared';
import { ConfigError, type Config } from '../../platform/config.ts';
import type { ShapedConnection, Shaper } from '../../shaping/shaper.ts';
import { composeInline, type Composer } from '../composer.ts';
import type { OutgoingMessage, RecipientResult, Transport } from '../transport.ts';
import { isTlsFailure } from '../smtp-outcome.ts';
import { enforcedTlsFailure, shapedSend } from './shaped-send.ts';
import { SmtpSession } from './smtp-session.ts';

// Delivery through one relay (MAILROOM_SMTP_URL): connections kept open between messages, one SMTP
// transaction per message carrying all of its recipients, shaped like any destination site (the site
// `relay`: its connections, messages per connection and rates hold across every worker process).
// STARTTLS is used when the relay offers it; if the upgrade fails the message is deferred rather than
// sent (and credentials given) in the clear. smtps:// URLs use TLS from the first byte. A message whose
// sending domain has tls 'enforced' goes only over TLS: STARTTLS is required of a relay that is not
// smtps://, and a connection kept from another message is used only if it is TLS.

export interface SmtpRelayOptions {
  /**
   * TLS settings for the relay connection. Certificates are checked unless this says otherwise, e.g.
   * `{ rejectUnauthorized: false }` for a test relay on loopback with a self-signed certificate.
   */
  tls?: ConnectionOptions;
  /** Composes and signs each message (default: on the event loop). */
  composer?: Composer;
  /** Traffic shaping of the relay's connections and rates. */
  shaper: Shaper;
}

/** The relay's destination site: its limits are the shaping file's `[site.relay]` (e.g. an ESP's 14/s). */
export const RELAY_SITE = 'relay';

/** A relay: where it is, its credentials, and TLS settings over the defaults (certificates checked). */
export interface RelayEndpoint {
  host: string;
  port: number;
  secure: boolean;
  auth?: { user: string; pass: string } | undefined;
  tls?: ConnectionOptions;
}

/**
 * A session to a relay: STARTTLS when offered (never falling back to the clear), AUTH when given. For a
 * sending domain with tls 'enforced' (`enforcedFor`), STARTTLS is required unless the connection is TLS
 * from the first byte; a relay that cannot give it defers the recipients with the reason.
 */
export async function openRelaySession(
  relay: RelayEndpoint,
  heloName: string | undefined,
  timeoutMs: number,
  options: { enforcedFor?: { domain: string; recipients: string[] } | undefined } = {},
): Promise<SmtpSession> {
  const { enforcedFor } = options;
  try {
    return await openRelayConnection(relay, heloName, timeoutMs, enforcedFor !== undefined && !relay.secure);
  } catch (error) {
    if (enforcedFor === undefined || !isTlsFailure(error)) throw error;
    const where = `relay ${relay.host}:${relay.port}: ${(error as Error).message}`;
    throw enforcedTlsFailure(enforcedFor.recipients, enforcedFor.domain, [where]);
  }
}

function openRelayConnection(
  relay: RelayEndpoint,
  heloName: string | undefined,
  timeoutMs: number,
  requireTLS: boolean,
): Promise<SmtpSession> {
  return SmtpSession.open({
    host: relay.host,
    port: relay.port,
    secure: relay.secure,
    requireTLS,
    auth: relay.auth,
    name: heloName,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    tls: relay.tls,
  });
}

export function createSmtpRelayTransport(
  config: Pick<Config, 'smtpUrl' | 'heloName' | 'smtpTimeoutMs'>,
  options: SmtpRelayOptions,
): Transport {
  if (config.smtpUrl === undefined) {
    throw new ConfigError('MAILROOM_SMTP_URL', 'is required when MAILROOM_TRANSPORT is smtp');
  }
  const url = parseConnectionUrl(config.smtpUrl);
  const composer = options.composer ?? composeInline;
  const { shaper } = options;
  const relay = {
    host: url.host!,
    port: url.port ?? (url.secure ? 465 : 587),
    secure: url.secure ?? false,
    auth: url.auth,
    tls: { ...(url.tls as ConnectionOptions | undefined), ...options.tls },
  };
  return {
    name: 'smtp',
    async send(message: OutgoingMessage): Promise<RecipientResult[]> {
      const recipients = message.envelope.to;
      if (recipients.length === 0) return [];
      const raw = await composer.compose(message);
      const enforced = message.tls === 'enforced';
      const request = {
        site: RELAY_SITE,
        senderDomain: message.dkim.domain,
        organizationId: message.organizationId,
        fresh: message.firstAttempt,
        // A kept connection that went without TLS (a relay without STARTTLS) does not carry this one.
        reuse: enforced ? (connection: ShapedConnection) => (connection as SmtpSession).tlsState().secure : undefined,
      };
      const connect = () =>
        openRelaySession(relay, config.heloName, config.smtpTimeoutMs, {
          enforcedFor: enforced ? { domain: message.dkim.domain, recipients } : undefined,
        });
      return shapedSend(shaper, request, { from: message.envelope.from, to: recipients }, raw, connect);
    },
    async close() {
      await shaper.close();
      await composer.close();
    },
  };
}
