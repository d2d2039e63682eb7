import type { Queryable } from '../platform/db/database.ts';
import { addressKey } from '../platform/address-key.ts';

// Who a topic send may reach. A recipient is subscribed to a topic when they are a contact of the
// organization, have not unsubscribed from everything, and their own choice for the topic, or the
// topic's default_subscription when they made none, is opt_in (Resend's meaning: an opt_in topic reaches
// every contact until they opt out; an opt_out topic only those who opted in). An address that is not a
// contact is never subscribed: a topic is an audience the organization keeps, not a label.

/** The addressKey of each address, among `addresses`, subscribed to the topic. A deleted topic has none. */
export async function subscribedAddresses(
  db: Queryable,
  organizationId: string,
  topicId: string,
  addresses: string[],
): Promise<Set<string>> {
  if (addresses.length === 0) return new Set();
  const { rows } = await db.query<{ address: string }>(
    `SELECT lower(c.email) AS address
       FROM contacts c
       JOIN topics t ON t.id = $2 AND t.organization_id = c.organization_id
       LEFT JOIN contact_topics ct ON ct.contact_id = c.id AND ct.topic_id = t.id
      WHERE c.organization_id = $1 AND lower(c.email) = ANY ($3::text[]) AND NOT c.unsubscribed
        AND coalesce(ct.subscription, t.default_subscription) = 'opt_in'`,
    [organizationId, topicId, addresses.map(addressKey)],
  );
  return new Set(rows.map((row) => row.address));
}
