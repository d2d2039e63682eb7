import { detectMimeType } from 'nodemailer/lib/mime-funcs';
import { ServiceError } from '../platform/errors.ts';
import { hasControlCharacter, withoutControlCharacters } from '../platform/text.ts';
import { addressKey } from '../platform/address-key.ts';
import { asList, formatMailbox, parseMailbox, type Mailbox } from '../platform/addresses.ts';
import { isTestDomainAddress, testOutcome } from './test-addresses.ts';
import type { EmailMessage } from './message-schema.ts';
import { parseScheduledAt } from './scheduled-at.ts';

// Everything about one message that can be decided without the database, in the order a user would
// want to hear about it. Returns the message in the form it is stored and composed in.

export const MAX_RECIPIENTS = 50;

export interface Recipient {
  address: string;
  kind: 'to' | 'cc' | 'bcc';
}

export interface Attachment {
  filename: string;
  contentType: string;
  contentId: string | undefined;
  content: Buffer;
  /** Given by URL (`path`): content is empty until prepare-message.ts fetches it. */
  source?: { url: URL; field: string; typeGiven: boolean };
}

export interface ValidMessage {
  from: Mailbox;
  to: string[];
  cc: string[];
  bcc: string[];
  replyTo: string[];
  /** Mailroom's extension: whether the message carries a reply address; undefined follows its domain. */
  replyTracking: boolean | undefined;
  /** Unique bare addresses across to, cc and bcc (first kind wins), the ones delivery sends to. */
  recipients: Recipient[];
  /** Addresses as listed (to + cc + bcc): what the recipient limit and the quota count. */
  recipientCount: number;
  subject: string | undefined;
  html: string | undefined;
  text: string | undefined;
  template: { id: string; variables: Record<string, unknown> } | undefined;
  scheduledAt: Date | undefined;
  tags: EmailMessage['tags'];
  headers: Record<string, string> | undefined;
  topicId: string | undefined;
  attachments: Attachment[];
}

/** Headers Mailroom writes itself; a message may not set them through `headers`. */
const OWNED_HEADERS = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'dkim-signature',
  'return-path',
  'received',
  'sender',
  'reply-to',
  'content-transfer-encoding',
  'content-type',
  'content-disposition',
  'content-id',
  'authentication-results',
  'arc-seal',
  'arc-message-signature',
  'arc-authentication-results',
  'list-unsubscribe',
  'list-unsubscribe-post',
  'feedback-id',
]);
const HEADER_NAME = /^[!-9;-~]{1,100}$/; // printable ASCII without ":" (RFC 5322 ftext)
// Base64 is checked as one character class and a length, never as a repeated group: a pattern that
// repeats a group keeps a backtracking frame per group and overflows the stack on a large attachment.
const BASE64_CHARACTERS = /^[A-Za-z0-9+/]*={0,2}$/;
const isBase64 = (text: string) => text.length % 4 === 0 && BASE64_CHARACTERS.test(text);
const CONTENT_TYPE = /^[A-Za-z0-9][\w!#$&^.+-]{0,126}\/[A-Za-z0-9][\w!#$&^.+-]{0,126}$/;

export function validateMessage(
  message: EmailMessage,
  options: { now: Date; maxAttachmentBytes: number; maxScheduleDays?: number },
): ValidMessage {
  const to = asList(message.to);
  const cc = asList(message.cc);
  const bcc = asList(message.bcc);
  if (to.length === 0) throw new ServiceError('missing_required_field', 'Missing required field: to', 'to');
  const recipientCount = to.length + cc.length + bcc.length;
  if (recipientCount > MAX_RECIPIENTS) {
    throw new ServiceError(
      'too_many_recipients',
      `A message may have at most ${MAX_RECIPIENTS} recipients across to, cc and bcc; this one has ${recipientCount}`,
      'to',
    );
  }

  if (message.from === undefined) {
    const why = message.template ? ' (the template has no default from)' : '';
    throw new ServiceError('missing_required_field', `Missing required field: from${why}`, 'from');
  }
  const from = parseMailbox(message.from, 'from');
  const parsed = { to: parseAll(to, 'to'), cc: parseAll(cc, 'cc'), bcc: parseAll(bcc, 'bcc') };
  const recipients = new Map<string, Recipient>();
  for (const kind of ['to', 'cc', 'bcc'] as const) {
    for (const [i, mailbox] of parsed[kind].entries()) {
      refuseUnknownTestAddress(mailbox.address, parsed[kind].length > 1 ? `${kind}.${i}` : kind);
      const key = addressKey(mailbox.address);
      if (!recipients.has(key)) recipients.set(key, { address: mailbox.address, kind });
    }
  }
  const replyTo = parseAll(asList(message.reply_to), 'reply_to');

  const usesTemplate = message.template !== undefined;
  if (usesTemplate && (message.html !== undefined || message.text !== undefined)) {
    throw new ServiceError('validation_error', 'template cannot be combined with html or text', 'template');
  }
  if (!usesTemplate && message.html === undefined && message.text === undefined) {
    throw new ServiceError('missing_required_field', 'One of html, text or template is required', 'html');
  }
  if (!usesTemplate && message.subject === undefined) {
    throw new ServiceError('missing_required_field', 'Missing required field: subject', 'subject');
  }
  if (message.subject !== undefined && hasControlCharacter(message.subject)) {
    throw new ServiceError('validation_error', 'subject may not contain line breaks or control characters', 'subject');
  }

  return {
    from,
    to: parsed.to.map(formatMailbox),
    cc: parsed.cc.map(formatMailbox),
    bcc: parsed.bcc.map(formatMailbox),
    replyTo: replyTo.map(formatMailbox),
    replyTracking: message.reply_tracking,
    recipients: [...recipients.values()],
    recipientCount,
    subject: message.subject,
    html: message.html,
    text: message.text,
    template: message.template && { id: message.template.id, variables: message.template.variables ?? {} },
    scheduledAt: parseScheduledAt(message.scheduled_at, options.now, options.maxScheduleDays),
    tags: message.tags,
    headers: customHeaders(message.headers),
    topicId: message.topic_id,
    attachments: attachments(message.attachments ?? [], options.maxAttachmentBytes),
  };
}

/** resend.dev has only its three test mailboxes: any other address there is a mistake (test-addresses.ts). */
function refuseUnknownTestAddress(address: string, field: string): void {
  if (isTestDomainAddress(address) && testOutcome(address) === undefined) {
    throw new ServiceError(
      'validation_error',
      `Invalid address in ${field}: ${address} is not a test address; at resend.dev only delivered@, bounced@ and complained@ exist (each with an optional +label)`,
      field,
    );
  }
}

function parseAll(list: string[], field: string): Mailbox[] {
  return list.map((entry, i) => parseAddress(entry, list.length > 1 ? `${field}.${i}` : field));
}

/**
 * One address. A string that is several addresses separated by commas or semicolons (as a mail
 * client's To line is written) is told to be an array instead, each address an item of its own: also
 * when it would read as one address with a display name (`a@example.com, Bob <b@example.com>`), which
 * would send to Bob alone.
 */
function parseAddress(entry: string, field: string): Mailbox {
  const parts = entry
    .split(/[,;]/)
    .map((part) => part.trim())
    .filter((part) => part !== '');
  if (parts.length > 1 && parts.every(isMailbox)) {
    throw new ServiceError(
      'validation_error',
      `${field} holds several addresses in one string: pass an array of addresses instead, one per item: ` +
        JSON.stringify(parts),
      field,
    );
  }
  return parseMailbox(entry, field);
}

function isMailbox(text: string): boolean {
  try {
    parseMailbox(text, '');
    return true;
  } catch {
    return false;
  }
}

/** Whether Mailroom writes the header itself (so a message cannot set it). */
export function isOwnedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return OWNED_HEADERS.has(lower) || lower.startsWith('content-');
}

function customHeaders(headers: Record<string, string> | undefined): Record<string, string> | undefined {
  if (headers === undefined) return undefined;
  const entries = Object.entries(headers);
  if (entries.length > 50) throw new ServiceError('validation_error', 'At most 50 custom headers', 'headers');
  for (const [name, value] of entries) {
    const field = `headers.${name}`;
    if (!HEADER_NAME.test(name)) {
      throw new ServiceError('validation_error', `"${name}" is not a header name (printable ASCII, no colon)`, field);
    }
    if (isOwnedHeader(name)) {
      throw new ServiceError(
        'validation_error',
        `The ${name} header is set by Mailroom and cannot be overridden`,
        field,
      );
    }
    if (hasControlCharacter(value, { allowTab: true })) {
      throw new ServiceError(
        'validation_error',
        `The value of ${name} may not contain line breaks or control characters`,
        field,
      );
    }
    if (value.length > 998)
      throw new ServiceError('validation_error', `The value of ${name} is over 998 characters`, field);
  }
  return headers;
}

function attachments(list: NonNullable<EmailMessage['attachments']>, maxBytes: number): Attachment[] {
  let total = 0;
  return list.map((attachment, i) => {
    const field = `attachments.${i}`;
    let content = Buffer.alloc(0);
    let source: Attachment['source'];
    if (attachment.path !== undefined) {
      if (attachment.content !== undefined) {
        throw new ServiceError('validation_error', `Give ${field}.content or ${field}.path, not both`, `${field}.path`);
      }
      source = { url: attachmentUrl(attachment.path, `${field}.path`), field: `${field}.path`, typeGiven: false };
    } else {
      if (attachment.content === undefined) {
        throw new ServiceError(
          'missing_required_field',
          `Missing required field: ${field}.content (or ${field}.path)`,
          `${field}.content`,
        );
      }
      if (attachment.content === '' || !isBase64(attachment.content)) {
        throw new ServiceError(
          'invalid_attachment',
          `attachments[${i}].content is not valid base64`,
          `${field}.content`,
        );
      }
      content = Buffer.from(attachment.content, 'base64');
    }
    total += content.length;
    if (total > maxBytes) {
      throw new ServiceError(
        'payload_too_large',
        `Attachments may total at most ${maxBytes} bytes once decoded`,
        `${field}.content`,
      );
    }
    // A file given by URL is named by its URL's last segment unless a filename is given.
    const given = attachment.filename ?? (source ? lastSegment(source.url) : undefined);
    if (given === undefined) {
      throw new ServiceError(
        'missing_required_field',
        `Missing required field: ${field}.filename`,
        `${field}.filename`,
      );
    }
    const filename = sanitizeFilename(given) || (source ? 'attachment' : '');
    if (filename === '') {
      throw new ServiceError(
        'invalid_attachment',
        `attachments[${i}].filename is empty once sanitized`,
        `${field}.filename`,
      );
    }
    const contentType = attachment.content_type ?? detectMimeType(filename);
    if (!CONTENT_TYPE.test(contentType)) {
      throw new ServiceError('invalid_attachment', `"${contentType}" is not a MIME type`, `${field}.content_type`);
    }
    const contentId = attachment.content_id;
    if (contentId !== undefined && !/^[^\s<>"()\\]{1,200}$/.test(contentId)) {
      throw new ServiceError(
        'invalid_attachment',
        'content_id has characters a Content-ID may not',
        `${field}.content_id`,
      );
    }
    if (source) source.typeGiven = attachment.content_type !== undefined;
    return { filename, contentType, contentId, content, ...(source ? { source } : {}) };
  });
}

/** An attachment's `path`: an absolute http(s) URL, without credentials in it. */
function attachmentUrl(path: string, field: string): URL {
  let url: URL;
  try {
    url = new URL(path);
  } catch {
    throw new ServiceError('invalid_attachment', `${field} is not a URL`, field);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ServiceError('invalid_attachment', `${field} must be an http:// or https:// URL`, field);
  }
  if (url.username || url.password) {
    throw new ServiceError('invalid_attachment', `${field} may not carry a user name or password`, field);
  }
  return url;
}

function lastSegment(url: URL): string | undefined {
  const segment = url.pathname.split('/').pop();
  if (!segment) return undefined;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** The last path segment, without control characters or characters that break a MIME parameter. */
export function sanitizeFilename(name: string): string {
  const base = name.split(/[/\\]/).pop() ?? '';
  return withoutControlCharacters(base).replaceAll('"', '').replace(/^\.+/, '').trim().slice(0, 255);
}
