// The table of SMTP replies traffic shaping knows: the classes a reply falls in, the holds it may ask
// for, and the ordered rules (the first that matches wins) that reply-classes.ts applies. Provider texts
// come from the providers' own error references and from replies seen in the field; each row has a test
// with the real text (test/shaping-replies.test.ts).

/**
 * - delivered: the server took the message (2xx);
 * - recipient_failure: the address is bad (no such mailbox, disabled, moved): permanent, the recipient's fault;
 * - mailbox_unavailable: the mailbox exists but cannot take mail now (full, receiving too fast): temporary;
 * - throttled: the destination asks us to send more slowly: temporary;
 * - too_many_connections: the destination refuses more connections at once: temporary;
 * - policy_block: a refusal for reputation, block list, content or policy: never the recipient's fault;
 * - sender_fault: the sending domain fails authentication (SPF, DKIM, DMARC) or its address is refused;
 * - deferred: any other 4xx, or no reply at all;
 * - bounced: any other 5xx.
 */
export type ReplyClass =
  | 'delivered'
  | 'recipient_failure'
  | 'mailbox_unavailable'
  | 'throttled'
  | 'too_many_connections'
  | 'policy_block'
  | 'sender_fault'
  | 'deferred'
  | 'bounced';

/**
 * A pause the reply asks for: the whole destination site, or this sending domain at that site. The
 * key names the pause's duration in the shaping file's `[holds]` table.
 */
export interface ReplyHold {
  scope: 'site' | 'sender';
  key: string;
}

export interface ClassifiedReply {
  class: ReplyClass;
  /** The name of the table row that decided, e.g. 'gmail-4.7.28'. */
  rule: string;
  hold?: ReplyHold;
  /**
   * The site counts messages per second (or minute) and this one came over its rate: lower the site's
   * message rate and try again within seconds, instead of pausing it for minutes.
   */
  rateLimit?: true;
}

/** One row of the table. Every condition given must hold; a row with none matches every reply of its codes. */
export interface ReplyRule {
  name: string;
  /** Reply codes: exact ('421'), a hundred ('4xx'), a ten ('45x'), or 'none' for no reply at all. */
  codes: readonly string[];
  /** The enhanced status code (RFC 3463) at the start of the text, e.g. /^5\.1\.1$/. */
  status?: RegExp;
  /** Tested against the text with line prefixes removed and lines joined by single spaces. */
  text?: RegExp;
  class: ReplyClass;
  hold?: ReplyHold;
  rateLimit?: true;
}

const GOOGLE_RATE_LIMIT: ReplyHold = { scope: 'site', key: 'google_rate_limit' };
const YAHOO_TSS04: ReplyHold = { scope: 'site', key: 'yahoo_tss04' };
const SENDER_FAULT: ReplyHold = { scope: 'sender', key: 'sender_fault' };
const SENDING_QUOTA: ReplyHold = { scope: 'site', key: 'sending_quota' };

const TEMPORARY = ['4xx'] as const;
const PERMANENT = ['5xx'] as const;
const EITHER = ['4xx', '5xx'] as const;

export const REPLY_RULES: readonly ReplyRule[] = [
  // The session, not the message or the recipient.
  { name: 'no-reply', codes: ['none'], class: 'deferred' },
  { name: 'accepted', codes: ['2xx'], class: 'delivered' },
  // Bad sequence of commands: a new session may go through.
  { name: 'bad-sequence', codes: ['503'], class: 'deferred' },
  // The relay refused our credentials (or wants some): the operator can fix that; no recipient is at fault.
  { name: 'authentication', codes: ['530', '534', '535', '538'], class: 'deferred' },

  // Google (https://support.google.com/a/answer/3726730).
  {
    name: 'gmail-4.7.28',
    codes: TEMPORARY,
    text: /unusual rate of (unsolicited )?mail/i,
    class: 'throttled',
    hold: GOOGLE_RATE_LIMIT,
  },
  // The same verdict made permanent: the other messages to the site wait out the hold instead of failing too.
  {
    name: 'gmail-5.7.28',
    codes: PERMANENT,
    text: /unusual rate of (unsolicited )?mail/i,
    class: 'policy_block',
    hold: GOOGLE_RATE_LIMIT,
  },
  {
    name: 'gmail-unauthenticated',
    codes: EITHER,
    text: /not accepted due to domain's dmarc policy|rate limited because it is unauthenticated|does not have authentication information|fails to pass authentication checks|gmail requires all|authentication didn't pass|isn't aligned with either the authenticated spf or dkim|has an spf record with a hard fail|fails to pass spf checks|spf record of the sending domain has one or more suspicious entries/i,
    class: 'sender_fault',
    hold: SENDER_FAULT,
  },
  { name: 'gmail-try-again-later', codes: TEMPORARY, text: /try again later, closing connection/i, class: 'throttled' },
  { name: 'gmail-low-reputation', codes: TEMPORARY, text: /very low reputation of the sending/i, class: 'throttled' },
  {
    name: 'gmail-likely-unsolicited',
    codes: EITHER,
    text: /likely unsolicited mail|very low reputation of the sending|suspicious due to the nature of the content/i,
    class: 'policy_block',
  },
  {
    name: 'gmail-not-authorized',
    codes: EITHER,
    text: /not authorized to send email directly to our servers|ip not in whitelist for rcpt domain/i,
    class: 'policy_block',
  },
  { name: 'gmail-relay-limit', codes: TEMPORARY, text: /relay limit exceeded/i, class: 'throttled' },

  // Yahoo and AOL (https://senders.yahooinc.com/smtp-error-codes).
  {
    name: 'yahoo-tss04',
    codes: TEMPORARY,
    text: /\[TS?S04\]|temporarily deferred due to unexpected volume or user complaints/i,
    class: 'throttled',
    hold: YAHOO_TSS04,
  },
  // "Retrying will NOT succeed" (TS03 as a 4xx, TSS09 and TSS11 as 5xx): stop sending to the site for a while.
  {
    name: 'yahoo-permanently-deferred',
    codes: EITHER,
    text: /will be permanently deferred|\[TS03\]|\[TSS(09|11)\]/i,
    class: 'policy_block',
    hold: YAHOO_TSS04,
  },
  {
    name: 'yahoo-deferred',
    codes: TEMPORARY,
    text: /\[(TSS?0[1-35-8]|GL01)\]|messages? from \S+ temporarily deferred/i,
    class: 'throttled',
  },
  {
    name: 'yahoo-unauthenticated',
    codes: EITHER,
    text: /yahoo requires all senders to authenticate/i,
    class: 'sender_fault',
    hold: SENDER_FAULT,
  },
  { name: 'yahoo-policy', codes: EITHER, text: /not accepted for policy reasons/i, class: 'policy_block' },

  // Microsoft: Outlook.com and Exchange Online (https://learn.microsoft.com/exchange/mail-flow-best-practices/non-delivery-reports-in-exchange-online/non-delivery-reports-in-exchange-online).
  {
    name: 'microsoft-4.7.650',
    codes: TEMPORARY,
    text: /temporarily rate limited due to ip reputation/i,
    class: 'throttled',
  },
  {
    name: 'microsoft-4.7.652',
    codes: TEMPORARY,
    text: /exceeded the maximum number of connections|\bRP-003\b/i,
    class: 'too_many_connections',
  },
  { name: 'microsoft-rp-001', codes: TEMPORARY, text: /\bRP-00[12]\b/i, class: 'throttled' },
  {
    name: 'microsoft-server-busy',
    codes: TEMPORARY,
    text: /server busy\. please try again later/i,
    class: 'throttled',
  },
  {
    name: 'microsoft-sender-authentication',
    codes: EITHER,
    text: /(does not|doesn't) meet the required authentication level|does not pass dmarc verification|must pass either spf or dkim/i,
    class: 'sender_fault',
    hold: SENDER_FAULT,
  },
  {
    name: 'microsoft-block-list',
    codes: EITHER,
    text: /on our block list|\bS3150\b|\b(SC|DY)-00\d\b|access denied, banned send(er|ing ip)|access denied, please try again later/i,
    class: 'policy_block',
  },
  // Directory-based edge blocking: the tenant has no such recipient.
  {
    name: 'microsoft-5.4.1',
    codes: PERMANENT,
    status: /^5\.4\.1$/,
    text: /recipient address rejected: access denied/i,
    class: 'recipient_failure',
  },

  // Apple iCloud Mail (https://support.apple.com/102322).
  {
    name: 'apple-excessive-volume',
    codes: TEMPORARY,
    text: /deferred due to excessive volume/i,
    class: 'mailbox_unavailable',
  },
  { name: 'apple-local-policy', codes: EITHER, text: /rejected due to local policy/i, class: 'policy_block' },

  // Amazon SES as a relay (https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html):
  // its sending rate is counted per second, so a message over it only needs a slower pace; its daily
  // quota is spent until its 24 hours roll on, so the relay stops.
  {
    name: 'ses-sending-rate',
    codes: ['454'],
    text: /throttling failure: maximum sending rate exceeded/i,
    class: 'throttled',
    rateLimit: true,
  },
  {
    name: 'ses-daily-quota',
    codes: ['454'],
    text: /throttling failure: daily message quota exceeded/i,
    class: 'throttled',
    hold: SENDING_QUOTA,
  },

  // Any server: greylisting is an ordinary deferral, whatever code it borrows.
  { name: 'greylisted', codes: TEMPORARY, text: /gr[ae]y-?list/i, class: 'deferred' },
  // A relay's (or a provider's) sending quota: it comes back when the quota's period turns, even after a
  // 5xx; until then every message would get the same answer, so the site waits.
  {
    name: 'sending-quota',
    codes: EITHER,
    text: /sending (quota|limit) exceeded|(daily|hourly) (user )?(sending|message) (quota|limit)/i,
    class: 'throttled',
    hold: SENDING_QUOTA,
  },
  // Any server: concurrency and rate limits (Postfix, Exim, Exchange and others word them alike).
  {
    name: 'too-many-connections',
    codes: TEMPORARY,
    text: /too many (concurrent |simultaneous |open )?(smtp )?connections|maximum number of (concurrent )?(server )?connections|connection (count )?limit (exceeded|reached)/i,
    class: 'too_many_connections',
  },
  // A message rate counted per second or minute (Exchange's MessageRateLimit, "sending too fast"): a
  // slower pace is the answer, not a pause.
  {
    name: 'message-rate',
    codes: TEMPORARY,
    text: /(message|sending|submission) rate (for this client )?(has )?(been )?exceeded|(maximum|max) (message|sending) rate|sending too fast/i,
    class: 'throttled',
    rateLimit: true,
  },
  {
    name: 'rate-limited',
    codes: TEMPORARY,
    text: /rate[- ]?limit|too much mail from|too many (messages|recipients) from|throttl|sending rate|sending too fast|slow down/i,
    class: 'throttled',
  },

  // The mailbox exists but cannot take this message now.
  {
    name: 'receiving-too-fast',
    codes: EITHER,
    text: /receiving (e-?mail|mail) (at a rate|too quickly)/i,
    class: 'mailbox_unavailable',
  },
  { name: 'mailbox-full-status', codes: EITHER, status: /^[45]\.2\.2$/, class: 'mailbox_unavailable' },
  {
    name: 'mailbox-full',
    codes: EITHER,
    text: /mailbox (is )?full|over ?quota|quota exceeded|out of storage space|exceeded storage allocation/i,
    class: 'mailbox_unavailable',
  },

  // The sending domain or address: SPF and DKIM failures (RFC 7372: x.7.20-24, x.7.26), a null MX on the
  // sender's domain (x.7.27, RFC 7505), a bad sender address (x.1.7, x.1.8).
  {
    name: 'sender-authentication-status',
    codes: EITHER,
    status: /^[45]\.7\.(2[0-4]|2[67])$/,
    class: 'sender_fault',
    hold: SENDER_FAULT,
  },
  {
    name: 'sender-address-status',
    codes: EITHER,
    status: /^[45]\.1\.[78]$/,
    class: 'sender_fault',
    hold: SENDER_FAULT,
  },
  {
    name: 'sender-authentication',
    codes: EITHER,
    text: /\bdmarc\b|\b(spf|dkim)\b.{0,40}\b(fail|not pass|did ?n[o']t pass|does ?n[o']t pass)|fail(s|ed|ing)? (both )?(spf|dkim)|\bunauthenticated (e-?mail|mail|sender)|sender address rejected/i,
    class: 'sender_fault',
    hold: SENDER_FAULT,
  },

  // The recipient's address (RFC 3463 x.1.x; x.2.1 disabled; x.7.13, x.7.17, x.7.18 account or owner changed).
  { name: 'recipient-status', codes: PERMANENT, status: /^5\.1\.\d{1,3}$/, class: 'recipient_failure' },
  { name: 'mailbox-disabled', codes: PERMANENT, status: /^5\.2\.1$/, class: 'recipient_failure' },
  { name: 'account-changed', codes: PERMANENT, status: /^5\.7\.1[378]$/, class: 'recipient_failure' },

  // Block lists, reverse DNS, relaying, spam verdicts and other policy, by their words.
  {
    name: 'block-list',
    codes: EITHER,
    text: /spamhaus|spamcop|barracuda|\bsorbs\b|\bdnsbl\b|\brbl\b|block ?list|black ?list|blocked using/i,
    class: 'policy_block',
  },
  {
    name: 'reverse-dns',
    codes: EITHER,
    text: /\bptr record|reverse dns|\brdns\b|cannot find your (reverse )?hostname/i,
    class: 'policy_block',
  },
  {
    name: 'relay-denied',
    codes: PERMANENT,
    text: /relay(ing)? (access )?(denied|not permitted|prohibited)|unable to relay|not permitted to relay/i,
    class: 'policy_block',
  },
  {
    name: 'recipient-unknown',
    codes: PERMANENT,
    text: /\b(user|mailbox|recipient|address|account)\b[^.;]{0,60}\b(unknown|not found|does ?n[o']t exist|no longer (valid|exists?|active|available)|is (disabled|inactive|invalid))\b|no such (user|mailbox|recipient|address|account)|no mailbox here|\b(unknown|invalid) (user|recipient|mailbox|address)\b|doesn't have an? \S+ account|undeliverable address|unrouteable address/i,
    class: 'recipient_failure',
  },
  {
    name: 'policy',
    codes: EITHER,
    text: /\bspam|unsolicited|suspicious|phish|malware|virus|reputation|\bbanned\b|\bblocked\b|prohibited|\bpolic(y|ies)\b/i,
    class: 'policy_block',
  },
  { name: 'policy-status', codes: PERMANENT, status: /^5\.7\.\d{1,3}$/, class: 'policy_block' },

  // Everything else, by the code alone (RFC 5321 §4.2.1).
  { name: 'other-4xx', codes: TEMPORARY, class: 'deferred' },
  { name: 'other-5xx', codes: PERMANENT, class: 'bounced' },
  // 1xx, 3xx or a code outside SMTP's range where a final reply was expected: try again.
  { name: 'unexpected-code', codes: ['1xx', '3xx', '6xx', '7xx', '8xx', '9xx'], class: 'deferred' },
];
