import type { Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import { withEvent } from '../webhooks/fan-out.ts';
import { isoMillisSql } from '../webhooks/event-payloads.ts';
import type { EventType } from '../webhooks/event-types.ts';

// A topic is a kind of message an organization sends to its contacts (a newsletter, product news).
// Its default_subscription decides who it reaches when a contact has made no choice of their own
// (subscriptions.ts has the rule). Its visibility decides who sees it on the preference page an
// unsubscribe link opens (unsubscribe-routes.ts): a public topic every contact, a private one only the
// contacts subscribed to it (Resend's meaning; private is the default). Deleting a topic deletes every
// contact's choice for it.

export type Subscription = 'opt_in' | 'opt_out';
export type Visibility = 'public' | 'private';

/** The fields of POST (name and default_subscription required) and PATCH (any non-empty subset). */
export interface TopicInput {
  name?: string;
  description?: string | null;
  default_subscription?: Subscription;
  visibility?: Visibility;
}

export interface Topic {
  id: string;
  organization_id: string;
  name: string;
  description: string | null;
  default_subscription: Subscription;
  visibility: Visibility;
  created_at: Date;
  updated_at: Date;
}

/** The API shape. A topic without a description has no `description` field (Resend's SDK types it `description?: string`). */
export interface TopicView {
  object: 'topic';
  id: string;
  name: string;
  description?: string;
  default_subscription: Subscription;
  visibility: Visibility;
  created_at: string;
  updated_at: string;
}

const COLUMNS = 'id, organization_id, name, description, default_subscription, visibility, created_at, updated_at';

/** A topic.* webhook event for the changed row. */
const topicEvent = (type: EventType) => ({
  org: '$1::uuid',
  type: `'${type}'::text`,
  // The fields of the SDK's topic events (TopicEventData).
  data: `jsonb_build_object('id', changed.id, 'name', changed.name, 'description', changed.description,
           'default_subscription', changed.default_subscription, 'deleted', ${type === 'topic.deleted'},
           'created_at', ${isoMillisSql('changed.created_at')}, 'updated_at', ${isoMillisSql('changed.updated_at')})`,
});
const RETURNED = 'RETURNING id, name, description, default_subscription, created_at, updated_at';

export async function createTopic(
  db: Queryable,
  organizationId: string,
  input: TopicInput & { name: string; default_subscription: Subscription },
): Promise<{ id: string }> {
  const { rows } = await db.query<{ id: string }>(
    withEvent(
      `INSERT INTO topics (organization_id, name, description, default_subscription, visibility)
       VALUES ($1, $2, $3, $4, $5) ${RETURNED}`,
      topicEvent('topic.created'),
    ),
    [organizationId, input.name, input.description ?? null, input.default_subscription, input.visibility ?? 'private'],
  );
  return { id: rows[0]!.id };
}

/** Oldest first, a page at a time (platform/db/keyset-page.ts). */
export async function listTopics(db: Queryable, organizationId: string, page: PageRequest): Promise<Page<TopicView>> {
  const listed = await keysetPage<Topic>(
    db,
    { table: 'topics', columns: COLUMNS, organizationId, newestFirst: false },
    page,
  );
  return { ...listed, data: listed.data.map(toView) };
}

/** One of the organization's topics, or undefined (also for a malformed id). */
export async function findTopic(db: Queryable, organizationId: string, id: string): Promise<Topic | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await db.query<Topic>(`SELECT ${COLUMNS} FROM topics WHERE id = $2 AND organization_id = $1`, [
    organizationId,
    id,
  ]);
  return rows[0];
}

export async function getTopic(db: Queryable, organizationId: string, id: string): Promise<TopicView> {
  const topic = await findTopic(db, organizationId, id);
  if (!topic) throw notFound('Topic');
  return toView(topic);
}

/** Applies the given fields; the others keep their values. One statement, so no lock is needed. */
export async function updateTopic(
  db: Queryable,
  organizationId: string,
  id: string,
  changes: TopicInput,
): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Topic');
  const { rows } = await db.query<{ id: string }>(
    withEvent(
      `UPDATE topics
          SET name = coalesce($3, name),
              description = CASE WHEN $4::boolean THEN $5::text ELSE description END,
              default_subscription = coalesce($6, default_subscription),
              visibility = coalesce($7, visibility),
              updated_at = now()
        WHERE id = $2 AND organization_id = $1 ${RETURNED}`,
      topicEvent('topic.updated'),
    ),
    [
      organizationId,
      id,
      changes.name ?? null,
      changes.description !== undefined,
      changes.description ?? null,
      changes.default_subscription ?? null,
      changes.visibility ?? null,
    ],
  );
  if (!rows[0]) throw notFound('Topic');
  return { id: rows[0].id };
}

/** Contacts' choices for the topic go with it (ON DELETE CASCADE). */
export async function deleteTopic(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Topic');
  const { rows } = await db.query<{ id: string }>(
    withEvent(`DELETE FROM topics WHERE id = $2 AND organization_id = $1 ${RETURNED}`, topicEvent('topic.deleted')),
    [organizationId, id],
  );
  if (!rows[0]) throw notFound('Topic');
  return { id: rows[0].id };
}

function toView(topic: Topic): TopicView {
  return {
    object: 'topic',
    id: topic.id,
    name: topic.name,
    ...(topic.description === null ? {} : { description: topic.description }),
    default_subscription: topic.default_subscription,
    visibility: topic.visibility,
    created_at: new Date(topic.created_at).toISOString(),
    updated_at: new Date(topic.updated_at).toISOString(),
  };
}
