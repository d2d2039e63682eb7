import type { ConnectionOptions } from 'node:tls';
import nodemailer from 'nodemailer';
import { ConfigError, type Config } from '../../platform/config.ts';
import { composeInline, type Composer } from '../composer.ts';
import { resultsFromSendError, resultsFromSendInfo } from '../smtp-outcome.ts';
import type { OutgoingMessage, RecipientResult, Transport } from '../transport.ts';
import { ConnectionSlots, NoFreeSlot, deferredForNoSlot } from './connection-slots.ts';

// Delivery through one relay (MAILROOM_SMTP_URL): a pool of connections kept open between messages,
// one SMTP transaction per message carrying all of its recipients. STARTTLS is used when the relay
// offers it; if the upgrade fails the message is deferred rather than sent (and credentials given) in
// the clear. smtps:// URLs use TLS from the first byte.

export interface SmtpRelayOptions {
  /**
   * TLS settings for the relay connection. Certificates are checked unless this says otherwise, e.g.
   * `{ rejectUnauthorized: false }` for a test relay on loopback with a self-signed certificate.
   */
  tls?: ConnectionOptions;
  /** Composes and signs each message (default: on the event loop). */
  composer?: Composer;
}

/**
 * Connections to the relay at once, per process (Postfix's default for one destination); each carries
 * up to 100 messages before it is renewed. Five held a busy worker back: each SMTP command waits for an
 * answer, so more messages in conversation at once keep the event loop fed (3,000 messages: 317-348/s
 * with 5, 376-401/s with 20).
 */
const RELAY_CONNECTIONS = 20;

export function createSmtpRelayTransport(
  config: Pick<Config, 'smtpUrl' | 'heloName' | 'smtpTimeoutMs'>,
  options: SmtpRelayOptions = {},
): Transport {
  if (config.smtpUrl === undefined) {
    throw new ConfigError('MAILROOM_SMTP_URL', 'is required when MAILROOM_TRANSPORT is smtp');
  }
  const pool = nodemailer.createTransport({
    pool: true,
    maxConnections: RELAY_CONNECTIONS,
    url: config.smtpUrl,
    name: config.heloName,
    connectionTimeout: config.smtpTimeoutMs,
    greetingTimeout: config.smtpTimeoutMs,
    socketTimeout: config.smtpTimeoutMs,
    tls: options.tls,
  });
  const slots = new ConnectionSlots(RELAY_CONNECTIONS);
  const composer = options.composer ?? composeInline;
  return {
    name: 'smtp',
    async send(message: OutgoingMessage): Promise<RecipientResult[]> {
      const recipients = message.envelope.to;
      if (recipients.length === 0) return [];
      const raw = await composer.compose(message);
      try {
        // Queued here rather than in the pool, so a message waits a bounded time for a connection.
        const info = await slots.run('the relay', () =>
          pool.sendMail({ envelope: { from: message.envelope.from, to: recipients }, raw }),
        );
        return resultsFromSendInfo(recipients, info);
      } catch (error) {
        if (error instanceof NoFreeSlot) return deferredForNoSlot(recipients, error);
        return resultsFromSendError(recipients, error);
      }
    },
    async close() {
      pool.close();
      await composer.close();
    },
  };
}
