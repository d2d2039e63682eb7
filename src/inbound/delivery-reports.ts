import type { Attachment, ParsedMail, SimpleParserOptions } from 'mailparser';
import { addressKey } from '../platform/address-key.ts';
import { cappedText } from '../platform/text.ts';

// Reading the machine-readable part of the reports that come back to a message's return path, from a
// message mailparser has parsed: bounces (RFC 3464 DSN, and its UTF-8 form of RFC 6533) and
// feedback-loop complaints (RFC 5965 ARF). Everything here is pure and must never throw: the text comes
// from anyone on the Internet, so anything malformed simply yields no report. Lines may end in LF or
// CRLF, fields may repeat (the first counts) and be folded, values are capped in length.

export interface BounceReport {
  kind: 'bounce';
  /** Final-Recipient, or Original-Recipient when that is missing. */
  recipient: string;
  /** Original-Recipient when it differs from `recipient`: the address as sent, before any forwarding. */
  originalRecipient: string | null;
  /** hard for Status 5.x.x, soft for 4.x.x. */
  type: 'hard' | 'soft';
  /** The enhanced status code, e.g. 5.1.1. */
  status: string;
  /** The reply code of `Diagnostic-Code: smtp; 550 …`, when there is one. */
  smtpCode: number | null;
  /** The Diagnostic-Code text, without its type ('' when absent). */
  diagnostic: string;
}

export interface ComplaintReport {
  kind: 'complaint';
  /** Original-Rcpt-To, when the report names exactly one recipient (many feedback loops redact it). */
  recipient: string | null;
  /** abuse, fraud, virus, other… lower-cased. */
  feedbackType: string;
  userAgent: string | null;
}

export type DeliveryReport = BounceReport | ComplaintReport;

export interface ReadReports {
  reports: DeliveryReport[];
  /** To and Cc of the original message embedded in the report, for recipients the report does not name. */
  originalRecipients: string[];
}

/**
 * Options for simpleParser that keep every report part as an attachment. By default mailparser merges a
 * message/delivery-status part into `text` (keepDeliveryStatus keeps it), and walks into a message/rfc822
 * part marked inline, merging its body into `text` too (ignoreEmbedded keeps it whole, missing from the
 * typings).
 */
export const REPORT_PARSER_OPTIONS = { keepDeliveryStatus: true, ignoreEmbedded: true } as SimpleParserOptions;

/** Longest text read from one report part; real status and feedback parts are a few hundred bytes. */
const MAX_PART_CHARS = 256 * 1024;
/** Longest field value kept, while unfolding. */
const MAX_FIELD_CHARS = 2000;
const MAX_DIAGNOSTIC_CHARS = 1000;
const MAX_USER_AGENT_CHARS = 200;
/** A message has at most 50 recipients; a report about more is not about one of ours. */
const MAX_RECIPIENT_BLOCKS = 100;
const MAX_ORIGINAL_RECIPIENTS = 100;

const STATUS_PARTS = new Set(['message/delivery-status', 'message/global-delivery-status']);
const FEEDBACK_PART = 'message/feedback-report';
/** The original message, or its header, as the third part of a report (RFC 6522, RFC 6533). */
const ORIGINAL_PARTS = new Set(['message/rfc822', 'text/rfc822-headers', 'message/global', 'message/global-headers']);
/** Feedback types that are not a recipient's complaint: RFC 6430's not-spam and RFC 6591's authentication failures. */
const NOT_COMPLAINTS = new Set(['not-spam', 'auth-failure']);

const NOTHING: ReadReports = { reports: [], originalRecipients: [] };

/** The reports a parsed message carries; none when it is not a multipart/report this reads. */
export function readDeliveryReports(mail: ParsedMail): ReadReports {
  try {
    const reportType = multipartReportType(mail);
    if (reportType === undefined) return NOTHING;
    // Report parts are direct children of the multipart/report; anything deeper is inside the original.
    const parts = mail.attachments.filter((part) => !(part.partId ?? '').includes('.'));
    const original = parts.find((part) => ORIGINAL_PARTS.has(part.contentType.toLowerCase()));
    const originalRecipients = original ? recipientsOfHeader(partText(original)) : [];

    let reports: DeliveryReport[] = [];
    if (reportType === 'delivery-status' || reportType === 'global-delivery-status') {
      const status = parts.find((part) => STATUS_PARTS.has(part.contentType.toLowerCase()));
      if (status) reports = bouncesOf(partText(status));
    } else if (reportType === 'feedback-report') {
      const feedback = parts.find((part) => part.contentType.toLowerCase() === FEEDBACK_PART);
      const complaint = feedback ? complaintOf(partText(feedback)) : undefined;
      if (complaint) reports = [complaint];
    }
    return reports.length === 0 ? NOTHING : { reports, originalRecipients };
  } catch {
    return NOTHING;
  }
}

/** The report-type of a top-level multipart/report, lower-cased. */
function multipartReportType(mail: ParsedMail): string | undefined {
  // mailparser gives Content-Type as { value, params }.
  const contentType = mail.headers.get('content-type') as { value?: unknown; params?: Record<string, unknown> };
  if (typeof contentType?.value !== 'string' || contentType.value.toLowerCase() !== 'multipart/report')
    return undefined;
  const reportType = contentType.params?.['report-type'];
  return typeof reportType === 'string' ? reportType.trim().toLowerCase() : undefined;
}

function partText(part: Attachment): string {
  const content = Buffer.isBuffer(part.content) ? part.content : Buffer.alloc(0);
  return content.subarray(0, MAX_PART_CHARS).toString('utf8');
}

/** One `failed` bounce per recipient block of a message/delivery-status body. */
function bouncesOf(text: string): BounceReport[] {
  const bounces: BounceReport[] = [];
  // The per-message block (Reporting-MTA…) has no Action: only recipient blocks do.
  const recipientBlocks = fieldBlocks(text).filter((block) => block.has('action'));
  for (const block of recipientBlocks.slice(0, MAX_RECIPIENT_BLOCKS)) {
    const bounce = bounceOf(block);
    if (bounce) bounces.push(bounce);
  }
  return bounces;
}

/**
 * Only `failed` is a bounce. `delayed` (still trying), `delivered`, `relayed` (passed on to a system that
 * sends no DSN) and `expanded` (delivered to a list or alias) report nothing that went wrong for good.
 */
function bounceOf(block: Fields): BounceReport | undefined {
  const action = /^[a-z]+/i.exec(first(block, 'action'))?.[0]?.toLowerCase();
  if (action !== 'failed') return undefined;
  const status = /^([45])\.\d{1,3}\.\d{1,3}(?![\d.])/.exec(first(block, 'status'));
  if (!status) return undefined;
  const finalRecipient = typedAddress(first(block, 'final-recipient'));
  const originalRecipient = typedAddress(first(block, 'original-recipient'));
  const recipient = finalRecipient ?? originalRecipient;
  if (recipient === null) return undefined;

  const diagnosticCode = first(block, 'diagnostic-code');
  const semicolon = diagnosticCode.indexOf(';');
  const diagnosticType = semicolon < 0 ? '' : diagnosticCode.slice(0, semicolon).trim().toLowerCase();
  const diagnostic = cappedText(
    (semicolon < 0 ? diagnosticCode : diagnosticCode.slice(semicolon + 1)).trim(),
    MAX_DIAGNOSTIC_CHARS,
  );
  // A multi-line SMTP reply comes back as `550-5.1.1 …`.
  const replyCode = diagnosticType === 'smtp' ? /^([2-5]\d\d)(?:[\s-]|$)/.exec(diagnostic) : null;
  return {
    kind: 'bounce',
    recipient,
    originalRecipient: originalRecipient !== null && originalRecipient !== recipient ? originalRecipient : null,
    type: status[1] === '5' ? 'hard' : 'soft',
    status: status[0],
    smtpCode: replyCode ? Number(replyCode[1]) : null,
    diagnostic,
  };
}

function complaintOf(text: string): ComplaintReport | undefined {
  const fields = mergedFields(fieldBlocks(text));
  const feedbackType = first(fields, 'feedback-type').toLowerCase();
  if (!/^[a-z0-9][a-z0-9._-]{0,63}$/.test(feedbackType) || NOT_COMPLAINTS.has(feedbackType)) return undefined;
  const userAgent = cappedText(first(fields, 'user-agent'), MAX_USER_AGENT_CHARS);
  // Several Original-Rcpt-To do not say who complained: then the report names no one.
  const named = new Map<string, string>();
  for (const address of (fields.get('original-rcpt-to') ?? []).map(typedAddress)) {
    if (address !== null && !named.has(addressKey(address))) named.set(addressKey(address), address.toLowerCase());
  }
  return {
    kind: 'complaint',
    recipient: named.size === 1 ? [...named.values()][0]! : null,
    feedbackType,
    userAgent: userAgent === '' ? null : userAgent,
  };
}

/** The addresses in the To and Cc fields of an embedded message (or header block). */
function recipientsOfHeader(text: string): string[] {
  const header = fieldBlocks(text, { headerOnly: true })[0];
  if (!header) return [];
  const values = [...(header.get('to') ?? []), ...(header.get('cc') ?? [])];
  const addresses = new Set<string>();
  for (const value of values) {
    for (const match of value.matchAll(/[^\s<>,;:"()[\]]+@[^\s<>,;:"()[\]]+/g)) {
      if (addresses.size >= MAX_ORIGINAL_RECIPIENTS) break;
      const address = plainAddress(match[0]);
      if (address !== null) addresses.add(address);
    }
  }
  return [...addresses];
}

/**
 * The address of `rfc822; user@example.com` (or RFC 6533's `utf-8; …`); a bare address is taken too, as
 * some servers write one. Another address type (x400…) or anything that is not local@domain → null.
 */
function typedAddress(value: string): string | null {
  const semicolon = value.indexOf(';');
  if (semicolon >= 0) {
    const type = value.slice(0, semicolon).trim().toLowerCase();
    if (type !== 'rfc822' && type !== 'utf-8') return null;
  }
  return plainAddress(value.slice(semicolon + 1).trim());
}

function plainAddress(value: string): string | null {
  const address = value.replace(/^<(.*)>$/, '$1').trim();
  if (address.length > 254 || !/^[^\s@<>]+@[^\s@<>]+$/.test(address)) return null;
  return address;
}

/** Fields of one header-like block: lower-cased names, each with its values in order. */
type Fields = Map<string, string[]>;

const first = (fields: Fields, name: string): string => fields.get(name)?.[0] ?? '';

/**
 * Splits text into blocks of `Name: value` fields separated by blank lines, unfolding continuation
 * lines. Lines that are not fields are skipped. With headerOnly, reading stops after the first block
 * (the header of a message, before its body).
 */
function fieldBlocks(text: string, { headerOnly = false } = {}): Fields[] {
  const blocks: Fields[] = [];
  let block: Fields = new Map();
  let field: { name: string; value: string } | undefined;
  const endField = () => {
    if (!field) return;
    const value = cappedText(field.value.replace(/\s+/g, ' ').trim(), MAX_FIELD_CHARS);
    block.set(field.name, [...(block.get(field.name) ?? []), value]);
    field = undefined;
  };
  const endBlock = () => {
    endField();
    if (block.size > 0) blocks.push(block);
    block = new Map();
  };
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line.trim() === '') {
      endBlock();
      if (headerOnly && blocks.length > 0) break;
    } else if (line.startsWith(' ') || line.startsWith('\t')) {
      if (field && field.value.length < MAX_FIELD_CHARS) field.value += line.slice(0, MAX_FIELD_CHARS);
    } else {
      endField();
      const colon = line.indexOf(':');
      const name = colon > 0 ? line.slice(0, colon).trim().toLowerCase() : '';
      if (/^[a-z0-9-]{1,100}$/.test(name)) field = { name, value: line.slice(colon + 1, colon + 1 + MAX_FIELD_CHARS) };
    }
  }
  endBlock();
  return blocks;
}

function mergedFields(blocks: Fields[]): Fields {
  const merged: Fields = new Map();
  for (const block of blocks) {
    for (const [name, values] of block) merged.set(name, [...(merged.get(name) ?? []), ...values]);
  }
  return merged;
}
