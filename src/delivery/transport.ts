// The contract between the delivery worker and the ways mail leaves Mailroom. The worker hands one
// message with the recipients still to be tried; the transport answers with one outcome per recipient.
// Implementations: transports/capture.ts, transports/smtp-relay.ts, transports/mx.ts.

import type { DomainTls } from '../domains/domain-options.ts';

export interface OutgoingAttachment {
  filename: string;
  contentType: string;
  contentId: string | undefined;
  content: Buffer;
}

export interface OutgoingMessage {
  emailId: string;
  organizationId: string;
  /** No recipient of it has been tried before: fresh mail goes before retries at a busy destination. */
  firstAttempt: boolean;
  /** RFC 5322 Message-ID, angle brackets included: `<uuid@domain>`. */
  messageId: string;
  /** Header fields, as stored (`Name <address>` or `address`; domains already in ASCII). */
  from: string;
  to: string[];
  cc: string[];
  replyTo: string[];
  subject: string;
  html: string | undefined;
  text: string | undefined;
  /** Custom headers, already checked (no owned headers, no line breaks). */
  headers: Record<string, string> | undefined;
  attachments: OutgoingAttachment[];
  /** SMTP envelope: MAIL FROM, and the bare addresses to deliver to in this attempt (bcc included). */
  envelope: { from: string; to: string[] };
  /** The sending domain's key: the message is signed with d=domain, s=selector. */
  dkim: { domain: string; selector: string; privateKey: string };
  /**
   * The sending domain's TLS setting (Resend's `tls`): 'enforced' means never in the clear, on any
   * transport: a server that does not offer STARTTLS, or a failed handshake, defers the recipients.
   * 'opportunistic': STARTTLS when offered.
   */
  tls: DomainTls;
}

/**
 * What happened to one recipient, classified in one place (smtp-outcome.ts):
 * - delivered: the receiving server took responsibility (2xx);
 * - deferred: try again later (4xx, or the server could not be reached or answered badly, or a refusal
 *   that is not the recipient's fault: a policy or reputation block, the sender's own fault);
 * - bounced: permanently refused, the recipient's fault (5xx);
 * - failed: permanently refused for a reason that is not the recipient's (a policy, reputation or
 *   content block, the sender's own authentication): given up, never a bounce, never suppressed;
 * - held: not sent now because of traffic shaping (the destination is paused or at its limits): it
 *   waits until `hold.until` without spending a retry attempt.
 */
export type Outcome = 'delivered' | 'deferred' | 'bounced' | 'failed' | 'held';

export interface RecipientResult {
  address: string;
  outcome: Outcome;
  /** The SMTP reply code, when a server answered. */
  smtpCode: number | undefined;
  /** The server's reply text, or what went wrong (for the timeline and the webhook). */
  response: string;
  /**
   * With `held`: until when, why, and at which destination site; `announced` when the recipient already
   * waits in a hold for the same reason (its delivery_delayed entry is written once per hold).
   */
  hold?: {
    until: Date;
    reason: 'throttled' | 'site_paused' | 'sender_paused' | 'warming_up';
    site: string;
    announced?: boolean;
  };
  /**
   * The egress source it went through, when the shaping file declares sources; `overflow` when it went
   * to its pool's overflow because the pool's warming sources had sent today's allowance.
   */
  egress?: { source: string; overflow?: boolean };
  /** Where the session's TLS fell short of the domain's MTA-STS policy in testing mode. */
  tlsNote?: string;
}

export interface Transport {
  readonly name: 'capture' | 'smtp' | 'mx';
  /** Sends the message to envelope.to; one result per address of envelope.to. Never throws for SMTP reasons. */
  send(message: OutgoingMessage): Promise<RecipientResult[]>;
  close(): Promise<void>;
}
