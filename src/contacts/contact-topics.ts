import type { Database, Queryable } from '../platform/db/database.ts';
import { isForeignKeyViolation } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { addressKey } from '../platform/address-key.ts';
import { emitEvent, withEvent } from '../webhooks/fan-out.ts';
import { contactEventDataSql, isoMillisSql } from '../webhooks/event-payloads.ts';
import type { UnsubscribeTarget } from './unsubscribe-link.ts';
import type { Subscription } from './topics.ts';

// A contact's explicit choice per topic (contact_topics): opt_in or opt_out, where they made one; a
// topic they made none for reaches them by its default_subscription. The choices are written inside the
// transaction that writes the contact (contacts.ts), or by a one-click unsubscribe.

export interface TopicChoice {
  id: string;
  subscription: Subscription;
}

/** One topic as a contact sees it (Resend's GET /contacts/:id/topics): their choice, else the default. */
export interface ContactTopicView {
  id: string;
  name: string;
  description: string | null;
  subscription: Subscription;
}

/** Every topic of the organization with the contact's effective subscription to it, oldest topic first. */
export async function topicsOfContact(
  db: Queryable,
  organizationId: string,
  contactId: string,
): Promise<ContactTopicView[]> {
  const { rows } = await db.query<ContactTopicView>(
    `SELECT t.id, t.name, t.description, coalesce(ct.subscription, t.default_subscription) AS subscription
       FROM topics t LEFT JOIN contact_topics ct ON ct.topic_id = t.id AND ct.contact_id = $2
      WHERE t.organization_id = $1
      ORDER BY t.created_at, t.id`,
    [organizationId, contactId],
  );
  return rows;
}

/**
 * The one-click unsubscribe of a topic send: the contact with the link's address opts out of the
 * link's topic, and contact.unsubscribed is emitted, in one statement. Only a real change emits (a
 * second click, or a choice already opt_out, writes and emits nothing). An address that is no longer
 * a contact, or a topic since deleted, changes nothing: neither can be sent to under that topic.
 */
export async function unsubscribeFromTopic(db: Queryable, target: UnsubscribeTarget): Promise<{ changed: boolean }> {
  if (!isUuid(target.organizationId) || target.topicId === null || !isUuid(target.topicId)) return { changed: false };
  try {
    const { rows } = await db.query(
      withEvent(
        `INSERT INTO contact_topics (contact_id, topic_id, subscription)
         SELECT c.id, t.id, 'opt_out'
           FROM contacts c JOIN topics t ON t.id = $2 AND t.organization_id = c.organization_id
          WHERE c.organization_id = $1 AND lower(c.email) = $3
         ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscription = 'opt_out', updated_at = now()
          WHERE contact_topics.subscription <> 'opt_out'
         RETURNING contact_id, topic_id`,
        {
          org: '$1::uuid',
          type: `'contact.unsubscribed'::text`,
          data: `(SELECT jsonb_build_object('id', c.id, 'email', c.email, 'topic_id', changed.topic_id,
                                            'email_id', $4::text, 'created_at', ${isoMillisSql('c.created_at')})
                    FROM contacts c WHERE c.id = changed.contact_id)`,
        },
      ),
      [target.organizationId, target.topicId, addressKey(target.address), target.emailId],
    );
    return { changed: rows.length > 0 };
  } catch (error) {
    // The contact or topic was deleted between this statement's read and its write: nothing to undo.
    if (isForeignKeyViolation(error)) return { changed: false };
    throw error;
  }
}

/**
 * The one-click unsubscribe of a broadcast without a topic: the contact with the link's address leaves
 * every broadcast (contacts.unsubscribed = true, which also keeps every topic send from reaching them:
 * subscriptions.ts). In one transaction: the change with its contact.updated event (the contact as
 * PATCH /contacts shows it, now unsubscribed), and contact.unsubscribed as a topic's link emits it, with
 * topic_id null. Only a real change emits (a second click writes and emits nothing); an address that is
 * no longer a contact changes nothing.
 */
export async function unsubscribeFromAll(db: Database, target: UnsubscribeTarget): Promise<{ changed: boolean }> {
  if (!isUuid(target.organizationId)) return { changed: false };
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ id: string; email: string; created_at: Date }>(
      withEvent(
        `UPDATE contacts SET unsubscribed = true, updated_at = now()
          WHERE organization_id = $1 AND lower(email) = $2 AND NOT unsubscribed
         RETURNING id, email, first_name, last_name, unsubscribed, created_at, updated_at`,
        { org: '$1::uuid', type: `'contact.updated'::text`, data: contactEventDataSql('changed') },
      ),
      [target.organizationId, addressKey(target.address)],
    );
    const contact = rows[0];
    if (!contact) return { changed: false };
    await emitEvent(tx, target.organizationId, 'contact.unsubscribed', {
      id: contact.id,
      email: contact.email,
      topic_id: null,
      email_id: target.emailId,
      created_at: new Date(contact.created_at).toISOString(),
    });
    return { changed: true };
  });
}

/** What the preference page of an unsubscribe link shows: the contact's topics, and whether they left everything. */
export interface PreferencePage {
  /** The contact unsubscribed from all of the organization's messages (contacts.unsubscribed). */
  unsubscribedFromAll: boolean;
  topics: ContactTopicView[];
}

/**
 * The topics the preference page lists to the contact with the link's address (Resend's visibility): the
 * topic of the message the link came in, every public topic, and the private topics the contact is
 * subscribed to (their choice, else the default), each with the contact's effective subscription; the
 * message's topic first, then oldest first. Null when the address is not a contact of the organization.
 */
export async function preferencePage(
  db: Queryable,
  target: Pick<UnsubscribeTarget, 'organizationId' | 'address' | 'topicId'>,
): Promise<PreferencePage | null> {
  if (!isUuid(target.organizationId)) return null;
  const { rows: contacts } = await db.query<{ id: string; unsubscribed: boolean }>(
    'SELECT id, unsubscribed FROM contacts WHERE organization_id = $1 AND lower(email) = $2',
    [target.organizationId, addressKey(target.address)],
  );
  const contact = contacts[0];
  if (!contact) return null;
  const { rows: topics } = await db.query<ContactTopicView>(
    `SELECT t.id, t.name, t.description, coalesce(ct.subscription, t.default_subscription) AS subscription
       FROM topics t LEFT JOIN contact_topics ct ON ct.topic_id = t.id AND ct.contact_id = $2
      WHERE t.organization_id = $1
        AND (t.id = $3 OR t.visibility = 'public' OR coalesce(ct.subscription, t.default_subscription) = 'opt_in')
      ORDER BY t.id = $3 DESC, t.created_at, t.id`,
    [target.organizationId, contact.id, target.topicId !== null && isUuid(target.topicId) ? target.topicId : null],
  );
  return { unsubscribedFromAll: contact.unsubscribed, topics };
}

/**
 * A choice made on the preference page, for a topic the page lists to the contact (preferencePage);
 * false when it lists no such topic. Opting out is the one-click unsubscribe's write, with its
 * contact.unsubscribed event; opting in writes the choice alone, as PATCH /contacts/:id/topics does.
 */
export async function chooseOnPreferencePage(
  db: Queryable,
  target: UnsubscribeTarget,
  topicId: string,
  subscription: Subscription,
): Promise<boolean> {
  const page = await preferencePage(db, target);
  const topic = page?.topics.find((listed) => listed.id === topicId.toLowerCase());
  if (!topic) return false;
  if (subscription === 'opt_out') {
    await unsubscribeFromTopic(db, { ...target, topicId: topic.id });
    return true;
  }
  try {
    await db.query(
      `INSERT INTO contact_topics (contact_id, topic_id, subscription)
       SELECT c.id, $3, 'opt_in' FROM contacts c WHERE c.organization_id = $1 AND lower(c.email) = $2
       ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscription = 'opt_in', updated_at = now()
        WHERE contact_topics.subscription <> 'opt_in'`,
      [target.organizationId, addressKey(target.address), topic.id],
    );
  } catch (error) {
    // The contact or topic was deleted meanwhile: nothing to subscribe to.
    if (!isForeignKeyViolation(error)) throw error;
  }
  return true;
}

/** Ids lower-cased; a malformed or repeated id is the caller's 400 before anything is written. */
export function checkedChoices(choices: TopicChoice[]): TopicChoice[] {
  const seen = new Set<string>();
  return choices.map(({ id, subscription }) => {
    if (!isUuid(id))
      throw new ServiceError('validation_error', `topics: ${JSON.stringify(id)} is not a topic id`, 'topics');
    const topicId = id.toLowerCase();
    if (seen.has(topicId)) throw new ServiceError('validation_error', `topics: ${topicId} is listed twice`, 'topics');
    seen.add(topicId);
    return { id: topicId, subscription };
  });
}

/**
 * Writes the choices, each only for a topic of the organization; any other id is a 400 (and, thrown
 * inside the caller's transaction, undoes the whole request).
 */
export async function setChoices(tx: Queryable, organizationId: string, contactId: string, choices: TopicChoice[]) {
  if (choices.length === 0) return;
  const { rows } = await tx.query<{ topic_id: string }>(
    `INSERT INTO contact_topics (contact_id, topic_id, subscription)
     SELECT $2, t.id, choice.subscription
       FROM unnest($3::uuid[], $4::text[]) AS choice (topic_id, subscription)
       JOIN topics t ON t.id = choice.topic_id AND t.organization_id = $1
     ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscription = excluded.subscription,
        updated_at = CASE WHEN contact_topics.subscription = excluded.subscription
                          THEN contact_topics.updated_at ELSE now() END
     RETURNING topic_id`,
    [organizationId, contactId, choices.map((choice) => choice.id), choices.map((choice) => choice.subscription)],
  );
  if (rows.length < choices.length) {
    const written = new Set(rows.map((row) => row.topic_id));
    throw unknownTopics(choices.filter((choice) => !written.has(choice.id)).map((choice) => choice.id));
  }
}

export const unknownTopics = (ids: string[]) =>
  new ServiceError(
    'validation_error',
    ids.length === 0 ? 'topics: a topic was deleted meanwhile' : `topics: no such topic: ${ids.join(', ')}`,
    'topics',
  );
