// The failure hooks of webhook deliveries and broadcast fan-outs, wired as the product wires them (the
// worker options their start functions use): a job whose handler throws at every run fails for good after
// MAILROOM_JOB_MAX_ATTEMPTS runs, and what it acts on says so in the same transaction. A webhook delivery
// reads `failed` with the reason as its `failure` (not pending for ever), and its event reads 200 with
// no next attempt: a job failed for good is due at 'infinity', which the database driver gives back as
// the number Infinity, not a Date. A broadcast reads `failed` with the reason as its `failure_reason`.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { waitFor } from './helpers/wait.ts';
import { listFailedJobs } from '../src/queue/failures.ts';
import { startBatchJobWorker } from '../src/queue/worker.ts';
import { startGroupedWorker } from '../src/queue/grouped-worker.ts';
import { webhookWorkerOptions } from '../src/webhooks/start-webhooks.ts';
import { WEBHOOK_QUEUE } from '../src/webhooks/delivery-jobs.ts';
import { fanOutWorkerOptions } from '../src/broadcasts/start-broadcasts.ts';
import { FAN_OUT_QUEUE } from '../src/broadcasts/send-broadcast.ts';
import { takeSnapshot } from '../src/broadcasts/snapshot.ts';

let t: TestApp;
let org: TestOrganization;

before(async () => {
  t = await buildTestApp({ MAILROOM_JOB_MAX_ATTEMPTS: '2', MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
  org = await createTestOrganization(t.db, t.config, 'hooks-failed');
});
after(async () => {
  await t?.close();
});

/** A logger that counts its error lines. */
function countingLog() {
  const errors: string[] = [];
  return { errors, warn: () => {}, error: (_: unknown, message?: string) => void errors.push(message ?? '') };
}

/** A webhook endpoint (nothing listens there: no attempt is made in these tests) and a test event's delivery. */
async function endpointWithDelivery(): Promise<{ endpointId: string; deliveryId: string }> {
  const created = await t.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(org.fullKey),
    payload: { endpoint: 'http://127.0.0.1:1/never', events: [] },
  });
  assert.equal(created.statusCode, 201, created.body);
  const endpointId = created.json().id as string;
  const sent = await t.app.inject({
    method: 'POST',
    url: `/webhooks/${endpointId}/test`,
    headers: bearer(org.session),
    payload: { type: 'email.bounced' },
  });
  assert.equal(sent.statusCode, 200, sent.body);
  return { endpointId, deliveryId: sent.json().id as string };
}

const getEvent = (endpointId: string, deliveryId: string) =>
  t.app.inject({ method: 'GET', url: `/webhooks/${endpointId}/events/${deliveryId}`, headers: bearer(org.session) });

test('a webhook delivery whose job fails for good reads failed with the reason; its event answers 200', async () => {
  const { endpointId, deliveryId } = await endpointWithDelivery();
  const pending = await getEvent(endpointId, deliveryId);
  assert.equal(pending.statusCode, 200, pending.body);
  assert.equal(pending.json().status, 'pending');
  assert.equal(typeof pending.json().next_attempt_at, 'string');

  const log = countingLog();
  const worker = await startGroupedWorker(
    t.db,
    {
      load: async (_tx, jobs) => jobs.map(() => undefined),
      run: async () => {
        throw new Error('cannot read the delivery');
      },
    },
    webhookWorkerOptions(t.config, log),
  );
  try {
    await waitFor(async () => (await listFailedJobs(t.db, { kind: WEBHOOK_QUEUE })).length === 1, 20_000);
  } finally {
    await worker.stop();
  }
  const [job] = await listFailedJobs(t.db, { kind: WEBHOOK_QUEUE });
  assert.equal(job!.payload.delivery_id, deliveryId);
  assert.equal(job!.failedRuns, 2);
  assert.deepEqual(log.errors, ['job failed for good; it is kept as failed (mailroom jobs list --failed)']);

  const event = await getEvent(endpointId, deliveryId);
  assert.equal(event.statusCode, 200, event.body);
  assert.equal(event.json().status, 'failed');
  assert.equal(event.json().next_attempt_at, null);
  const list = await t.app.inject({
    method: 'GET',
    url: `/webhooks/${endpointId}/deliveries`,
    headers: bearer(org.session),
  });
  const [delivery] = list.json().data as Array<{ id: string; status: string; failure: string }>;
  assert.equal(delivery!.id, deliveryId);
  assert.equal(delivery!.status, 'failed');
  assert.equal(delivery!.failure, 'stopped after 2 failed attempts: cannot read the delivery');

  // Failed, it is replayed like any failed delivery.
  const replayed = await t.app.inject({
    method: 'POST',
    url: `/webhooks/${endpointId}/deliveries/replay`,
    headers: bearer(org.session),
    payload: { since: new Date(Date.now() - 3_600_000).toISOString() },
  });
  assert.equal(replayed.json().replayed, 1, replayed.body);
});

test('a delivery still pending whose job failed for good (no hook ran) reads 200 with no next attempt', async () => {
  const { endpointId, deliveryId } = await endpointWithDelivery();
  // As a job failed before its kind had a hook: failed, due never, its delivery left pending.
  const { rowCount } = await t.db.query(
    `UPDATE jobs SET failed_at = now(), run_at = 'infinity', last_error = 'boom'
      WHERE queue = $1 AND payload ->> 'delivery_id' = $2`,
    [WEBHOOK_QUEUE, deliveryId],
  );
  assert.equal(rowCount, 1);
  const event = await getEvent(endpointId, deliveryId);
  assert.equal(event.statusCode, 200, event.body);
  assert.equal(event.json().status, 'pending');
  assert.equal(event.json().next_attempt_at, null);
});

test('a broadcast whose fan-out job fails for good reads failed with the reason', async () => {
  const { rows: segment } = await t.db.query<{ id: string }>(
    `INSERT INTO segments (organization_id, name) VALUES ($1, 'failing') RETURNING id`,
    [org.id],
  );
  await t.db.query(
    `WITH made AS (
       INSERT INTO contacts (organization_id, email) SELECT $1, 'f' || i || '@failing.example'
         FROM generate_series(1, 3) AS i RETURNING id)
     INSERT INTO contact_segments (contact_id, segment_id) SELECT id, $2 FROM made`,
    [org.id, segment[0]!.id],
  );
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO broadcasts (organization_id, name, segment_id, "from", subject, text)
     VALUES ($1, 'News', $2, $3, 'News', 'Hello') RETURNING id`,
    [org.id, segment[0]!.id, `News <news@${org.domain}>`],
  );
  const id = rows[0]!.id;
  const sent = await t.app.inject({
    method: 'POST',
    url: `/broadcasts/${id}/send`,
    headers: bearer(org.fullKey),
    payload: {},
  });
  assert.equal(sent.statusCode, 200, sent.body);

  const log = countingLog();
  // Each run takes the audience (the first one only), then breaks before making any copy.
  const worker = await startBatchJobWorker(
    t.db,
    FAN_OUT_QUEUE,
    () => async (job) => {
      await takeSnapshot(t.db, String(job.payload.broadcast_id));
      throw new Error('cannot make the copies');
    },
    fanOutWorkerOptions(t.config, log),
  );
  try {
    await waitFor(async () => (await listFailedJobs(t.db, { kind: FAN_OUT_QUEUE })).length === 1, 20_000);
  } finally {
    await worker.stop();
  }
  const [job] = await listFailedJobs(t.db, { kind: FAN_OUT_QUEUE });
  assert.equal(job!.payload.broadcast_id, id);
  assert.equal(log.errors.length, 1, log.errors.join('\n'));

  const read = await t.app.inject({ method: 'GET', url: `/broadcasts/${id}`, headers: bearer(org.fullKey) });
  assert.equal(read.statusCode, 200, read.body);
  assert.equal(read.json().status, 'failed');
  assert.equal(read.json().failure_reason, 'stopped after 2 failed attempts: cannot make the copies');
  assert.equal(read.json().stats.pending, 3);
});
