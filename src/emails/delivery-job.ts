import type { Queryable } from '../platform/db/database.ts';
import { enqueueJobs } from '../queue/jobs.ts';

// Each accepted message has one 'deliver-email' job naming it, due at its scheduled time (or now);
// cancel removes it and reschedule moves it (lifecycle.ts). The delivery worker handles it.

export const DELIVERY_QUEUE = 'deliver-email';

/** Queues the deliveries of many accepted messages in one statement, inside the transaction that stores them. */
export async function queueDeliveries(
  tx: Queryable,
  messages: Array<{ emailId: string; scheduledAt: Date | undefined }>,
): Promise<void> {
  await enqueueJobs(
    tx,
    messages.map((m) => ({ queue: DELIVERY_QUEUE, payload: { email_id: m.emailId }, runAt: m.scheduledAt })),
  );
}
