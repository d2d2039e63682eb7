import { addressKey } from '../platform/address-key.ts';
import { isTlsErrorCode } from '../platform/network-errors.ts';
import type { Outcome, RecipientResult } from './transport.ts';
import { classifyReply, isRecipientsFault, isTemporary } from '../shaping/reply-classes.ts';

// The one place where SMTP replies and send failures become outcomes (RFC 5321 §4.2.1): the
// transports only report what the server said, or what went wrong before it could say anything.

/** What nodemailer attaches to its errors (all optional: which are set depends on where it failed). */
export interface SmtpSendError {
  code?: string;
  originalCode?: string;
  command?: string;
  response?: string;
  responseCode?: number;
  message?: string;
  recipient?: string;
  rejectedErrors?: SmtpSendError[];
}

/** A successful nodemailer send: the transaction completed for the accepted recipients. */
export interface SmtpSendInfo {
  accepted: ReadonlyArray<string | { address?: string }>;
  rejected: ReadonlyArray<string | { address?: string }>;
  rejectedErrors?: SmtpSendError[];
  response: string;
}

/**
 * 2xx delivered, 4xx deferred, no reply at all (refused connection, timeout, TLS failure, unexpected
 * close, DNS failure) deferred; a 5xx bounces only when it is the recipient's fault (the classes of
 * shaping/reply-classes.ts). A permanent policy, reputation or content block, or the sender's own fault,
 * fails (not a bounce: the recipient must not be marked as hard-bounced or suppressed); 503 (bad
 * sequence of commands: a new session may go through) and any rejection of AUTH (the relay's
 * credentials are wrong: the operator can fix them) defer.
 */
export function classifySmtpReply(code: number | undefined, error?: unknown): Outcome {
  if (code === undefined) return 'deferred';
  const failure = asSendError(error);
  if (failure !== undefined && isAuthenticationFailure(failure)) return 'deferred';
  if (code >= 200 && code < 300) return failure === undefined ? 'delivered' : 'deferred';
  // Only a refusal that is the recipient's own bounces (a bad address, or a 5xx nothing else explains):
  // a policy or reputation block, or the sender's own fault, is tried again and never suppresses anyone.
  if (code >= 500 && code < 600) {
    const cls = classifyReply(code, failure?.response ?? '').class;
    if (isRecipientsFault(cls)) return 'bounced';
    return isTemporary(cls, code) ? 'deferred' : 'failed';
  }
  return 'deferred';
}

/** One result per recipient after a transaction the server accepted for at least one of them. */
export function resultsFromSendInfo(recipients: string[], info: SmtpSendInfo): RecipientResult[] {
  const rejections = rejectionsByAddress(info.rejectedErrors);
  const accepted = new Set(info.accepted.map(addressOf));
  const replyCode = replyCodeOf(info.response);
  return recipients.map((address) => {
    const rejection = rejections.get(addressKey(address));
    if (rejection !== undefined) return resultFromError(address, rejection);
    if (accepted.has(addressKey(address))) {
      return { address, outcome: classifySmtpReply(replyCode), smtpCode: replyCode, response: info.response };
    }
    // Not in the server's answer at all (should not happen): try again rather than guess.
    return { address, outcome: 'deferred', smtpCode: undefined, response: 'No reply for this recipient' };
  });
}

/**
 * One result per recipient after a send that failed. When the server refused every recipient at RCPT
 * TO, each has its own reply; otherwise (MAIL FROM, DATA, connection) the one failure applies to all.
 */
export function resultsFromSendError(recipients: string[], error: unknown, context?: string): RecipientResult[] {
  const failure = asSendError(error) ?? { message: String(error) };
  const rejections = rejectionsByAddress(failure.rejectedErrors);
  return recipients.map((address) => resultFromError(address, rejections.get(addressKey(address)) ?? failure, context));
}

/** The reply text, or a plain description when no server answered (no internal addresses in it). */
export function describeSendError(error: unknown): string {
  const failure = asSendError(error);
  if (failure === undefined) return 'Delivery failed';
  if (failure.response !== undefined && failure.response !== '') return failure.response;
  const cause = failure.originalCode ?? failure.code;
  const what = (isTlsFailure(failure) ? FAILURES.ETLS : FAILURES[failure.code ?? '']) ?? 'Delivery failed';
  return cause !== undefined && cause !== failure.code ? `${what} (${cause})` : what;
}

const FAILURES: Record<string, string> = {
  ESOCKET: 'Could not connect to the mail server',
  ECONNECTION: 'The mail server closed the connection unexpectedly',
  ETIMEDOUT: 'Timed out waiting for the mail server',
  ETLS: 'TLS negotiation with the mail server failed',
  EDNS: 'Could not resolve the mail server',
  EPROTOCOL: 'The mail server answered outside the SMTP protocol',
  EAUTH: 'The mail server refused the credentials',
  ENOAUTH: 'The mail server requires credentials',
};

/**
 * Whether the TLS handshake failed (or the certificate was refused). Nodemailer reports some of these
 * as socket errors; OpenSSL's code, kept in originalCode, tells them apart.
 */
export function isTlsFailure(error: unknown): boolean {
  const failure = asSendError(error);
  if (failure === undefined) return false;
  return failure.code === 'ETLS' || isTlsErrorCode(failure.originalCode);
}

/** The leading three-digit code of an SMTP reply line, if there is one. */
export function replyCodeOf(reply: string | undefined): number | undefined {
  const match = /^([2-5]\d\d)\b/.exec(reply ?? '');
  return match ? Number(match[1]) : undefined;
}

function resultFromError(address: string, failure: SmtpSendError, context?: string): RecipientResult {
  const smtpCode = failure.responseCode ?? replyCodeOf(failure.response);
  const response = describeSendError(failure);
  return {
    address,
    outcome: classifySmtpReply(smtpCode, failure),
    smtpCode,
    response: context === undefined ? response : `${context}: ${response}`,
  };
}

function rejectionsByAddress(errors: SmtpSendError[] | undefined): Map<string, SmtpSendError> {
  const byAddress = new Map<string, SmtpSendError>();
  for (const rejection of errors ?? []) {
    if (rejection.recipient !== undefined) byAddress.set(addressKey(rejection.recipient), rejection);
  }
  return byAddress;
}

const addressOf = (entry: string | { address?: string }) =>
  addressKey(typeof entry === 'string' ? entry : (entry.address ?? ''));

function isAuthenticationFailure(failure: SmtpSendError): boolean {
  return failure.code === 'EAUTH' || failure.code === 'ENOAUTH' || /^AUTH\b/i.test(failure.command ?? '');
}

function asSendError(error: unknown): SmtpSendError | undefined {
  return typeof error === 'object' && error !== null ? (error as SmtpSendError) : undefined;
}
