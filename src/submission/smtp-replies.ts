import type { ErrorCode, ErrorDetail } from '../platform/errors.ts';
import { SmtpReply } from '../platform/smtp-listener.ts';

// The accept core's refusals as SMTP replies (docs/smtp.md has the table). A 4xx tells the client to
// keep the message and try again later (limits, Mailroom's own trouble); a 5xx tells it the message
// will never be taken as it is.

const REPLIES: Partial<Record<ErrorCode, [code: number, enhanced: string]>> = {
  invalid_from_address: [550, '5.7.1'],
  // After DATA (header recipients count too): the same message will never fit, so permanent. The RCPT
  // that goes past the limit gets 452 4.5.3 instead, the client sending the rest in another message.
  too_many_recipients: [550, '5.5.3'],
  payload_too_large: [552, '5.3.4'],
  rate_limit_exceeded: [451, '4.7.1'],
  monthly_quota_exceeded: [554, '5.7.1'],
  concurrent_idempotent_requests: [451, '4.3.0'],
  application_error: [451, '4.3.0'],
  service_unavailable: [451, '4.3.0'],
};

/** Every other refusal is of the message itself: 550 5.6.0, with the reason and the field at fault. */
const CONTENT_REFUSED: [number, string] = [550, '5.6.0'];

export function smtpReplyFor(refusal: ErrorDetail): SmtpReply {
  const [code, enhanced] = REPLIES[refusal.name] ?? CONTENT_REFUSED;
  const field = refusal.field === undefined ? '' : ` (${refusal.field})`;
  return new SmtpReply(code, `${enhanced} ${refusal.message}${field}`);
}
