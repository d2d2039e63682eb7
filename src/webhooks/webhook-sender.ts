import { randomUUID } from 'node:crypto';
import { webhookAttempts, webhookDeliveryLag, workerBatchSize } from '../platform/metrics.ts';
import type { Dispatcher } from 'undici';
import { retryWhileUnreachable, type Database, type Queryable } from '../platform/db/database.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import { isUuid } from '../platform/ids.ts';
import {
  jobsStillHeld,
  settlementOf,
  settleJobsFrom,
  type FailedJobHook,
  type Job,
  type JobResult,
  type JobSettlement,
} from '../queue/leases.ts';
import type { GroupedJobHandler } from '../queue/grouped-worker.ts';
import { postJson } from './safe-dispatcher.ts';
import { signatureHeader, standardSignatureHeader } from './signature.ts';
import { cappedText, storableText } from '../platform/text.ts';

// One 'deliver-webhook' job: one attempt at one delivery. Exactly the spec's schedule: five attempts in
// all, the first at once and the next 1, 2, 4 and 8 s after the one before; only 5xx, 408, 429, time-outs
// and transport failures are tried again, any other answer (3xx included: redirects are not followed)
// fails the delivery at once. Every attempt is logged with its status, duration and the first 1 KiB of
// the answer.
//
// Each attempt carries the Standard Webhooks headers too: webhook-id is the event's id (evt_…, the body's
// id), so it is the same on every attempt of a delivery and on a replay of it, and a receiver deduplicating
// on it processes an event once; webhook-timestamp is the attempt's time, the same as x-service-signature's
// t=, and both signatures cover the exact bytes sent.

export const RETRY_DELAYS_SECONDS = [1, 2, 4, 8];
export const MAX_ATTEMPTS = RETRY_DELAYS_SECONDS.length + 1;

interface DeliveryRow {
  id: string;
  event_id: string;
  status: string;
  attempts: number;
  payload: { type: string; created_at: string };
  url: string;
  signing_secret: string;
  previous_secret: string | null;
  previous_live: boolean;
  enabled: boolean;
}

export const isRetryable = (status: number) => status >= 500 || status === 408 || status === 429;

/** Attempts recorded by one statement at most. */
const MAX_AT_ONCE = 500;

/** The deliveries a claimed batch of jobs names, with their endpoints, in one statement. */
async function readDeliveries(db: Queryable, jobs: Job[]): Promise<Array<DeliveryRow | undefined>> {
  const ids = jobs.map((job) => String(job.payload.delivery_id));
  const { rows } = await db.query<DeliveryRow>(
    `SELECT d.id, d.event_id, d.status, d.attempts, d.payload, e.url, e.signing_secret, e.previous_secret, e.enabled,
            coalesce(e.previous_secret_expires_at > now(), false) AS previous_live
       FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
      WHERE d.id = ANY($1::uuid[])`,
    [ids.filter(isUuid)],
  );
  const byId = new Map(rows.map((row) => [row.id, row]));
  return ids.map((id) => byId.get(id));
}

/** One attempt, as webhook_attempts keeps it, and the delivery's status after it. */
interface AttemptMade {
  delivery_id: string;
  attempt: number;
  request_id: string;
  status_code: number | null;
  duration_ms: number;
  response: string | null;
  error: string | null;
  status: 'succeeded' | 'pending' | 'failed';
}

type AttemptRecord = AttemptMade & JobSettlement;

// The attempt, the delivery's new state and its job's (finished, or due again for the next attempt), in
// one statement for a batch of attempts; only for jobs this worker still holds.
const attemptRecorder = batcherPerDatabase<AttemptRecord, void>({
  transaction: false,
  maxSize: MAX_AT_ONCE,
  done: (items) => workerBatchSize.observe({ batch: 'record-webhook-attempts' }, items),
  async run(db, attempts) {
    await db.query(
      `WITH made AS (
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(delivery_id uuid, attempt integer, request_id uuid,
           status_code integer, duration_ms integer, response text, error text, status text,
           job_id bigint, lease_id uuid, retry_at timestamptz, reason text)
       ),
       ${jobsStillHeld('made', 'held')},
       logged AS (
         INSERT INTO webhook_attempts (delivery_id, attempt, request_id, status_code, duration_ms, response, error)
         SELECT h.delivery_id, h.attempt, h.request_id, h.status_code, h.duration_ms, h.response, h.error
           FROM held h JOIN webhook_deliveries d ON d.id = h.delivery_id
         ON CONFLICT DO NOTHING
       ),
       ${settleJobsFrom('held')}
       UPDATE webhook_deliveries d SET attempts = held.attempt, status = held.status, updated_at = now()
         FROM held WHERE d.id = held.delivery_id`,
      [JSON.stringify(attempts)],
    );
    return attempts.map(() => undefined);
  },
});

/**
 * Fails a delivery still pending without a further attempt, `failure` saying why (as the deliveries list
 * shows it): its endpoint was disabled (`endpoint_disabled`), or its job failed for good (the reason).
 */
async function failPendingDelivery(db: Queryable, deliveryId: string, failure: string): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries SET status = 'failed', failure = $2, updated_at = now()
      WHERE id = $1 AND status = 'pending'`,
    [deliveryId, failure],
  );
}

/**
 * The kind's hook for a job failed for good (its run threw MAILROOM_JOB_MAX_ATTEMPTS times, or a
 * PermanentJobError): its delivery, still pending, is `failed` with the reason as its `failure`, so it
 * does not read pending for ever and "replay all failed since" sends it again.
 */
export const webhookDeliveryFailed: FailedJobHook = async (tx, job, reason) => {
  const deliveryId = String(job.payload.delivery_id);
  if (!isUuid(deliveryId)) return;
  await failPendingDelivery(tx, deliveryId, cappedText(reason, 1000));
};

/**
 * Deliveries are read with the batch of jobs claimed for their endpoint (a change to the endpoint makes
 * the worker read them again). Each job is one attempt; its endpoint's slot is free once the receiver has
 * answered (or the attempt failed): the next delivery goes out while this one's attempt is recorded, in a
 * batch with the others'.
 */
export function webhookHandler(db: Database, dispatcher: Dispatcher): GroupedJobHandler<DeliveryRow | undefined> {
  return {
    load: readDeliveries,
    run: sendAttempt,
  };

  async function sendAttempt(job: Job, delivery: DeliveryRow | undefined, slotFree: () => void): Promise<JobResult> {
    // Deleted with its endpoint, or already settled: nothing to send.
    if (!delivery || delivery.status !== 'pending') return { done: true };
    // Its endpoint disabled since (a fan-out that raced the switch): it fails as disabling fails the
    // others waiting, so that it does not stay pending for ever and can be replayed.
    if (!delivery.enabled) {
      await retryWhileUnreachable(() => failPendingDelivery(db, delivery.id, 'endpoint_disabled'), job.leaseEndsAt);
      return { done: true };
    }

    const attempt = delivery.attempts + 1;
    const requestId = randomUUID();
    const body = JSON.stringify(delivery.payload);
    const secrets = [
      delivery.signing_secret,
      ...(delivery.previous_live && delivery.previous_secret ? [delivery.previous_secret] : []),
    ];
    const timestamp = Math.floor(Date.now() / 1000);
    const webhookId = `evt_${delivery.event_id}`;
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'Mailroom-Webhooks/1',
      'x-service-signature': signatureHeader(secrets, timestamp, body),
      'x-service-event-type': delivery.payload.type,
      'x-service-delivery-id': requestId,
      'webhook-id': webhookId,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': standardSignatureHeader(secrets, webhookId, timestamp, body),
    };
    const result = await postJson(dispatcher, delivery.url, body, headers);
    slotFree();

    const answered = 'status' in result;
    const succeeded = answered && result.status >= 200 && result.status < 300;
    const retry = !succeeded && attempt < MAX_ATTEMPTS && (!answered || isRetryable(result.status));
    const status = succeeded ? 'succeeded' : retry ? 'pending' : 'failed';
    const next: JobResult = retry
      ? {
          retryAt: new Date(Date.now() + RETRY_DELAYS_SECONDS[attempt - 1]! * 1000),
          reason: answered ? `HTTP ${result.status}` : result.reason,
        }
      : { done: true };
    // The attempt, the delivery's new state and the job's, in one statement (the same twice over, so it
    // is retried while the database is away: an answered attempt is recorded, not made again).
    const attemptMade: AttemptRecord = {
      delivery_id: delivery.id,
      attempt,
      request_id: requestId,
      status_code: answered ? result.status : null,
      duration_ms: Math.round(result.durationMs),
      response: answered ? storableText(result.body) : null,
      error: answered ? null : storableText(`${result.reason}: ${result.message}`),
      status,
      ...settlementOf(job, next),
    };
    const record = () => attemptRecorder(db).add(attemptMade);
    await retryWhileUnreachable(record, job.leaseEndsAt);
    webhookAttempts.inc({ result: succeeded ? 'succeeded' : retry ? 'retrying' : 'failed' });
    if (succeeded) webhookDeliveryLag.observe((Date.now() - Date.parse(delivery.payload.created_at)) / 1000);
    return { ...next, settled: true };
  }
}
