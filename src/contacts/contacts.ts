import type { Database, Queryable } from '../platform/db/database.ts';
import { isForeignKeyViolation, isUniqueViolation } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { parseMailbox } from '../platform/addresses.ts';
import { isUuid } from '../platform/ids.ts';
import { addressKey } from '../platform/address-key.ts';
import { withEvent } from '../webhooks/fan-out.ts';
import { contactEventDataSql } from '../webhooks/event-payloads.ts';
import type { EventType } from '../webhooks/event-types.ts';
import {
  checkedChoices,
  setChoices,
  topicsOfContact,
  unknownTopics,
  type ContactTopicView,
  type TopicChoice,
} from './contact-topics.ts';
import {
  checkedContactProperties,
  contactPropertiesSql,
  type PropertyType,
  type PropertyValue,
} from './contact-properties.ts';
import { addMemberships, checkSegmentsExist, checkedSegmentIds, findSegment } from './segments.ts';
import { segmentAudienceCondition } from './segment-filter-sql.ts';

// A contact is a person the organization keeps in its audience: one per address (without case), with
// a global `unsubscribed` switch and an explicit choice per topic where they made one. Who a topic send
// reaches follows from these (subscriptions.ts). A contact may also carry values for the organization's
// contact properties (contact-properties.ts) and be in segments (segments.ts). A contact, its choices,
// values and new memberships are written in one transaction, together with the webhook event that
// reports the change.

/** The fields of POST (email required) and PATCH (any non-empty subset). */
export interface ContactInput {
  email?: string;
  first_name?: string | null;
  last_name?: string | null;
  unsubscribed?: boolean;
  /** Sets these topics' choices; topics not listed keep theirs. */
  topics?: TopicChoice[];
  /** Values by property key; null removes the contact's value. Keys not given keep theirs. */
  properties?: Record<string, unknown>;
  /** POST only: segments the new contact joins (Resend's OpenAPI gives ids, its SDK `{ id }`). */
  segments?: Array<string | { id: string }>;
  /** POST only: Resend's older name for one segment to join. */
  audience_id?: string;
}

/** A property value as GET /contacts/:id gives it (the SDK's ContactPropertyValue). */
export type ContactPropertyView = { type: PropertyType; value: PropertyValue };

interface ContactRow {
  id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  unsubscribed: boolean;
  topics: TopicChoice[];
  properties: Record<string, ContactPropertyView>;
  created_at: Date;
  updated_at: Date;
}

/** The API shape. */
export interface ContactView {
  object: 'contact';
  id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  unsubscribed: boolean;
  topics: TopicChoice[];
  /** Each property the contact has a value for, or that has a fallback: the value a message would use. */
  properties: Record<string, ContactPropertyView>;
  created_at: string;
  updated_at: string;
}

export interface ContactPage {
  object: 'list';
  has_more: boolean;
  data: ContactView[];
}

// The explicit choices ride along as one JSON array, ordered by topic id.
const SELECT_CONTACT = `SELECT c.id, c.email, c.first_name, c.last_name, c.unsubscribed, c.created_at, c.updated_at,
       coalesce((SELECT jsonb_agg(jsonb_build_object('id', ct.topic_id, 'subscription', ct.subscription)
                                  ORDER BY ct.topic_id)
                   FROM contact_topics ct WHERE ct.contact_id = c.id), '[]'::jsonb) AS topics,
       ${contactPropertiesSql('c')} AS properties
  FROM contacts c`;

/**
 * A contact.* webhook event for the changed row. The organization is always $1. `segmentIds`: the
 * memberships the transaction writes after the statement (a new contact's), as a jsonb array.
 */
const contactEvent = (type: EventType, segmentIds?: string) => ({
  org: '$1::uuid',
  type: `'${type}'::text`,
  data: contactEventDataSql('changed', segmentIds),
});
const RETURNED = 'RETURNING id, email, first_name, last_name, unsubscribed, created_at, updated_at';

export async function createContact(
  db: Database,
  organizationId: string,
  input: ContactInput & { email: string },
): Promise<{ id: string }> {
  const email = contactAddress(input.email);
  const choices = checkedChoices(input.topics ?? []);
  const listed = checkedSegmentIds(input.segments ?? [], 'segments');
  const legacy = input.audience_id === undefined ? [] : checkedSegmentIds([input.audience_id], 'audience_id');
  return writing(email, () =>
    db.transaction(async (tx) => {
      const { set: properties } = await checkedContactProperties(tx, organizationId, input.properties ?? {});
      await checkSegmentsExist(tx, organizationId, listed, 'segments');
      await checkSegmentsExist(tx, organizationId, legacy, 'audience_id');
      const segmentIds = [...new Set([...listed, ...legacy])].sort();
      const { rows } = await tx.query<{ id: string }>(
        withEvent(
          `INSERT INTO contacts (organization_id, email, first_name, last_name, unsubscribed, properties)
           VALUES ($1, $2, $3, $4, $5, $6::jsonb) ${RETURNED}`,
          contactEvent('contact.created', 'to_jsonb($7::uuid[])'),
        ),
        [
          organizationId,
          email,
          input.first_name ?? null,
          input.last_name ?? null,
          input.unsubscribed ?? false,
          JSON.stringify(properties),
          segmentIds,
        ],
      );
      const id = rows[0]!.id;
      await setChoices(tx, organizationId, id, choices);
      await addMemberships(tx, id, segmentIds);
      return { id };
    }),
  );
}

/**
 * The contact of each address of one organization (created, as POST /contacts would, when there is none
 * yet, with its contact.created event), keyed by the address as given; an address the contacts refuse
 * has none. Contacts found are locked against deletion (FOR KEY SHARE), as the created ones are by their
 * insert, until the transaction ends.
 */
export async function ensureContactsIn(
  tx: Queryable,
  organizationId: string,
  emails: string[],
): Promise<Map<string, { id: string; email: string }>> {
  const keyOf = new Map<string, string>();
  const addresses = new Map<string, string>();
  for (const email of emails) {
    try {
      const address = contactAddress(email);
      keyOf.set(email, address.toLowerCase());
      addresses.set(address.toLowerCase(), address);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
    }
  }
  const contacts = new Map<string, { id: string; email: string }>();
  if (addresses.size > 0) {
    const { rows: created } = await tx.query<{ id: string; email: string }>(
      withEvent(
        `INSERT INTO contacts (organization_id, email) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING ${RETURNED}`,
        contactEvent('contact.created', "'[]'::jsonb"),
      ),
      [organizationId, [...addresses.values()]],
    );
    for (const row of created) contacts.set(row.email.toLowerCase(), { id: row.id, email: row.email });
    const missing = [...addresses.keys()].filter((key) => !contacts.has(key));
    if (missing.length > 0) {
      // Other transactions made these first (they have committed: the insert waited for them).
      const { rows: found } = await tx.query<{ id: string; email: string }>(
        `SELECT id, email FROM contacts WHERE organization_id = $1 AND lower(email) = ANY($2::text[])
          ORDER BY id FOR KEY SHARE`,
        [organizationId, missing],
      );
      for (const row of found) contacts.set(row.email.toLowerCase(), { id: row.id, email: row.email });
    }
  }
  const byEmail = new Map<string, { id: string; email: string }>();
  for (const [email, key] of keyOf) {
    const contact = contacts.get(key);
    if (contact) byEmail.set(email, contact);
  }
  return byEmail;
}

/**
 * Oldest first, `limit` at a time; `after` is the id of the last contact of the previous page, `before`
 * the id of the first contact of the next one (Resend's SDK sends either).
 */
export async function listContacts(
  db: Queryable,
  organizationId: string,
  page: { limit: number; after?: string; before?: string; segmentId?: string },
): Promise<ContactPage> {
  // Only the contacts of one segment (those added to it, and those its filter matches now): an id that
  // names none of the organization's is a 404.
  const segment = page.segmentId === undefined ? undefined : await findSegment(db, organizationId, page.segmentId);
  if (page.segmentId !== undefined && !segment) throw notFound('Segment');
  if (page.after !== undefined && page.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  const field = page.before !== undefined ? 'before' : 'after';
  const cursor = page.before ?? page.after ?? null;
  if (cursor !== null && !(await findContactRow(db, organizationId, { id: cursor }))) {
    throw new ServiceError('validation_error', `${field}: ${cursor} is not a contact of this organization`, field);
  }
  // `before` walks back from the cursor, then the page is turned back into oldest-first order.
  const forward = page.before === undefined;
  const params: unknown[] = [organizationId, cursor, page.limit + 1];
  const inSegment = segment ? `AND ${segmentAudienceCondition(segment, params)}` : '';
  const { rows } = await db.query<ContactRow>(
    `${SELECT_CONTACT}
      WHERE c.organization_id = $1
        AND ($2::uuid IS NULL OR (c.created_at, c.id) ${forward ? '>' : '<'} (SELECT created_at, id FROM contacts WHERE id = $2))
        ${inSegment}
      ORDER BY c.created_at ${forward ? 'ASC' : 'DESC'}, c.id ${forward ? 'ASC' : 'DESC'}
      LIMIT $3`,
    params,
  );
  const data = rows.slice(0, page.limit);
  if (!forward) data.reverse();
  return { object: 'list', has_more: rows.length > page.limit, data: data.map(toView) };
}

/** `idOrEmail` is the contact's id, or (when it has an @) its address, matched without case. */
export async function getContact(db: Queryable, organizationId: string, idOrEmail: string): Promise<ContactView> {
  const key = contactKey(idOrEmail);
  const contact = key && (await findContactRow(db, organizationId, key));
  if (!contact) throw notFound('Contact');
  return toView(contact);
}

/**
 * Applies the given fields; the others keep their values. The row is locked from read to write so
 * that two concurrent updates cannot undo each other's fields.
 */
export async function updateContact(
  db: Database,
  organizationId: string,
  idOrEmail: string,
  changes: ContactInput,
): Promise<{ id: string }> {
  const email = changes.email === undefined ? undefined : contactAddress(changes.email);
  return writing(email, () => db.transaction((tx) => updateContactIn(tx, organizationId, idOrEmail, changes)));
}

/** updateContact inside the caller's transaction (an automation's contact_update step). */
export async function updateContactIn(
  tx: Queryable,
  organizationId: string,
  idOrEmail: string,
  changes: ContactInput,
): Promise<{ id: string }> {
  const key = contactKey(idOrEmail);
  if (!key) throw notFound('Contact');
  const email = changes.email === undefined ? undefined : contactAddress(changes.email);
  const choices = checkedChoices(changes.topics ?? []);
  const current = await findContactRow(tx, organizationId, key, { lock: true });
  if (!current) throw notFound('Contact');
  const pick = <K extends 'first_name' | 'last_name' | 'unsubscribed'>(field: K) =>
    changes[field] !== undefined ? changes[field] : current[field];
  const properties = await checkedContactProperties(tx, organizationId, changes.properties ?? {});
  await tx.query(
    withEvent(
      `UPDATE contacts SET email = $3, first_name = $4, last_name = $5, unsubscribed = $6,
              properties = (properties || $7::jsonb) - $8::text[], updated_at = now()
        WHERE id = $2 AND organization_id = $1 ${RETURNED}`,
      contactEvent('contact.updated'),
    ),
    [
      organizationId,
      current.id,
      email ?? current.email,
      pick('first_name'),
      pick('last_name'),
      pick('unsubscribed'),
      JSON.stringify(properties.set),
      properties.cleared,
    ],
  );
  await setChoices(tx, organizationId, current.id, choices);
  return { id: current.id };
}

/** Every topic of the organization with the contact's effective subscription to it, oldest topic first. */
export async function contactTopics(
  db: Queryable,
  organizationId: string,
  idOrEmail: string,
): Promise<{ object: 'list'; has_more: false; data: ContactTopicView[] }> {
  const contact = await getContact(db, organizationId, idOrEmail);
  return { object: 'list', has_more: false, data: await topicsOfContact(db, organizationId, contact.id) };
}

/** The contact's choices go with it (ON DELETE CASCADE). */
export async function deleteContact(db: Queryable, organizationId: string, idOrEmail: string): Promise<{ id: string }> {
  const key = contactKey(idOrEmail);
  if (!key) throw notFound('Contact');
  const { rows } = await db.query<{ id: string }>(
    withEvent(
      `DELETE FROM contacts WHERE organization_id = $1 AND ${key.id ? 'id = $2' : 'lower(email) = $2'}
       ${RETURNED}`,
      contactEvent('contact.deleted'),
    ),
    [organizationId, key.id ?? key.email],
  );
  if (!rows[0]) throw notFound('Contact');
  return { id: rows[0].id };
}

/** The address as stored: bare, domain in ASCII. A "Name <address>" form is refused. */
function contactAddress(input: string): string {
  const mailbox = parseMailbox(input, 'email');
  if (mailbox.name !== undefined) {
    throw new ServiceError(
      'validation_error',
      'Invalid address in email: give the bare address, without a name',
      'email',
    );
  }
  return mailbox.address;
}

/** Runs a write, turning the database's refusals into the caller's errors. */
async function writing<T>(email: string | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (isUniqueViolation(error)) {
      // Only a new address can clash, so `email` is set whenever this happens.
      throw new ServiceError('conflict', `A contact with email ${email} exists already`, 'email');
    }
    if (isForeignKeyViolation(error)) throw unknownTopics([]);
    throw error;
  }
}

type ContactKey = { id: string; email?: undefined } | { id?: undefined; email: string };

/** What a path parameter names: an id, an address, or (malformed) nothing. */
function contactKey(idOrEmail: string): ContactKey | undefined {
  if (!idOrEmail.includes('@')) return isUuid(idOrEmail) ? { id: idOrEmail } : undefined;
  try {
    return { email: addressKey(contactAddress(idOrEmail)) };
  } catch {
    return undefined;
  }
}

async function findContactRow(
  db: Queryable,
  organizationId: string,
  key: ContactKey,
  { lock = false } = {},
): Promise<ContactRow | undefined> {
  if (key.id !== undefined && !isUuid(key.id)) return undefined;
  const { rows } = await db.query<ContactRow>(
    `${SELECT_CONTACT}
      WHERE c.organization_id = $1 AND ${key.id !== undefined ? 'c.id = $2' : 'lower(c.email) = $2'}
      ${lock ? 'FOR UPDATE OF c' : ''}`,
    [organizationId, key.id ?? key.email],
  );
  return rows[0];
}

function toView(contact: ContactRow): ContactView {
  return {
    object: 'contact',
    id: contact.id,
    email: contact.email,
    first_name: contact.first_name,
    last_name: contact.last_name,
    unsubscribed: contact.unsubscribed,
    topics: contact.topics,
    properties: contact.properties,
    created_at: new Date(contact.created_at).toISOString(),
    updated_at: new Date(contact.updated_at).toISOString(),
  };
}
