// A delivery job that fails for good does not leave its message `sending` with nothing said. A transport
// that throws only defers its recipients (the retry schedule ends those); what fails the job itself is an
// error of the steps around it (a bug, a message that cannot be read): here a handler that throws stands
// for one, under the delivery worker's own options. After MAILROOM_JOB_MAX_ATTEMPTS runs, the delivery kind's hook fails each recipient still
// pending with reason `delivery_error` (timeline entry, last_event), the message reads sent, and the job
// is kept, listed as failed.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { waitFor } from './helpers/wait.ts';
import { deliveryWorkerOptions } from '../src/delivery/start-delivery.ts';
import { startWorker } from '../src/queue/worker.ts';
import { registry } from '../src/platform/metrics.ts';

/** mailroom_recipient_outcomes_total{outcome="failed"}, every domain group. */
async function failedOutcomes(): Promise<number> {
  const metric = await registry.getSingleMetric('mailroom_recipient_outcomes_total')!.get();
  return metric.values.filter((v) => v.labels.outcome === 'failed').reduce((sum, v) => sum + v.value, 0);
}
import { listFailedJobs } from '../src/queue/failures.ts';

let t: TestApp;
let org: TestOrganization;

before(async () => {
  t = await buildTestApp({ MAILROOM_JOB_MAX_ATTEMPTS: '2' });
  org = await createTestOrganization(t.db, t.config, 'delivery-failure');
});
after(async () => {
  await t?.close();
});

test('a delivery job that fails at every run fails its pending recipients with delivery_error and is kept failed', async () => {
  const sent = await t.app.inject({
    method: 'POST',
    url: '/emails',
    headers: bearer(org.fullKey),
    payload: { from: `app@${org.domain}`, to: ['a@example.com', 'b@example.com'], subject: 'Hi', text: 'Hello' },
  });
  assert.equal(sent.statusCode, 200, sent.body);
  const id = sent.json().id as string;
  const failedBefore = await failedOutcomes();

  // Runs back off 2 s after the first failure: the second run is the last one allowed.
  const lines: string[] = [];
  const log = {
    warn: (_: unknown, m?: string) => void lines.push(`warn ${m}`),
    error: (_: unknown, m?: string) => void lines.push(`error ${m}`),
  };
  const worker = await startWorker(
    t.db,
    {
      'deliver-email': async () => {
        throw new Error('cannot read the message');
      },
    },
    // The options the product's delivery worker runs with (its failure hook among them).
    { ...deliveryWorkerOptions(t.config, log), pollIntervalMs: 100 },
  );
  try {
    await waitFor(async () => (await listFailedJobs(t.db, { kind: 'deliver-email' })).length === 1, 20_000);
  } finally {
    await worker.stop();
  }
  const [job] = await listFailedJobs(t.db, { kind: 'deliver-email' });
  assert.equal(job!.payload.email_id, id);
  assert.equal(job!.failedRuns, 2);
  assert.match(job!.lastError ?? '', /cannot read the message/);

  const email = await t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(org.fullKey) });
  assert.equal(email.json().last_event, 'failed');
  const events = await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) });
  const failed = events.json().data.filter((e: { type: string }) => e.type === 'failed');
  assert.deepEqual(failed.map((e: { recipient: string }) => e.recipient).sort(), ['a@example.com', 'b@example.com']);
  for (const entry of failed) assert.equal(entry.data.reason, 'delivery_error');
  const { rows } = await t.db.query<{ status: string; failure_reason: string }>(
    'SELECT status, failure_reason FROM email_recipients WHERE email_id = $1',
    [id],
  );
  assert.deepEqual(
    rows.map((r) => [r.status, r.failure_reason]),
    [
      ['failed', 'delivery_error'],
      ['failed', 'delivery_error'],
    ],
  );
  const status = await t.db.query<{ status: string }>('SELECT status FROM emails WHERE id = $1', [id]);
  assert.equal(status.rows[0]!.status, 'sent');
  assert.equal(await failedOutcomes(), failedBefore + 2);
  assert.equal(lines.filter((l) => l.startsWith('error')).length, 1, lines.join('\n'));
});
