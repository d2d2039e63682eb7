import type { Signer } from '../platform/signing.ts';

// The RFC 8058 one-click link of a topic send: it names the organization, the recipient's address, the
// topic and the message it came in, signed, so that POSTing to it unsubscribes exactly that address from
// exactly that topic (unsubscribe-routes.ts) and nothing else can be made of it.

export interface UnsubscribeTarget {
  organizationId: string;
  address: string;
  /** The topic to leave; null for a broadcast without a topic: the contact leaves every broadcast. */
  topicId: string | null;
  emailId: string;
}

/** Payload keys are short: the link is in a header line. */
export function unsubscribeUrl(signer: Signer, baseUrl: string, target: UnsubscribeTarget): string {
  const token = signer.sign('unsubscribe', {
    o: target.organizationId,
    a: target.address,
    t: target.topicId,
    e: target.emailId,
  });
  return `${baseUrl}/unsubscribe/${token}`;
}

/** The target of an unsubscribe token; null when it is not one this installation signed. */
export function readUnsubscribeToken(signer: Signer, token: string): UnsubscribeTarget | null {
  const payload = signer.verify('unsubscribe', token);
  if (!payload) return null;
  const { o, a, t, e } = payload;
  if (typeof o !== 'string' || typeof a !== 'string' || (typeof t !== 'string' && t !== null) || typeof e !== 'string')
    return null;
  return { organizationId: o, address: a, topicId: t, emailId: e };
}
