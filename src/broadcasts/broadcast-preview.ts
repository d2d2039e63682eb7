import type { Config } from '../platform/config.ts';
import { publicBaseUrl } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { parseMailbox } from '../platform/addresses.ts';
import { getContact } from '../contacts/contacts.ts';
import { sendEmails } from '../emails/send-emails.ts';
import type { IdempotencyKey } from '../platform/idempotency.ts';
import { personalizeContent, type ContactFields } from './personalize.ts';
import type { BroadcastRow } from './broadcasts.ts';

// The dashboard's two ways to see a broadcast before it goes: its content as one contact would receive
// it (preview), and one ordinary email of it to an address (test). Both personalize the content for a
// contact: its fields, and its property values with each property's fallback where it has none. The
// unsubscribe placeholder becomes an example link that unsubscribes no one: a preview or a test is not
// a copy of the broadcast, and a click on it must not take a contact off the list.

/** What a preview or a test shows in place of {{{RESEND_UNSUBSCRIBE_URL}}}. */
export const exampleUnsubscribeUrl = (config: Config) => `${publicBaseUrl(config)}/unsubscribe/example`;

export interface PersonalizedContent {
  subject: string;
  preview_text: string | null;
  html: string | null;
  text: string | null;
}

/** Who to personalize for: a contact by id, or an address (its contact's fields if it is one). */
export interface PreviewTarget {
  contact_id?: string;
  email?: string;
}

/**
 * The fields of the contact the target names. An address that is no contact reads as a contact with no
 * name and no values: placeholders get their fallbacks. A contact id that names none is a 400.
 */
export async function contactFieldsFor(
  db: Queryable,
  organizationId: string,
  target: PreviewTarget,
): Promise<ContactFields> {
  if (target.contact_id !== undefined && target.email !== undefined) {
    throw new ServiceError('validation_error', 'Give contact_id or email, not both', 'email');
  }
  if (target.contact_id !== undefined) {
    const contact = isUuid(target.contact_id)
      ? await getContact(db, organizationId, target.contact_id).catch(notFoundAs(undefined))
      : undefined;
    if (!contact) {
      throw new ServiceError('validation_error', `contact_id: no such contact: ${target.contact_id}`, 'contact_id');
    }
    return fieldsOf(contact);
  }
  const email = target.email === undefined ? '' : parseMailbox(target.email, 'email').address;
  const contact = email === '' ? undefined : await getContact(db, organizationId, email).catch(notFoundAs(undefined));
  if (contact) return fieldsOf(contact);
  // No contact: each property's fallback, as a contact without values would read.
  const { rows } = await db.query<{ key: string; fallback_value: string | number }>(
    `SELECT key, fallback_value FROM contact_properties
      WHERE organization_id = $1 AND fallback_value IS NOT NULL ORDER BY key`,
    [organizationId],
  );
  return {
    email,
    first_name: null,
    last_name: null,
    properties: Object.fromEntries(rows.map((row) => [row.key, row.fallback_value])),
  };
}

/**
 * The broadcast's subject, preview text and content as the contact would receive them: placeholders
 * filled in each, the preview text's included, and the subject on one line (each run of line breaks a
 * value brought in becomes one space, as in the copies, whose subject is a header line).
 */
export function personalizeBroadcast(
  broadcast: BroadcastRow,
  contact: ContactFields,
  unsubscribeUrl: string,
): PersonalizedContent {
  const plain = (content: string) => personalizeContent(content, contact, unsubscribeUrl, false);
  return {
    subject: plain(broadcast.subject ?? '').replace(/[\r\n]+/g, ' '),
    preview_text: broadcast.preview_text === null ? null : plain(broadcast.preview_text),
    html: broadcast.html === null ? null : personalizeContent(broadcast.html, contact, unsubscribeUrl, true),
    text: broadcast.text === null ? null : plain(broadcast.text),
  };
}

/**
 * POST /broadcasts/:id/test: one ordinary email of the broadcast to `to`, through the accept core like
 * any send (the organization's limits, suppression list and webhooks apply), its subject marked
 * "[Test] ", personalized for the contact with that address if there is one.
 */
export async function sendTestEmail(
  db: Database,
  config: Config,
  organizationId: string,
  broadcast: BroadcastRow,
  to: string,
  idempotency: IdempotencyKey | undefined,
): Promise<{ id: string }> {
  const address = parseMailbox(to, 'to').address;
  if (broadcast.from === null) throw new ServiceError('invalid_state', 'The broadcast has no from address');
  const content = personalizeBroadcast(
    broadcast,
    await contactFieldsFor(db, organizationId, { email: address }),
    exampleUnsubscribeUrl(config),
  );
  const outcome = await sendEmails(
    db,
    config,
    organizationId,
    {
      kind: 'single',
      message: {
        from: broadcast.from,
        to: [to],
        subject: `[Test] ${content.subject}`,
        ...(content.html !== null ? { html: content.html } : {}),
        ...(content.text !== null ? { text: content.text } : {}),
        ...(broadcast.reply_to ? { reply_to: broadcast.reply_to } : {}),
      },
    },
    idempotency,
  );
  const { result } = outcome;
  if ('refused' in result) throw ServiceError.from(result.refused);
  const [entry] = result.entries;
  if (!entry) throw new Error('A single send has no outcome');
  if (!entry.accepted) throw ServiceError.from(entry.error);
  return { id: entry.id };
}

const fieldsOf = (contact: Awaited<ReturnType<typeof getContact>>): ContactFields => ({
  email: contact.email,
  first_name: contact.first_name,
  last_name: contact.last_name,
  properties: Object.fromEntries(Object.entries(contact.properties).map(([key, { value }]) => [key, value])),
});

/** A not-found refusal read as `value` (the caller says what that means); anything else passes on. */
const notFoundAs =
  <T>(value: T) =>
  (error: unknown): T => {
    if (error instanceof ServiceError && error.name === 'not_found') return value;
    throw error;
  };
