import { simpleParser, type AddressObject, type EmailAddress, type ParsedMail } from 'mailparser';
import { addressKey } from '../platform/address-key.ts';
import { ServiceError } from '../platform/errors.ts';
import { formatMailbox } from '../platform/addresses.ts';
import type { EmailMessage } from '../emails/message-schema.ts';
import { isOwnedHeader, MAX_RECIPIENTS } from '../emails/validate-message.ts';

// A message handed in over SMTP, read into the same fields a POST /emails body has, so that it is checked,
// stored, composed and DKIM-signed exactly like an API send. What a client sets that Mailroom writes
// itself (Date, Message-ID, MIME structure, DKIM-Signature, Received …) is dropped, not refused: every
// mail library writes those.
//
// The envelope decides who receives it, as SMTP says. Mailroom sends to every address a message names,
// so each To, Cc or Bcc header address must also be an envelope recipient (a message that names others
// is refused rather than sent to them); envelope recipients the headers do not name are sent to as Bcc.
//
// Two headers are read as instructions and not sent on:
// - `X-Tags: name=value, name2=value2` (or bare names): the message's tags;
// - `Idempotency-Key: <key>`: as the HTTP header, so a client retrying after a lost reply sends once.

/** Headers that are instructions to Mailroom, not part of the message sent. */
const INSTRUCTION_HEADERS = new Set(['x-tags', 'idempotency-key']);

export interface SubmittedMessage {
  message: EmailMessage;
  idempotencyKey: string | undefined;
}

/**
 * `refusedOverLimit`: the RCPT TO addresses of this transaction refused over the recipient limit. A header
 * that names one of them is refused for the limit, which is the reason it is not an envelope recipient.
 */
export async function messageFromMime(
  raw: Buffer,
  envelopeRecipients: string[],
  refusedOverLimit: string[] = [],
): Promise<SubmittedMessage> {
  refuseBrokenHeaderLines(raw);
  let mail: ParsedMail;
  try {
    // Taken as sent: no text made from the HTML, no HTML from the text, no links found in either.
    mail = await simpleParser(raw, {
      skipHtmlToText: true,
      skipTextToHtml: true,
      skipTextLinks: true,
      skipImageLinks: true,
      keepCidLinks: true,
    });
  } catch {
    throw new ServiceError('validation_error', 'The message could not be read as MIME', 'message');
  }

  const from = mailboxes(mail.from);
  if (from.length === 0) throw new ServiceError('missing_required_field', 'The message has no From header', 'from');
  if (from.length > 1)
    throw new ServiceError('validation_error', 'The From header names more than one address', 'from');
  const to = mailboxes(mail.to);
  const cc = mailboxes(mail.cc);
  const named = new Set([...to, ...cc].map((mailbox) => addressKey(mailbox.address)));
  const bcc = mailboxes(mail.bcc).filter((mailbox) => !named.has(addressKey(mailbox.address)));
  for (const mailbox of bcc) named.add(addressKey(mailbox.address));
  const envelope = new Set(envelopeRecipients.map(addressKey));
  const overLimit = new Set(refusedOverLimit.map(addressKey));
  for (const [field, list] of [
    ['to', to],
    ['cc', cc],
    ['bcc', bcc],
  ] as const) {
    const outside = list.find((mailbox) => !envelope.has(addressKey(mailbox.address)));
    if (outside && overLimit.has(addressKey(outside.address))) {
      throw new ServiceError(
        'too_many_recipients',
        `A message may have at most ${MAX_RECIPIENTS} recipients; the ${field} header names ${outside.address}, whose RCPT TO was refused over that limit`,
        field,
      );
    }
    if (outside) {
      throw new ServiceError(
        'validation_error',
        `The ${field} header names ${outside.address}, which is not an envelope recipient (RCPT TO); Mailroom sends to every address a message names`,
        field,
      );
    }
  }
  for (const address of envelopeRecipients) {
    if (!named.has(addressKey(address))) {
      named.add(addressKey(address));
      bcc.push({ address, name: '' });
    }
  }

  const message: EmailMessage = {
    from: display(from[0]!),
    to: to.map(display),
    ...(cc.length > 0 ? { cc: cc.map(display) } : {}),
    ...(bcc.length > 0 ? { bcc: bcc.map(display) } : {}),
    ...(mail.replyTo ? { reply_to: mailboxes(mail.replyTo).map(display) } : {}),
    ...(mail.subject === undefined ? {} : { subject: mail.subject }),
    ...(typeof mail.html === 'string' ? { html: mail.html } : {}),
    ...(mail.text === undefined ? {} : { text: mail.text }),
  };
  const tags = readTags(single(mail, 'x-tags'));
  if (tags) message.tags = tags;
  const headers = customHeaders(mail);
  if (Object.keys(headers).length > 0) message.headers = headers;
  if (mail.attachments.length > 0) {
    const html = typeof mail.html === 'string' ? mail.html : '';
    message.attachments = mail.attachments.map((attachment) => ({
      filename: attachment.filename ?? 'attachment',
      content: attachment.content.toString('base64'),
      content_type: attachment.contentType,
      // Shown inside the HTML: marked inline, related to it, or named by a cid: link in it.
      ...(attachment.cid &&
      (attachment.contentDisposition === 'inline' || attachment.related || html.includes(`cid:${attachment.cid}`))
        ? { content_id: attachment.cid }
        : {}),
    }));
  }
  const key = single(mail, 'idempotency-key');
  return { message, idempotencyKey: typeof key === 'string' ? key.trim() : undefined };
}

/** An instruction header given once; given twice, which one was meant cannot be told. */
function single(mail: ParsedMail, name: string): unknown {
  if (mail.headerLines.filter((line) => line.key === name).length > 1) {
    throw new ServiceError('validation_error', `The ${name} header is given more than once`, name);
  }
  return mail.headers.get(name);
}

/**
 * Header lines end with CRLF (a bare LF is read as a line end too, as MTAs do). A bare CR or a NUL in
 * the header section is refused: parsers disagree on where such a line ends, which is how a header is
 * smuggled past a check.
 */
function refuseBrokenHeaderLines(raw: Buffer): void {
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  const end = [crlf, lf].filter((at) => at >= 0).reduce((a, b) => Math.min(a, b), raw.length);
  for (let i = 0; i < end; i++) {
    const byte = raw[i];
    if (byte === 0x00 || (byte === 0x0d && raw[i + 1] !== 0x0a)) {
      throw new ServiceError(
        'validation_error',
        'A header line contains a bare carriage return or a NUL: end every line with CRLF',
        'headers',
      );
    }
  }
}

function mailboxes(field: AddressObject | AddressObject[] | undefined): Array<{ address: string; name: string }> {
  const flat = (entries: EmailAddress[]): EmailAddress[] =>
    entries.flatMap((entry) => (entry.group ? flat(entry.group) : [entry]));
  return [field ?? []]
    .flat()
    .flatMap((object) => flat(object.value))
    .filter(
      (entry): entry is EmailAddress & { address: string } => typeof entry.address === 'string' && entry.address !== '',
    )
    .map((entry) => ({ address: entry.address, name: entry.name }));
}

/** `Name <address>` as the API takes it; quotes and backslashes in a display name are dropped. */
function display(mailbox: { address: string; name: string }): string {
  const name = mailbox.name.replace(/["\\]/g, '').trim();
  const domain = mailbox.address.slice(mailbox.address.lastIndexOf('@') + 1);
  return formatMailbox({ address: mailbox.address, name: name === '' ? undefined : name, domain });
}

/** `X-Tags: kind=receipt, plan=pro, urgent`: name=value pairs, or a bare name (value true). */
function readTags(header: unknown): Record<string, string | boolean> | undefined {
  if (typeof header !== 'string' || header.trim() === '') return undefined;
  const tags: Record<string, string | boolean> = {};
  for (const part of header.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const equals = item.indexOf('=');
    if (equals < 0) tags[item] = true;
    else tags[item.slice(0, equals).trim()] = item.slice(equals + 1).trim();
  }
  return tags;
}

/** The client's own headers (X-…, In-Reply-To, References …), decoded, without those Mailroom writes. */
function customHeaders(mail: ParsedMail): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const { key, line } of mail.headerLines) {
    if (isOwnedHeader(key) || INSTRUCTION_HEADERS.has(key)) continue;
    const parsed = mail.headers.get(key);
    const unfolded = line
      .slice(line.indexOf(':') + 1)
      .replace(/\r?\n[ \t]+/g, ' ')
      .trim();
    const value = typeof parsed === 'string' ? parsed : unfolded;
    // Written by its name as the client spelled it.
    headers[line.slice(0, line.indexOf(':')).trim()] = key === 'references' ? shortenedReferences(value) : value;
  }
  return headers;
}

/**
 * A long thread's References field, shortened to fit one header line (998 characters) as RFC 5322
 * allows: the first message id (the thread's root) and as many of the last ones as fit.
 */
function shortenedReferences(value: string): string {
  if (value.length <= 998) return value;
  const ids = value.split(/\s+/).filter((id) => id !== '');
  let length = ids[0]!.length;
  const tail: string[] = [];
  for (const id of ids.slice(1).reverse()) {
    if (length + 1 + id.length > 998) break;
    tail.unshift(id);
    length += 1 + id.length;
  }
  return [ids[0]!, ...tail].join(' ');
}
