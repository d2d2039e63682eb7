import type { Queryable } from '../platform/db/database.ts';
import { enqueueJob } from '../queue/jobs.ts';

// Each accepted message has one 'deliver-email' job naming it, due at its scheduled time (or now);
// cancel removes it and reschedule moves it (lifecycle.ts). The delivery worker handles it.

export const DELIVERY_QUEUE = 'deliver-email';

/** Queues the delivery of an accepted message, inside the transaction that stores it. */
export async function queueDelivery(tx: Queryable, emailId: string, scheduledAt: Date | undefined): Promise<void> {
  await enqueueJob(tx, { queue: DELIVERY_QUEUE, payload: { email_id: emailId }, runAt: scheduledAt });
}
