import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { cancelJobs, rescheduleJobs } from '../queue/jobs.ts';
import { DELIVERY_QUEUE } from './delivery-job.ts';
import type { EmailStatus } from './statuses.ts';
import { isUuid } from '../platform/ids.ts';
import { recordTimelineEntry } from './timeline.ts';

// Cancel and reschedule act only on a message not yet handed to a transport (queued or scheduled). Each
// takes the message's row lock with a conditional UPDATE, the lock the delivery worker takes to move it
// to `sending`: whichever commits first wins, so a cancel either prevents the send or is refused.

const NOT_YET_SENT = `status IN ('queued', 'scheduled')`;

export async function cancelEmail(db: Database, organizationId: string, id: string): Promise<void> {
  if (!isUuid(id)) throw notFound('Email');
  await db.transaction(async (tx) => {
    const { rowCount } = await tx.query(
      `UPDATE emails SET status = 'canceled' WHERE id = $1 AND organization_id = $2 AND ${NOT_YET_SENT}`,
      [id, organizationId],
    );
    if (rowCount === 0) throw await whyNot(tx, organizationId, id, 'cancelled');
    await cancelJobs(tx, DELIVERY_QUEUE, 'email_id', id);
    await recordTimelineEntry(tx, { emailId: id, organizationId, kind: 'canceled' });
  });
}

export async function rescheduleEmail(db: Database, organizationId: string, id: string, at: Date): Promise<void> {
  if (!isUuid(id)) throw notFound('Email');
  await db.transaction(async (tx) => {
    // The time it had (null for a message queued to go at once) is read under the row lock the update
    // takes (FOR UPDATE waits for a concurrent change and reads what it left).
    const { rows } = await tx.query<{ previous: Date | null }>(
      `UPDATE emails e SET scheduled_at = $3, status = 'scheduled'
         FROM (SELECT id, scheduled_at FROM emails WHERE id = $1 AND organization_id = $2 FOR UPDATE) previous
        WHERE e.id = previous.id AND e.${NOT_YET_SENT}
        RETURNING previous.scheduled_at AS previous`,
      [id, organizationId, at],
    );
    if (rows.length === 0) throw await whyNot(tx, organizationId, id, 'rescheduled');
    await rescheduleJobs(tx, DELIVERY_QUEUE, 'email_id', id, at);
    // Its email.rescheduled webhook event carries the message's fields and the same two times.
    await recordTimelineEntry(tx, {
      emailId: id,
      organizationId,
      kind: 'rescheduled',
      data: { scheduled_at: at.toISOString(), previous_scheduled_at: rows[0]!.previous?.toISOString() ?? null },
    });
  });
}

/** 404 for a message that is not the organization's, 400 invalid_state for one already on its way. */
async function whyNot(tx: Queryable, organizationId: string, id: string, verb: string): Promise<ServiceError> {
  const { rows } = await tx.query<{ status: EmailStatus }>(
    'SELECT status FROM emails WHERE id = $1 AND organization_id = $2',
    [id, organizationId],
  );
  if (!rows[0]) return notFound('Email');
  const state = rows[0].status === 'canceled' ? 'has been cancelled' : 'has already been sent';
  return new ServiceError('invalid_state', `This email ${state}; it can no longer be ${verb}`);
}
