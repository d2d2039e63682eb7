import { enqueueJobsFromRows } from '../queue/jobs.ts';

// Every webhook delivery (a fan-out's or a replay's) is sent by one 'deliver-webhook' job naming it,
// grouped by its endpoint so that one slow endpoint holds at most the worker's group limit of jobs.

export const WEBHOOK_QUEUE = 'deliver-webhook';

/**
 * SQL for a data-modifying CTE body that queues one delivery job per row of the earlier CTE `from`,
 * whose columns are a webhook_deliveries row's `id` and `endpoint_id`.
 */
export function queueDeliveriesFrom(from: string): string {
  return enqueueJobsFromRows({
    from,
    queue: WEBHOOK_QUEUE,
    payload: `jsonb_build_object('delivery_id', ${from}.id)`,
    groupKey: `${from}.endpoint_id::text`,
  });
}
