import type { ConnectionOptions } from 'node:tls';
import nodemailer from 'nodemailer';
import { ConfigError, type Config } from '../../platform/config.ts';
import { composeMessage } from '../compose.ts';
import { resultsFromSendError, resultsFromSendInfo } from '../smtp-outcome.ts';
import type { OutgoingMessage, RecipientResult, Transport } from '../transport.ts';

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
}

export function createSmtpRelayTransport(
  config: Pick<Config, 'smtpUrl' | 'heloName' | 'smtpTimeoutMs'>,
  options: SmtpRelayOptions = {},
): Transport {
  if (config.smtpUrl === undefined) {
    throw new ConfigError('MAILROOM_SMTP_URL', 'is required when MAILROOM_TRANSPORT is smtp');
  }
  const pool = nodemailer.createTransport({
    pool: true,
    // Connections stay open for as long as they work (nodemailer's default closes one after 100 messages).
    maxMessages: Infinity,
    url: config.smtpUrl,
    name: config.heloName,
    connectionTimeout: config.smtpTimeoutMs,
    greetingTimeout: config.smtpTimeoutMs,
    socketTimeout: config.smtpTimeoutMs,
    tls: options.tls,
  });
  return {
    name: 'smtp',
    async send(message: OutgoingMessage): Promise<RecipientResult[]> {
      const recipients = message.envelope.to;
      if (recipients.length === 0) return [];
      const raw = await composeMessage(message);
      try {
        const info = await pool.sendMail({ envelope: { from: message.envelope.from, to: recipients }, raw });
        return resultsFromSendInfo(recipients, info);
      } catch (error) {
        return resultsFromSendError(recipients, error);
      }
    },
    async close() {
      pool.close();
    },
  };
}
