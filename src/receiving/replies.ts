import type { Queryable } from '../platform/db/database.ts';
import type { Signer } from '../platform/signing.ts';

// Replies tied to what was sent. SEAM (filled in by the replies work): the signatures below are what
// the listener calls.

/** The id of the sent message a received one answers (same organization), or null. */
export async function findRepliedEmail(
  _db: Queryable,
  _signer: Signer,
  _organizationId: string,
  _message: { recipients: string[]; inReplyTo: string | undefined; references: string[] },
): Promise<string | null> {
  return null;
}

/** The text of a reply without its quoted history and signature. */
export function stripQuotedText(text: string): string {
  return text;
}
