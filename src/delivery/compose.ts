import { createPrivateKey, type KeyObject } from 'node:crypto';
import { keptKeys } from '../platform/crypto-keys.ts';
import type { Readable } from 'node:stream';
import MailComposer from 'nodemailer/lib/mail-composer';
import DKIM from 'nodemailer/lib/dkim';
import type { OutgoingMessage } from './transport.ts';

/**
 * The message as it goes on the wire: RFC 5322 with CRLF line ends, DKIM-signed with the sending
 * domain's key. Bcc never appears in the headers (bcc addresses travel only in envelope.to) and tags
 * stay in Mailroom. MailComposer shapes the tree: html + text become multipart/alternative, inline
 * parts (with a content id) multipart/related, other attachments multipart/mixed.
 */
export async function composeMessage(message: OutgoingMessage): Promise<Buffer> {
  const composer = new MailComposer({
    from: message.from,
    to: message.to,
    cc: nonEmpty(message.cc),
    replyTo: nonEmpty(message.replyTo),
    subject: message.subject,
    html: message.html,
    text: message.text,
    attachments: message.attachments.map((attachment) => ({
      filename: attachment.filename,
      contentType: attachment.contentType,
      cid: attachment.contentId,
      content: attachment.content,
    })),
    headers: message.headers,
    messageId: message.messageId,
    date: new Date(),
    // CRLF before signing, so the signature covers exactly the bytes that go over SMTP.
    newline: 'win',
    // Content is always in memory; never let a value be read from a path or a URL.
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  const unsigned = await composer.compile().build();
  const { domain, selector, privateKey } = message.dkim;
  const signer = new DKIM({
    domainName: domain,
    keySelector: selector,
    privateKey: signingKey(privateKey),
    headerFieldNames: SIGNED_HEADERS,
  });
  return collect(signer.sign(unsigned));
}

// A domain's private key parsed once, not for every message.
const domainKey = keptKeys((pem) => createPrivateKey(pem));

function signingKey(pem: string): KeyObject | string {
  try {
    return domainKey(pem);
  } catch {
    return pem; // not a key: left to the signer, as before it was parsed here
  }
}

// Nodemailer's default list (RFC 6376 §5.4.1) plus List-Unsubscribe-Post, which RFC 8058 §4 requires
// the signature to cover for one-click unsubscribe to be honoured.
const SIGNED_HEADERS =
  'From:Sender:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:Content-Type:Content-Transfer-Encoding:' +
  'Content-ID:Content-Description:Resent-Date:Resent-From:Resent-Sender:Resent-To:Resent-Cc:' +
  'Resent-Message-ID:In-Reply-To:References:List-Id:List-Help:List-Unsubscribe:List-Unsubscribe-Post:' +
  'List-Subscribe:List-Post:List-Owner:List-Archive';

const nonEmpty = (list: string[]) => (list.length > 0 ? list : undefined);

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
