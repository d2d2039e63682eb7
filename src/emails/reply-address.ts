import type { Queryable } from '../platform/db/database.ts';
import { loadSigner, type Signer } from '../platform/signing.ts';

// Reply addresses: a sent message can carry, as its Reply-To,
//   reply+<email id, 32 hex>-<tag, 24 hex>@<its From domain>
// so that a reply comes back to Mailroom and is tied to the message it answers (receiving/replies.ts).
// The tag is an HMAC of the id under the 'reply' key: an address cannot be forged, or guessed from
// another, and one made for one purpose (a return path) is never valid as another. Lower-case hex only,
// since some servers change the case of local parts; 63 characters, under the 64 a local part may have.
//
// Sending makes the address; the inbound side reads it back, so the scheme lives here, on the sending
// side, like the VERP return path (delivery/return-path.ts).

const TAG_BYTES = 12;
const LOCAL_PART = /^reply\+([0-9a-f]{32})-([0-9a-f]{24})$/;

/** The reply address of message `emailId`, at `domain` (the message's From domain). */
export function replyAddress(signer: Signer, emailId: string, domain: string): string {
  const hex = emailId.replaceAll('-', '').toLowerCase();
  return `reply+${hex}-${signer.tag('reply', hex, TAG_BYTES)}@${domain}`;
}

/** The id of the message a reply address was made for; null for any address Mailroom did not make. */
export function readReplyAddress(signer: Signer, address: string): string | null {
  const at = address.lastIndexOf('@');
  const match = LOCAL_PART.exec((at < 0 ? address : address.slice(0, at)).toLowerCase());
  if (!match) return null;
  const [, hex, tag] = match as unknown as [string, string, string];
  if (!signer.checkTag('reply', hex, tag, TAG_BYTES)) return null;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// Accepting a message has no signer of its own (the carriers, the API and SMTP submission, hand over a
// database): the installation's signer is read from it once, the first time a reply address is made.
// Its secret never changes once made, so keeping it is safe.
const signers = new WeakMap<Queryable, Promise<Signer>>();

/** The installation's signer, read once per database handle. */
export function signerOf(db: Queryable): Promise<Signer> {
  let signer = signers.get(db);
  if (!signer) {
    signer = loadSigner(db);
    // A failed read (the database down) is not kept: the next message tries again.
    signer.catch(() => signers.delete(db));
    signers.set(db, signer);
  }
  return signer;
}
