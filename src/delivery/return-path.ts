import type { Signer } from '../platform/signing.ts';

// VERP (variable envelope return path): each message leaves with its own MAIL FROM,
// `bounce-<email id, 32 hex>-<tag, 16 hex>@<MAILROOM_RETURN_PATH_DOMAIN>`, so a bounce report that comes
// back names the message it is about even when its content does not. The tag is an HMAC of the id: the
// inbound listener refuses any other address, so reports cannot be forged for messages by guessing ids.
// Lower-case hex only, since some servers change the case of local parts; 56 characters, under the
// 64 a local part may have. Delivery makes the address (it is the MAIL FROM of every copy); the inbound
// listener reads it back, so the scheme lives here, on the sending side, and inbound/ depends on it.

const TAG_BYTES = 8;
const LOCAL_PART = /^bounce-([0-9a-f]{32})-([0-9a-f]{16})$/;

export function returnPathAddress(signer: Signer, emailId: string, domain: string): string {
  const hex = emailId.replaceAll('-', '').toLowerCase();
  return `bounce-${hex}-${signer.tag('return-path', hex, TAG_BYTES)}@${domain}`;
}

/** The email id a return-path address stands for; null when the address is not one Mailroom made. */
export function emailIdOfReturnPath(signer: Signer, address: string): string | null {
  const at = address.lastIndexOf('@');
  const match = LOCAL_PART.exec((at < 0 ? address : address.slice(0, at)).toLowerCase());
  if (!match) return null;
  const [, hex, tag] = match as unknown as [string, string, string];
  if (!signer.checkTag('return-path', hex, tag, TAG_BYTES)) return null;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
