import type { Queryable } from '../platform/db/database.ts';
import type { OutgoingMessage } from './transport.ts';
import type { EmailToSend, PendingRecipient } from './take-message.ts';

// Step 4, the message as it leaves: the stored message with its attachments, the SMTP envelope (MAIL
// FROM and the recipients to send to) and the sending domain's DKIM key and TLS setting (read with the
// message, from the same domain row). One message for everyone; the
// next step makes a copy per recipient when the message carries something personal or each recipient
// gets a return path of their own.

export async function outgoingMessage(
  db: Queryable,
  email: EmailToSend,
  recipients: PendingRecipient[],
): Promise<OutgoingMessage> {
  const attachments = !email.has_attachments
    ? { rows: [] }
    : await db.query<{
        filename: string;
        content_type: string;
        content_id: string | null;
        content: Uint8Array;
      }>(
        'SELECT filename, content_type, content_id, content FROM email_attachments WHERE email_id = $1 ORDER BY position',
        [email.id],
      );
  const fromAddress = /<([^<>]+)>$/.exec(email.from)?.[1] ?? email.from;
  return {
    emailId: email.id,
    organizationId: email.organization_id,
    firstAttempt: recipients.every((r) => r.attempts === 0),
    messageId: email.message_id,
    from: email.from,
    to: email.to,
    cc: email.cc,
    // A reply address is made only for a message without a reply_to of its own (prepare-message.ts).
    replyTo: email.reply_address === null ? email.reply_to : [email.reply_address],
    subject: email.subject,
    html: email.html ?? undefined,
    text: email.text ?? undefined,
    headers: email.headers ?? undefined,
    attachments: attachments.rows.map((a) => ({
      filename: a.filename,
      contentType: a.content_type,
      contentId: a.content_id ?? undefined,
      content: Buffer.from(a.content),
    })),
    // The From address, unless the next step gives each copy its own return path.
    envelope: {
      from: fromAddress,
      to: recipients.map((r) => r.address),
    },
    dkim: {
      domain: email.domain_name ?? fromAddress.split('@')[1]!,
      selector: email.dkim_selector ?? '',
      privateKey: email.dkim_private_key ?? '',
    },
    tls: email.domain_tls ?? 'opportunistic',
  };
}
