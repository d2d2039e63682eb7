import type { Database, Queryable } from '../platform/db/database.ts';
import type { SegmentFilter } from '../contacts/segment-filter.ts';
import { segmentAudienceCondition } from '../contacts/segment-filter-sql.ts';
import type { BroadcastStatus } from './broadcast-status.ts';

// The audience of a broadcast is taken once, when its send is due (not when it was asked for: a contact
// who unsubscribes before a scheduled send is left out). One statement writes one broadcast_recipients
// row per contact of the segment, `pending` or `skipped` with its reason, counts them into the
// broadcast's row, and moves the broadcast to `queued` with its sent_at. The broadcast's row is locked
// first, so two runs of the fan-out job (a lease that ran out, two processes) take it once: the second
// finds sent_at set and takes nothing. The rows' unique key (broadcast, contact) with ON CONFLICT DO
// NOTHING guards the same thing at the table.

export interface SnapshotCounts {
  /** Every contact of the audience, those left out included. */
  audience: number;
  /** Contacts that get a copy. */
  pending: number;
  skipped_unsubscribed: number;
  skipped_topic: number;
  skipped_suppressed: number;
}

export type SnapshotOutcome =
  | { taken: true; counts: SnapshotCounts }
  /** Taken before (sent_at set), or the broadcast is in no status a snapshot is taken in: nothing done. */
  | { taken: false; status: BroadcastStatus | undefined }
  /** The audience could not be taken: the broadcast is now `failed` with this reason. */
  | { taken: false; failed: string };

/** Statuses a broadcast is snapshotted in when its fan-out job runs. */
export const SNAPSHOT_STATUSES: readonly BroadcastStatus[] = ['scheduled', 'queued'];

/**
 * Takes the broadcast's audience (see above) in one transaction. The fan-out job calls it with
 * SNAPSHOT_STATUSES; a draft may be given too (`statuses`), for timing the snapshot on its own. Returns
 * the counts, or, when the segment is gone, marks the broadcast `failed`.
 */
export async function takeSnapshot(
  db: Database,
  broadcastId: string,
  statuses: readonly BroadcastStatus[] = [...SNAPSHOT_STATUSES, 'draft'],
): Promise<SnapshotOutcome> {
  return db.transaction((tx) => takeSnapshotIn(tx, broadcastId, statuses));
}

export async function takeSnapshotIn(
  tx: Queryable,
  broadcastId: string,
  statuses: readonly BroadcastStatus[],
): Promise<SnapshotOutcome> {
  const { rows } = await tx.query<{
    organization_id: string;
    status: BroadcastStatus;
    sent_at: Date | null;
    topic_id: string | null;
    segment_id: string | null;
    filter: SegmentFilter | null;
  }>(
    `SELECT b.organization_id, b.status, b.sent_at, b.topic_id, s.id AS segment_id, s.filter
       FROM broadcasts b LEFT JOIN segments s ON s.id = b.segment_id AND s.organization_id = b.organization_id
      WHERE b.id = $1 FOR UPDATE OF b`,
    [broadcastId],
  );
  const broadcast = rows[0];
  if (!broadcast || broadcast.sent_at !== null || !statuses.includes(broadcast.status)) {
    return { taken: false, status: broadcast?.status };
  }
  if (broadcast.segment_id === null) {
    // The segment was deleted (segment_id set NULL) after the send was asked for.
    const reason = 'The segment of this broadcast was deleted before it was sent';
    await tx.query(`UPDATE broadcasts SET status = 'failed', failure_reason = $2, updated_at = now() WHERE id = $1`, [
      broadcastId,
      reason,
    ]);
    return { taken: false, failed: reason };
  }

  if (broadcast.topic_id !== null) {
    // The topic was deleted after the send was asked for (the broadcast keeps its id): sending to
    // everyone instead of the topic's subscribers would be wrong, and to no one pointless.
    const { rowCount } = await tx.query('SELECT 1 FROM topics WHERE id = $1 AND organization_id = $2', [
      broadcast.topic_id,
      broadcast.organization_id,
    ]);
    if (rowCount === 0) {
      const reason = 'The topic of this broadcast was deleted before it was sent';
      await tx.query(`UPDATE broadcasts SET status = 'failed', failure_reason = $2, updated_at = now() WHERE id = $1`, [
        broadcastId,
        reason,
      ]);
      return { taken: false, failed: reason };
    }
  }

  const params: unknown[] = [broadcastId, broadcast.organization_id, broadcast.topic_id];
  const inSegment = segmentAudienceCondition({ id: broadcast.segment_id, filter: broadcast.filter }, params);
  // The first reason that applies, in this order: unsubscribed from every broadcast, opted out of the
  // broadcast's topic (the contact's own choice, else the topic's default), on the suppression list
  // (addresses there are lower-cased bare addresses, the key lower(c.email) gives for a contact).
  const { rows: counted } = await tx.query<SnapshotCounts>(
    `WITH audience AS (
       SELECT c.id, c.email,
              CASE
                WHEN c.unsubscribed THEN 'unsubscribed'
                WHEN t.id IS NOT NULL AND coalesce(ct.subscription, t.default_subscription) <> 'opt_in' THEN 'topic'
                WHEN s.address IS NOT NULL THEN 'suppressed'
              END AS skip_reason
         FROM contacts c
         LEFT JOIN topics t ON t.id = $3::uuid AND t.organization_id = c.organization_id
         LEFT JOIN contact_topics ct ON ct.contact_id = c.id AND ct.topic_id = t.id
         LEFT JOIN suppressions s ON s.organization_id = c.organization_id AND s.address = lower(c.email)
        WHERE c.organization_id = $2 AND ${inSegment}
     ),
     written AS (
       INSERT INTO broadcast_recipients (broadcast_id, contact_id, email, status, skip_reason)
       SELECT $1, id, email, CASE WHEN skip_reason IS NULL THEN 'pending' ELSE 'skipped' END, skip_reason
         FROM audience
       ON CONFLICT (broadcast_id, contact_id) DO NOTHING
       RETURNING status, skip_reason
     ),
     counts AS (
       SELECT count(*)::int AS audience,
              count(*) FILTER (WHERE status = 'pending')::int AS pending,
              count(*) FILTER (WHERE skip_reason = 'unsubscribed')::int AS skipped_unsubscribed,
              count(*) FILTER (WHERE skip_reason = 'topic')::int AS skipped_topic,
              count(*) FILTER (WHERE skip_reason = 'suppressed')::int AS skipped_suppressed
         FROM written
     ),
     marked AS (
       UPDATE broadcasts b SET status = 'queued', sent_at = now(), updated_at = now(),
              audience_count = counts.audience, skipped_unsubscribed = counts.skipped_unsubscribed,
              skipped_topic = counts.skipped_topic, skipped_suppressed = counts.skipped_suppressed
         FROM counts WHERE b.id = $1
     )
     SELECT * FROM counts`,
    params,
  );
  return { taken: true, counts: counted[0]! };
}
