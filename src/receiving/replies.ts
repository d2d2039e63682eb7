import EmailReplyParser from 'email-reply-parser';
import type { Queryable } from '../platform/db/database.ts';
import type { Signer } from '../platform/signing.ts';
import { readReplyAddress } from '../emails/reply-address.ts';

// Replies tied to what was sent. A received message answers a sent one of the same organization when:
// 1. one of its recipients is a reply address (emails/reply-address.ts) of that organization's message;
//    the signature makes it unforgeable, so it is trusted first;
// 2. else its In-Reply-To, then its References from the last (the message answered directly) to the
//    first, names one: Mailroom's Message-IDs are <email id@domain> (emails/prepare-message.ts), so the
//    id is read out of the header and the message must have that id, this organization, and that very
//    Message-ID. A Message-ID is public (every recipient sees it), so a header naming another
//    organization's message ties nothing; neither does a reply address another organization made.

/** How much of a text the reply parser reads (see stripQuotedText). */
const PARSED_CHARACTERS = 64 * 1024;

/** Mailroom's Message-ID: <uuid@domain>. */
const MAILROOM_MESSAGE_ID = /^<([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})@[^<>@\s]+>$/;

/** The id of the sent message a received one answers (same organization), or null. */
export async function findRepliedEmail(
  db: Queryable,
  signer: Signer,
  organizationId: string,
  message: { recipients: string[]; inReplyTo: string | undefined; references: string[] },
): Promise<string | null> {
  const byAddress = message.recipients.flatMap((address) => readReplyAddress(signer, address) ?? []);
  const byHeader = [
    ...messageIds(message.inReplyTo ?? ''),
    ...message.references.flatMap((value) => messageIds(value)).reverse(),
  ].flatMap((messageId) => {
    const id = MAILROOM_MESSAGE_ID.exec(messageId)?.[1];
    return id === undefined ? [] : [{ id, messageId }];
  });
  const ids = [...new Set([...byAddress, ...byHeader.map((candidate) => candidate.id)])];
  if (ids.length === 0) return null;

  const { rows } = await db.query<{ id: string; message_id: string }>(
    'SELECT id, message_id FROM emails WHERE organization_id = $1 AND id = ANY($2::uuid[])',
    [organizationId, ids],
  );
  const found = new Map(rows.map((row) => [row.id, row.message_id.toLowerCase()]));
  const first = byAddress.find((id) => found.has(id));
  if (first !== undefined) return first;
  return byHeader.find(({ id, messageId }) => found.get(id) === messageId)?.id ?? null;
}

/** The <...> Message-IDs in a header value (In-Reply-To may hold several; References holds a list), lower case. */
function messageIds(value: string): string[] {
  return (value.match(/<[^<>\s]+>/g) ?? []).map((id) => id.toLowerCase());
}

/**
 * The text of a reply without its quoted history and signature. email-reply-parser finds the quoted
 * history ("On … wrote:" and '>' lines, Outlook's "-----Original Message-----" or From:/Sent: block,
 * and their translations) and the signature. It also takes a closing such as "Cheers,\nBob" for a
 * signature, which is right under a reply but would cut a message that answers nothing: so a text
 * without quoted history keeps all of itself but what follows the "-- " signature separator line.
 * The parser reads only the first PARSED_CHARACTERS: it takes about a millisecond per kilobyte on the
 * listener's event loop, and a reply's own words come before the history it quotes. A message that
 * answers nothing (no In-Reply-To or References, not sent to a reply address: `answersSomething`
 * false) quotes no history to find, so only its signature is cut, without the parser: most of what a
 * support address receives is new mail, and the parser was the listener's largest cost per message.
 */
export function stripQuotedText(text: string, answersSomething = true): string {
  const normalized = text.replace(/\r\n?/g, '\n');
  if (answersSomething) {
    const email = new EmailReplyParser().read(normalized.slice(0, PARSED_CHARACTERS));
    if (email.getQuotedText().trim() !== '') return email.getVisibleText().trimEnd();
  }
  const separator = /^-- ?$/m.exec(normalized);
  return separator ? normalized.slice(0, separator.index).trimEnd() : text;
}
