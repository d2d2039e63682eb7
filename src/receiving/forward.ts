import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { newRowId } from '../platform/ids.ts';
import { addressKey } from '../platform/address-key.ts';
import { findSendingDomain } from '../domains/domains.ts';
import { writeAcceptances } from '../emails/group-commit.ts';
import type { PreparedMessage } from '../emails/prepare-message.ts';
import { validateMessage } from '../emails/validate-message.ts';
import type { EmailMessage } from '../emails/message-schema.ts';
import type { ForwardOutcome, RoutingResult } from './route-types.ts';

// A forward action sends a copy of a received message as a new message of the organization: its own id,
// timeline and webhooks, through the normal sending pipeline (suppressions, quota, delivery job), stored
// in the transaction that stores the received message. The copy is re-signed, not relayed: From is the
// receiving address the message came to (a verified domain of the organization, so Mailroom's DKIM key
// signs it and DMARC aligns), with the sender's name ("Jane Doe via Mailroom"); Reply-To is the sender's
// own Reply-To, else its From, so that answering the copy answers the sender. Subject, text, html and
// attachments are kept. The original's DKIM and ARC signatures cannot survive the new From and are not
// carried. A copy says so in X-Mailroom-Forwarded; a received message that carries it is not forwarded
// again, so two routes (or two Mailrooms) forwarding to each other cannot loop.

export const FORWARDED_HEADER = 'X-Mailroom-Forwarded';

interface ReceivedRow {
  from_address: string;
  reply_to_addresses: string[];
  received_for: string[];
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
}

interface ReceivedAttachment {
  filename: string | null;
  content_type: string;
  content_disposition: string | null;
  content_id: string | null;
  content: Uint8Array;
}

/** Stores one forwarded copy per address of routing.forwardTo; says what became of each. */
export async function forwardCopies(
  tx: Queryable,
  organizationId: string,
  receivedEmailId: string,
  routing: RoutingResult,
): Promise<ForwardOutcome[]> {
  if (routing.forwardTo.length === 0) return [];
  const { rows } = await tx.query<ReceivedRow>(
    `SELECT from_address, reply_to_addresses, received_for, subject, html, text, headers
       FROM received_emails WHERE id = $1 AND organization_id = $2`,
    [receivedEmailId, organizationId],
  );
  const received = rows[0];
  if (!received) throw new Error(`received email ${receivedEmailId} not found in its organization`);
  const skipAll = (skipped: string) =>
    routing.forwardTo.map((to): ForwardOutcome => ({ action: 'forward', to, skipped }));
  if (Object.keys(received.headers).some((name) => name.toLowerCase() === FORWARDED_HEADER.toLowerCase())) {
    return skipAll('already forwarded once (it carries X-Mailroom-Forwarded)');
  }
  const attachments = (
    await tx.query<ReceivedAttachment>(
      `SELECT filename, content_type, content_disposition, content_id, content FROM received_attachments
        WHERE received_email_id = $1 ORDER BY position`,
      [receivedEmailId],
    )
  ).rows;

  const outcomes: ForwardOutcome[] = [];
  const prepared: PreparedMessage[] = [];
  const now = new Date();
  for (const to of routing.forwardTo) {
    const via = routing.forwardFrom?.[to] ?? received.received_for[0]!;
    try {
      const message = copyOf(received, attachments, addressKey(via), to);
      const valid = validateMessage(message, { now, maxAttachmentBytes: Number.MAX_SAFE_INTEGER });
      const domain = await findSendingDomain(tx, organizationId, valid.from.domain);
      if (!domain) {
        outcomes.push({ action: 'forward', to, skipped: `${valid.from.domain} is not a verified sending domain` });
        continue;
      }
      const id = newRowId();
      prepared.push({
        ...valid,
        subject: valid.subject!,
        id,
        domainId: domain.id,
        messageId: `<${id}@${domain.name}>`,
      });
      outcomes.push({ action: 'forward', to, email_id: id });
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      outcomes.push({ action: 'forward', to, skipped: error.message });
    }
  }
  if (prepared.length === 0) return outcomes;
  // The exact path of the accept core: the organization's monthly quota is taken in this transaction,
  // and the copies that fit are stored with their recipients, timeline entry, webhooks and delivery job.
  const [accepted] = await writeAcceptances(tx, [
    { organizationId, messages: prepared, allOrNothing: false, idempotency: undefined, resultOf: () => null },
  ]);
  const refused = new Set(prepared.slice(accepted).map((m) => m.id));
  return outcomes.map((outcome) =>
    outcome.email_id !== undefined && refused.has(outcome.email_id)
      ? { action: 'forward', to: outcome.to, skipped: 'the monthly quota of the organization is used up' }
      : outcome,
  );
}

/** The copy to `to` of a received message, sent from the receiving address `via`. */
function copyOf(received: ReceivedRow, attachments: ReceivedAttachment[], via: string, to: string): EmailMessage {
  const sender = parseFrom(received.from_address);
  // A display name in quotes may hold neither quotes nor backslashes.
  const name = `${(sender.name || sender.address).replace(/["\\\r\n]/g, '')} via Mailroom`;
  const replyTo = received.reply_to_addresses.length > 0 ? received.reply_to_addresses : [sender.address];
  const text = received.text ?? undefined;
  const html = received.html ?? undefined;
  return {
    from: `"${name}" <${via}>`,
    to,
    reply_to: replyTo.filter((address) => address.includes('@')),
    subject: received.subject || '(no subject)',
    ...(text === undefined && html === undefined ? { text: '' } : { text, html }),
    headers: { [FORWARDED_HEADER]: via },
    attachments: attachments.map((a, i) => ({
      filename: a.filename || `attachment-${i + 1}`,
      content: Buffer.from(a.content).toString('base64'),
      content_type: a.content_type,
      ...(a.content_disposition === 'inline' && a.content_id ? { content_id: a.content_id } : {}),
    })),
  };
}

/** `Name <address>` or a bare address, as the From header was written. */
function parseFrom(from: string): { name: string; address: string } {
  const angle = /^\s*"?([^"<]*?)"?\s*<([^<>]+)>\s*$/.exec(from);
  if (angle) return { name: angle[1]!.trim(), address: angle[2]!.trim() };
  return { name: '', address: from.trim() };
}
