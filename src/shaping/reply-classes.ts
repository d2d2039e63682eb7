// What a receiving server's reply means for traffic shaping: every SMTP reply (code and text, or no
// reply at all) falls in one class, decided by ONE ordered table (reply-rules.ts: the first row that
// matches wins). The class says whether to try again, whose fault a refusal is, and whether the destination
// wants us to slow down or pause.

import { REPLY_RULES, type ClassifiedReply, type ReplyClass } from './reply-rules.ts';

export { REPLY_RULES, type ClassifiedReply, type ReplyClass, type ReplyHold, type ReplyRule } from './reply-rules.ts';

/**
 * Classifies one reply by the first row of REPLY_RULES that matches it. `text` is the reply as the
 * server sent it: the code in front of each line is allowed (a multi-line reply as nodemailer reports
 * it) and is removed before matching.
 */
export function classifyReply(code: number | undefined, text: string): ClassifiedReply {
  const reply = readReply(text);
  const codeText = code === undefined ? 'none' : String(code);
  for (const rule of REPLY_RULES) {
    if (!rule.codes.some((pattern) => codeMatches(pattern, codeText))) continue;
    if (rule.status !== undefined && (reply.status === undefined || !rule.status.test(reply.status))) continue;
    if (rule.text !== undefined && !rule.text.test(reply.text)) continue;
    return {
      class: rule.class,
      rule: rule.name,
      ...(rule.hold === undefined ? {} : { hold: { ...rule.hold } }),
      ...(rule.rateLimit ? { rateLimit: true as const } : {}),
    };
  }
  // Unreachable while the table ends with rows for every code; kept so a missing row cannot bounce anyone.
  return { class: 'deferred', rule: 'unmatched' };
}

/**
 * Whether a refusal counts against the recipient (a hard bounce of the address): only a bad address,
 * or a permanent refusal that nothing else explains. A policy or reputation block and a sender fault
 * are never the recipient's hard bounce and never suppress the recipient.
 */
export function isRecipientsFault(cls: ReplyClass): boolean {
  return cls === 'recipient_failure' || cls === 'bounced';
}

/**
 * Whether to try again later. A policy block and a sender fault are temporary when the server said so
 * with a 4xx, permanent with a 5xx; the other classes are one or the other whatever the code (a full
 * mailbox is temporary even as 552 5.2.2). A temporary failure that runs out of retries ends `failed`,
 * never `bounced`.
 */
export function isTemporary(cls: ReplyClass, code?: number): boolean {
  switch (cls) {
    case 'mailbox_unavailable':
    case 'throttled':
    case 'too_many_connections':
    case 'deferred':
      return true;
    case 'policy_block':
    case 'sender_fault':
      return code === undefined || code < 500;
    case 'delivered':
    case 'recipient_failure':
    case 'bounced':
      return false;
  }
}

/** The reply without the code in front of each line, its lines joined, and its enhanced status code. */
export function readReply(text: string): { status: string | undefined; text: string } {
  const lines = text.split(/\r?\n/).map((line) => line.replace(/^\s*[1-9]\d\d(?:[ -]|$)/, '').trim());
  const status = /^([245]\.\d{1,3}\.\d{1,3})(?:\s|$)/.exec(lines[0] ?? '')?.[1];
  // Multi-line replies repeat the enhanced status code on every line (550-5.7.1 …): keep it once.
  const joined = lines
    .map((line, i) =>
      i > 0 && status !== undefined && line.startsWith(`${status} `) ? line.slice(status.length + 1) : line,
    )
    .map((line, i) => (i > 0 && line === status ? '' : line))
    .join(' ');
  return { status, text: joined.replace(/\s+/g, ' ').trim() };
}

function codeMatches(pattern: string, code: string): boolean {
  if (pattern === 'none' || code === 'none') return pattern === code;
  if (pattern.length !== 3 || code.length !== 3) return false;
  for (let i = 0; i < 3; i++) if (pattern[i] !== 'x' && pattern[i] !== code[i]) return false;
  return true;
}
