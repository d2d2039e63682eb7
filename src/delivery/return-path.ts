import { addressKey } from '../platform/address-key.ts';
import type { Signer } from '../platform/signing.ts';

// VERP (variable envelope return path): each recipient's copy leaves with its own MAIL FROM,
//   bounce-<email id, 32 hex>-<recipient, 8 hex>-<tag, 14 hex>@<MAILROOM_RETURN_PATH_DOMAIN>
// so a report that comes back names the message and the one recipient it was sent for, even when its
// content does not. The recipient part is a keyed digest of the address; the tag is an HMAC of both, so
// the inbound listener refuses any address it did not make, and a report can affect only the recipient
// whose copy it answers: someone who received a message cannot mark a co-recipient bounced or complained.
// Lower-case hex only, since some servers change the case of local parts; 63 characters, under the 64 a
// local part may have.
//
// Messages sent before recipients were named used `bounce-<email id>-<tag, 16 hex>`: those addresses
// are still read (with no recipient), so their late reports are not lost. None is made any more.
//
// Delivery makes the address; the inbound listener reads it back, so the scheme lives here, on the
// sending side, and inbound/ depends on it.

const RECIPIENT_BYTES = 4;
const TAG_BYTES = 7;
const LOCAL_PART = /^bounce-([0-9a-f]{32})-([0-9a-f]{8})-([0-9a-f]{14})$/;

const MESSAGE_ONLY_TAG_BYTES = 8;
const MESSAGE_ONLY_LOCAL_PART = /^bounce-([0-9a-f]{32})-([0-9a-f]{16})$/;

/** What a return path names: the message, and the recipient's digest (null for the old, message-only form). */
export interface ReturnPathTarget {
  emailId: string;
  recipientDigest: string | null;
}

/** The settings under which copies leave with their own return path. */
export interface ReturnPath {
  signer: Signer;
  domain: string;
}

/** The digest that stands for a recipient in a return path; the same for any spelling of the address. */
export function recipientDigest(signer: Signer, address: string): string {
  return signer.tag('return-path', `recipient:${addressKey(address)}`, RECIPIENT_BYTES);
}

/** The MAIL FROM of the copy of message `emailId` sent to `recipient`. */
export function returnPathAddress(returnPath: ReturnPath, emailId: string, recipient: string): string {
  const { signer, domain } = returnPath;
  const hex = emailId.replaceAll('-', '').toLowerCase();
  const digest = recipientDigest(signer, recipient);
  return `bounce-${hex}-${digest}-${signer.tag('return-path', `${hex}-${digest}`, TAG_BYTES)}@${domain}`;
}

/** The message (and recipient) a return-path address stands for; null when Mailroom did not make it. */
export function readReturnPath(signer: Signer, address: string): ReturnPathTarget | null {
  const at = address.lastIndexOf('@');
  const local = (at < 0 ? address : address.slice(0, at)).toLowerCase();
  const current = LOCAL_PART.exec(local);
  if (current) {
    const [, hex, digest, tag] = current as unknown as [string, string, string, string];
    if (!signer.checkTag('return-path', `${hex}-${digest}`, tag, TAG_BYTES)) return null;
    return { emailId: uuid(hex), recipientDigest: digest };
  }
  const old = MESSAGE_ONLY_LOCAL_PART.exec(local);
  if (old) {
    const [, hex, tag] = old as unknown as [string, string, string];
    if (!signer.checkTag('return-path', hex, tag, MESSAGE_ONLY_TAG_BYTES)) return null;
    return { emailId: uuid(hex), recipientDigest: null };
  }
  return null;
}

function uuid(hex: string): string {
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
