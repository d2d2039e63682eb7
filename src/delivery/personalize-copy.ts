import type { Signer } from '../platform/signing.ts';
import { unsubscribeUrl } from '../contacts/unsubscribe-link.ts';
import { addTracking, trackingBaseUrl } from '../tracking/tracking-links.ts';
import type { OutgoingMessage } from './transport.ts';
import type { EmailToSend } from './take-message.ts';
import { returnPathAddress, type ReturnPath } from './return-path.ts';

// Step 5, personalize each copy. A message that carries something per recipient (tracked links and an
// open pixel, the one-click unsubscribe link of a topic send or a broadcast copy) goes out as one copy per
// recipient, each with that
// recipient's own. With a return-path domain every copy also leaves from a return path naming its
// recipient (return-path.ts), so copies go in separate SMTP transactions even when their content is
// the same. Any other message goes out as it is, in one SMTP transaction for all its recipients.
// A sending domain's own settings come first: its custom return path (<label>.<domain>) instead of the
// server's return-path domain, its tracking subdomain instead of MAILROOM_PUBLIC_URL for the pixel and
// tracked links. Unsubscribe links stay at MAILROOM_PUBLIC_URL, where they have always pointed.
//
// Every broadcast copy carries the RFC 8058 fields, with or without a topic: its link names the copy's
// topic (null for a broadcast without one: the link then unsubscribes the contact from every broadcast).
// The link is made by unsubscribeUrl from the organization, the recipient's address, the topic and the
// message id, and signing is deterministic (the same fields give the same token), so it is the very link
// the fan-out wrote into the body for {{{RESEND_UNSUBSCRIBE_URL}}}, made from the same four fields.

/** What signs a recipient's links, and where they point. */
export interface Links {
  signer: Signer;
  baseUrl: string;
}

/** The copies to send: one per recipient of the envelope, or the message itself. */
export function personalizeCopies(
  message: OutgoingMessage,
  email: EmailToSend,
  links: Links,
  serverReturnPath: ReturnPath | undefined,
): OutgoingMessage[] {
  const personal = personalized(email);
  const returnPath = domainReturnPath(email, links.signer) ?? serverReturnPath;
  if (!personal && returnPath === undefined) return [message];
  return message.envelope.to.map((recipient) => {
    const copy = personal
      ? copyFor(message, email, recipient, links)
      : { ...message, envelope: { ...message.envelope, to: [recipient] } };
    if (returnPath === undefined) return copy;
    return { ...copy, envelope: { ...copy.envelope, from: returnPathAddress(returnPath, email.id, recipient) } };
  });
}

/** The sending domain's own return path, when it has one (domain-options.ts). */
function domainReturnPath(email: EmailToSend, signer: Signer): ReturnPath | undefined {
  if (email.custom_return_path === null || email.domain_name === null) return undefined;
  return { signer, domain: `${email.custom_return_path}.${email.domain_name}` };
}

/** Whether each recipient gets a copy of their own: tracking needs an HTML body, a topic send or a broadcast copy its link. */
function personalized(email: EmailToSend): boolean {
  return hasUnsubscribeLink(email) || (email.html !== null && (email.open_tracking || email.click_tracking));
}

/** A topic send, or a broadcast copy (with or without a topic), carries a one-click unsubscribe link. */
const hasUnsubscribeLink = (email: EmailToSend) => email.topic_id !== null || email.broadcast_id !== null;

/** One recipient's copy: their own tracked links and pixel, their own one-click unsubscribe link. */
function copyFor(message: OutgoingMessage, email: EmailToSend, recipient: string, links: Links): OutgoingMessage {
  const html =
    message.html === undefined
      ? undefined
      : addTracking(message.html, {
          ...links,
          ...(email.tracking_subdomain !== null &&
            email.domain_name !== null && {
              trackingBaseUrl: trackingBaseUrl(links.baseUrl, email.domain_name, email.tracking_subdomain),
            }),
          emailId: email.id,
          recipient,
          opens: email.open_tracking,
          clicks: email.click_tracking,
        });
  let headers = message.headers;
  if (hasUnsubscribeLink(email)) {
    const url = unsubscribeUrl(links.signer, links.baseUrl, {
      organizationId: email.organization_id,
      address: recipient,
      topicId: email.topic_id,
      emailId: email.id,
    });
    // RFC 8058: both fields, covered by the DKIM signature (compose.ts). Senders cannot set them
    // (owned headers, validate-message.ts): the only unsubscribe link is one that works.
    headers = {
      ...headers,
      'List-Unsubscribe': `<${url}>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    };
  }
  return { ...message, html, headers, envelope: { ...message.envelope, to: [recipient] } };
}
