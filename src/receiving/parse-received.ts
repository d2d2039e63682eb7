import { simpleParser, type AddressObject, type EmailAddress, type ParsedMail } from 'mailparser';

// What is read from a received message: Resend's received-email fields, a flat header map and every
// attachment and inline part. The html is kept as written (cid: references stay, they name the inline
// parts stored beside it), and text is only the text the sender wrote (none is made from the html).

export interface ReceivedAttachment {
  filename: string | null;
  contentType: string;
  contentDisposition: 'inline' | 'attachment';
  /** Without its angle brackets; null when the part has none. */
  contentId: string | null;
  content: Buffer;
}

export interface ParsedReceived {
  /** The From header as written (display name and address), '' when there is none. */
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  replyTo: string[];
  subject: string;
  /** With its angle brackets, as in the header; '' when there is none. */
  messageId: string;
  inReplyTo: string | undefined;
  references: string[];
  /** Header name (lower case) to its value, several of one name joined with ', '. */
  headers: Record<string, string>;
  html: string | null;
  text: string | null;
  attachments: ReceivedAttachment[];
}

const PARSER_OPTIONS = {
  // Keep cid: links as written rather than inlining the images as data: URIs into the html.
  skipImageLinks: true,
  skipHtmlToText: true,
  skipTextToHtml: true,
  skipTextLinks: true,
};

/** Reads a message; mailparser reads anything, so a message that is not MIME still gives its text. */
export async function parseReceived(raw: Buffer): Promise<ParsedReceived> {
  const mail = await simpleParser(raw, PARSER_OPTIONS);
  return withoutNul({
    from: addressObjects(mail.from)
      .map((object) => object.text)
      .join(', '),
    to: addresses(mail.to),
    cc: addresses(mail.cc),
    bcc: addresses(mail.bcc),
    replyTo: addresses(mail.replyTo),
    subject: mail.subject ?? '',
    messageId: mail.messageId ?? '',
    inReplyTo: mail.inReplyTo,
    references: mail.references === undefined ? [] : [mail.references].flat(),
    headers: flatHeaders(mail),
    html: typeof mail.html === 'string' ? mail.html : null,
    text: mail.text ?? null,
    attachments: mail.attachments.map((attachment) => ({
      filename: attachment.filename ?? null,
      contentType: mimeType(attachment.contentType),
      // A part without a disposition is inline when it belongs to the html (multipart/related).
      contentDisposition:
        attachment.contentDisposition === 'inline' ||
        (attachment.contentDisposition !== 'attachment' && attachment.related)
          ? 'inline'
          : 'attachment',
      contentId: attachment.contentId ? attachment.contentId.replace(/^<|>$/g, '') : null,
      content: attachment.content,
    })),
  });
}

/**
 * PostgreSQL text (and jsonb) cannot hold NUL, which a message may carry anywhere, nor a lone UTF-16
 * surrogate, which a header's encoded word in UTF-16 or UTF-7 can decode to: every string loses the one
 * and has the other replaced (U+FFFD), or the message could never be stored.
 */
export function storableText(value: string): string {
  return value.replaceAll('\0', '').toWellFormed();
}

function withoutNul<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (Buffer.isBuffer(value) || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((item: unknown) => withoutNul(item)) as T;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [withoutNul(key), withoutNul(item)])) as T;
}

// type/subtype of RFC 2045 tokens: anything else a sender wrote is served as application/octet-stream,
// since it would be refused as a response header of the attachment's download (and as a forward's part).
const MIME_TYPE = /^[!#$%&'*+.^_`|~0-9a-z-]+\/[!#$%&'*+.^_`|~0-9a-z-]+$/i;

function mimeType(value: string | undefined): string {
  return value !== undefined && MIME_TYPE.test(value) ? value.toLowerCase() : 'application/octet-stream';
}

function addressObjects(value: AddressObject | AddressObject[] | undefined): AddressObject[] {
  return value === undefined ? [] : [value].flat();
}

/** Every address of an address header, groups opened. */
function addresses(value: AddressObject | AddressObject[] | undefined): string[] {
  const out: string[] = [];
  const walk = (entries: EmailAddress[]) => {
    for (const entry of entries) {
      if (entry.group) walk(entry.group);
      else if (entry.address) out.push(entry.address);
    }
  };
  for (const object of addressObjects(value)) walk(object.value);
  return out;
}

/**
 * The decoded value where mailparser keeps a header as text (Subject, Received …); the unfolded line as
 * written for those it reads into structures (addresses, dates, Content-Type).
 */
function flatHeaders(mail: ParsedMail): Record<string, string> {
  const lines = new Map<string, string[]>();
  for (const { key, line } of mail.headerLines) {
    const value = line
      .slice(line.indexOf(':') + 1)
      .replace(/\r?\n[ \t]+/g, ' ')
      .trim();
    lines.set(key, [...(lines.get(key) ?? []), value]);
  }
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [key, raw] of lines) {
    const parsed = mail.headers.get(key);
    const decoded =
      typeof parsed === 'string'
        ? [parsed]
        : Array.isArray(parsed) && parsed.every((value) => typeof value === 'string')
          ? (parsed as string[])
          : raw;
    headers[key] = decoded.join(', ');
  }
  return { ...headers };
}
