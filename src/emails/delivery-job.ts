import { enqueueJobsFromRows } from '../queue/jobs.ts';

// Each accepted message has one 'deliver-email' job naming it, due at its scheduled time (or now);
// cancel removes it and reschedule moves it (lifecycle.ts). The delivery worker handles it. Its share
// key is the organization, so that organizations take turns at the workers; a broadcast's copy has its
// broadcast's own key (`broadcast:<id>`) instead. The worker claims due jobs in turn across share keys,
// so a broadcast's backlog of 100,000 copies is one lane that takes turns with the organization's
// transactional mail (and with its other broadcasts) instead of queueing ahead of it.

export const DELIVERY_QUEUE = 'deliver-email';

/**
 * SQL for a data-modifying CTE body that queues the delivery of each message of the earlier CTE `from`
 * (columns `id`, the message, `organization_id`, `scheduled_at`, NULL for now, and `broadcast_id`, NULL
 * for a message that is not a broadcast's copy), in the statement that stores them.
 */
export function deliveryJobsFrom(from: string): string {
  return enqueueJobsFromRows({
    from,
    queue: DELIVERY_QUEUE,
    payload: `jsonb_build_object('email_id', ${from}.id)`,
    runAt: `coalesce(${from}.scheduled_at, now())`,
    shareKey: broadcastShareKeyOr(`${from}.broadcast_id`, `${from}.organization_id::text`),
  });
}

/** The share key of a broadcast's copies' delivery jobs: their own lane (see above). */
export const broadcastShareKey = (broadcastId: string): string => `broadcast:${broadcastId}`;

/** SQL: the broadcast's lane when `broadcastId` (an SQL expression) is not NULL, else `otherwise`. */
function broadcastShareKeyOr(broadcastId: string, otherwise: string): string {
  return `coalesce('broadcast:' || ${broadcastId}::text, ${otherwise})`;
}
