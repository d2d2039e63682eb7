import { enqueueJobsFromRows } from '../queue/jobs.ts';

// Each accepted message has one 'deliver-email' job naming it, due at its scheduled time (or now);
// cancel removes it and reschedule moves it (lifecycle.ts). The delivery worker handles it. Its share
// key is the organization, so that organizations take turns at the workers.

export const DELIVERY_QUEUE = 'deliver-email';

/**
 * SQL for a data-modifying CTE body that queues the delivery of each message of the earlier CTE `from`
 * (columns `id`, the message, `organization_id`, and `scheduled_at`, NULL for now), in the statement that
 * stores them.
 */
export function deliveryJobsFrom(from: string): string {
  return enqueueJobsFromRows({
    from,
    queue: DELIVERY_QUEUE,
    payload: `jsonb_build_object('email_id', ${from}.id)`,
    runAt: `coalesce(${from}.scheduled_at, now())`,
    shareKey: `${from}.organization_id::text`,
  });
}
