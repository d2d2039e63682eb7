import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { parseMailbox } from '../platform/addresses.ts';
import { cancelJobs, cancelJobsNaming, enqueueJob, holdSharedJobs, releaseSharedJobs } from '../queue/jobs.ts';
import { findSendingDomain } from '../domains/domains.ts';
import { broadcastShareKey, DELIVERY_QUEUE } from '../emails/delivery-job.ts';
import { TIMELINE_ENTRY_COLUMNS, timelineEntriesFrom, timelineEntryRow } from '../emails/timeline.ts';
import type { BroadcastStatus } from './broadcast-status.ts';

// Sending a broadcast and what may happen to it on the way: send (now or at a time), pause, resume,
// cancel. Each is one transaction that first locks the broadcast's row (FOR UPDATE), so two of them
// racing each other, or a fan-out batch (which holds the row FOR SHARE while it writes copies), happen
// one after the other and each sees what the other did.

export const FAN_OUT_QUEUE = 'broadcast-fan-out';

interface LockedBroadcast {
  id: string;
  status: BroadcastStatus;
  from: string | null;
  subject: string | null;
  segment_id: string | null;
  topic_id: string | null;
  html: string | null;
  text: string | null;
}

/** Runs `fn` in a transaction: a new one on a database handle, else the caller's (a transaction given). */
function inTransaction<T>(db: Queryable, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  const database = db as Partial<Database>;
  return typeof database.transaction === 'function' ? database.transaction(fn) : fn(db);
}

/** The organization's broadcast, its row locked to the end of the transaction; 404 otherwise. */
async function lockBroadcast(tx: Queryable, organizationId: string, id: string): Promise<LockedBroadcast> {
  if (!isUuid(id)) throw notFound('Broadcast');
  const { rows } = await tx.query<LockedBroadcast>(
    `SELECT id, status, "from", subject, segment_id, topic_id, html, text FROM broadcasts
      WHERE id = $1 AND organization_id = $2 FOR UPDATE`,
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Broadcast');
  return rows[0];
}

function wrongState(status: BroadcastStatus, action: string, allowed: string): ServiceError {
  return new ServiceError('invalid_state', `This broadcast is ${status}; only ${allowed} broadcast can be ${action}`);
}

/**
 * POST /broadcasts/:id/send: from draft, or from scheduled (sending again moves the time). The broadcast
 * must be complete (from, subject, segment, html or text) and its from domain verified. With a future
 * `scheduledAt` it is `scheduled` and its fan-out job waits for that time; else it is `queued` and the job
 * is due now. The audience is taken when the job runs (snapshot.ts), not here.
 */
export async function sendBroadcast(
  db: Queryable,
  organizationId: string,
  id: string,
  scheduledAt: Date | undefined,
): Promise<{ id: string }> {
  return inTransaction(db, async (tx) => {
    const broadcast = await lockBroadcast(tx, organizationId, id);
    if (broadcast.status !== 'draft' && broadcast.status !== 'scheduled') {
      throw wrongState(broadcast.status, 'sent', 'a draft or a scheduled');
    }
    const missing = (field: string, what: string) =>
      new ServiceError('validation_error', `The broadcast cannot be sent without ${what}: set ${field} first`, field);
    if (!broadcast.from) throw missing('from', 'a from address');
    if (!broadcast.subject) throw missing('subject', 'a subject');
    if (!broadcast.segment_id) throw missing('segment_id', 'a segment');
    if (broadcast.html === null && broadcast.text === null) throw missing('html', 'content (html or text)');
    if (broadcast.topic_id !== null) {
      const topic = await tx.query('SELECT 1 FROM topics WHERE id = $1 AND organization_id = $2', [
        broadcast.topic_id,
        organizationId,
      ]);
      if (topic.rowCount === 0) {
        throw new ServiceError('validation_error', 'topic_id: the topic of this broadcast was deleted', 'topic_id');
      }
    }
    const from = parseMailbox(broadcast.from, 'from');
    if (!(await findSendingDomain(tx, organizationId, from.domain))) {
      throw new ServiceError(
        'invalid_from_address',
        `The domain ${from.domain} is not a verified domain of this organization`,
        'from',
      );
    }

    const later = scheduledAt !== undefined && scheduledAt.getTime() > Date.now();
    // Sending a scheduled broadcast again replaces its job: one fan-out job per broadcast.
    if (broadcast.status === 'scheduled') await cancelJobs(tx, FAN_OUT_QUEUE, 'broadcast_id', id);
    await tx.query(
      `UPDATE broadcasts SET status = $3, scheduled_at = $4, updated_at = now() WHERE id = $1 AND organization_id = $2`,
      [id, organizationId, later ? 'scheduled' : 'queued', later ? scheduledAt : null],
    );
    await enqueueJob(tx, {
      queue: FAN_OUT_QUEUE,
      payload: { broadcast_id: id },
      shareKey: organizationId,
      runAt: later ? scheduledAt : undefined,
    });
    return { id };
  });
}

/**
 * POST /broadcasts/:id/cancel: a scheduled broadcast returns to draft (its fan-out job removed); a queued
 * or paused one is canceled: recipients without a copy yet get none, and copies not yet handed to a
 * transport are canceled as POST /emails/:id/cancel cancels an email (status canceled, a `canceled`
 * timeline entry with its webhook event, the delivery job removed). Copies on their way are not stopped.
 */
export async function cancelBroadcast(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  return inTransaction(db, async (tx) => {
    const broadcast = await lockBroadcast(tx, organizationId, id);
    if (broadcast.status === 'scheduled') {
      await tx.query(`UPDATE broadcasts SET status = 'draft', scheduled_at = NULL, updated_at = now() WHERE id = $1`, [
        id,
      ]);
      await cancelJobs(tx, FAN_OUT_QUEUE, 'broadcast_id', id);
      return { id };
    }
    if (broadcast.status !== 'queued' && broadcast.status !== 'paused') {
      throw wrongState(broadcast.status, 'canceled', 'a scheduled, queued or paused');
    }
    await tx.query(`UPDATE broadcasts SET status = 'canceled', updated_at = now() WHERE id = $1`, [id]);
    await tx.query(
      `UPDATE broadcast_recipients SET status = 'canceled' WHERE broadcast_id = $1 AND status = 'pending'`,
      [id],
    );
    await cancelJobs(tx, FAN_OUT_QUEUE, 'broadcast_id', id);
    const canceled = await cancelUnsentCopies(tx, organizationId, id);
    await cancelJobsNaming(tx, DELIVERY_QUEUE, 'email_id', canceled);
    // What a pause held and is not canceled (a copy on its way, retrying a deferred recipient) goes on.
    await releaseSharedJobs(tx, DELIVERY_QUEUE, broadcastShareKey(id));
    return { id };
  });
}

/**
 * Cancels the broadcast's copies not yet taken by a worker (queued or scheduled, the statuses
 * emails/lifecycle.ts cancels), each with its `canceled` timeline entry and webhook event, in one
 * statement. The row lock of each copy is the one the delivery worker takes to move it to sending:
 * whichever commits first wins. Returns the canceled copies' ids.
 */
async function cancelUnsentCopies(tx: Queryable, organizationId: string, broadcastId: string): Promise<string[]> {
  // Every entry is the same but for its message: the constant parts come from one row made here.
  const entry = timelineEntryRow({ emailId: broadcastId, organizationId, kind: 'canceled' });
  const { rows } = await tx.query<{ id: string }>(
    `WITH canceled AS (
       UPDATE emails SET status = 'canceled'
        WHERE broadcast_id = $1 AND organization_id = $2 AND status IN ('queued', 'scheduled')
       RETURNING id
     ),
     entries AS (
       SELECT e.*, row_number() OVER (ORDER BY e.email_id) AS n
         FROM (SELECT gen_random_uuid() AS event_id, canceled.id AS email_id, $2::uuid AS organization_id,
                      t.kind, t.recipient, t.data, t.event_type, t.webhook_data
                 FROM canceled, jsonb_to_record($3::jsonb) AS t(${TIMELINE_ENTRY_COLUMNS})) e
     ),
     ${timelineEntriesFrom('entries', { from: 'emails' })}
     SELECT id FROM canceled`,
    [broadcastId, organizationId, JSON.stringify(entry)],
  );
  return rows.map((row) => row.id);
}

/**
 * POST /broadcasts/:id/pause (Mailroom's own, and the automatic checks): a queued broadcast stops. The
 * fan-out stops after its batch in flight, and the delivery jobs of copies not yet delivered (the
 * broadcast's share key) are held until it is resumed; a copy being handed to a transport at this moment
 * finishes.
 */
export async function pauseBroadcast(
  db: Queryable,
  organizationId: string,
  id: string,
  reason: string,
): Promise<{ id: string }> {
  return inTransaction(db, async (tx) => {
    const broadcast = await lockBroadcast(tx, organizationId, id);
    if (broadcast.status !== 'queued') throw wrongState(broadcast.status, 'paused', 'a queued');
    await tx.query(`UPDATE broadcasts SET status = 'paused', pause_reason = $2, updated_at = now() WHERE id = $1`, [
      id,
      reason,
    ]);
    await holdSharedJobs(tx, DELIVERY_QUEUE, broadcastShareKey(id));
    return { id };
  });
}

/** POST /broadcasts/:id/resume: a paused broadcast goes on where it stopped (its held copies due now). */
export async function resumeBroadcast(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  return inTransaction(db, async (tx) => {
    const broadcast = await lockBroadcast(tx, organizationId, id);
    if (broadcast.status !== 'paused') throw wrongState(broadcast.status, 'resumed', 'a paused');
    await tx.query(`UPDATE broadcasts SET status = 'queued', pause_reason = NULL, updated_at = now() WHERE id = $1`, [
      id,
    ]);
    await releaseSharedJobs(tx, DELIVERY_QUEUE, broadcastShareKey(id));
    // One fan-out job: any left from before the pause is replaced by one due now.
    await cancelJobs(tx, FAN_OUT_QUEUE, 'broadcast_id', id);
    await enqueueJob(tx, { queue: FAN_OUT_QUEUE, payload: { broadcast_id: id }, shareKey: organizationId });
    return { id };
  });
}
