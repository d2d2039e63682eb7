// GET /metrics read before and after real sends, deliveries, refusals and webhook deliveries: the
// numbers move as they should. And /readyz, which fails while a worker's queue is behind.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { buildApp } from '../src/app.ts';
import { startWebhookDelivery } from '../src/webhooks/start-webhooks.ts';
import { bearer, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startRelayTestBed, type RelayTestBed } from './helpers/delivery.ts';
import { message, send } from './helpers/emails.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;
let receiver: Server;
let receiverUrl: string;
const received: string[] = [];

let bed: RelayTestBed;

before(async () => {
  receiver = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received.push(String(request.headers['webhook-id']));
      response.end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  bed = await startRelayTestBed('metrics', {
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_DELIVERY_RETRY_SCHEDULE: '60',
  });
  ({ t, org, sink } = bed);
  // Tracking off: one SMTP transaction per message, whatever its recipients.
  await t.db.query('UPDATE organizations SET open_tracking = false, click_tracking = false WHERE id = $1', [org.id]);
});
after(async () => {
  await bed.close();
  await new Promise((resolve) => receiver.close(resolve));
});

/** Every sample of the exposition, as "name{labels}" → value (labels in the order printed). */
async function scrape(): Promise<Map<string, number>> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics' });
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/plain/);
  const samples = new Map<string, number>();
  for (const line of res.body.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

const value = (samples: Map<string, number>, name: string) => samples.get(name) ?? 0;

test('accepted messages, outcomes by kind and domain group, delivery latency and HTTP requests', async () => {
  const before = await scrape();
  sink.replyToRecipient('gone@example.com', { code: 550, message: '5.1.1 No such user' });
  sink.replyToRecipient('later@yahoo.com', { code: 451, message: '4.3.0 Try later' });
  for (const to of ['ann@gmail.com', 'gone@example.com', 'later@yahoo.com', 'bob@outlook.com']) {
    assert.equal((await send(t.app, org.sendingKey, message(org, { to }))).statusCode, 200);
  }
  await t.app.inject({
    method: 'POST',
    url: '/suppressions',
    headers: bearer(org.fullKey),
    payload: { email: 'blocked@icloud.com' },
  });
  assert.equal((await send(t.app, org.sendingKey, message(org, { to: 'blocked@icloud.com' }))).statusCode, 200);
  await t.app.inject({ method: 'GET', url: '/emails/not-an-id', headers: bearer(org.fullKey) });

  const outcome = (o: string, group: string) =>
    `mailroom_recipient_outcomes_total{outcome="${o}",domain_group="${group}"}`;
  // Every outcome counted, in whatever order the worker's connections delivered them.
  const expected = [
    outcome('delivered', 'gmail'),
    outcome('delivered', 'outlook'),
    outcome('bounced', 'other'),
    outcome('deferred', 'yahoo'),
    outcome('suppressed', 'icloud'),
  ];
  await waitFor(async () => {
    const now = await scrape();
    return expected.every((name) => value(now, name) > value(before, name));
  }, 10_000);
  const after = await scrape();
  const delta = (name: string) => value(after, name) - value(before, name);

  assert.equal(delta('mailroom_messages_accepted_total{carrier="api"}'), 5);
  assert.equal(delta(outcome('delivered', 'gmail')), 1);
  assert.equal(delta(outcome('delivered', 'outlook')), 1);
  assert.equal(delta(outcome('bounced', 'other')), 1);
  assert.equal(delta(outcome('deferred', 'yahoo')), 1);
  assert.equal(delta(outcome('suppressed', 'icloud')), 1);
  assert.equal(delta('mailroom_accepted_to_delivered_seconds_count'), 2);
  // Route templates, never the path itself.
  assert.equal(delta('mailroom_http_requests_total{method="POST",route="/emails",status="200"}'), 5);
  assert.equal(delta('mailroom_http_requests_total{method="GET",route="/emails/:id",status="404"}'), 1);
  assert.ok(delta('mailroom_http_request_duration_seconds_count{method="POST",route="/emails"}') === 5);
  assert.ok(![...after.keys()].some((name) => name.includes('not-an-id')), 'no id in any label');
});

test('queue depth and the age of the oldest due job, per queue; webhook attempts and their lag', async () => {
  const hook = await t.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(org.fullKey),
    payload: { endpoint: receiverUrl, events: ['email.accepted'] },
  });
  assert.equal(hook.statusCode, 201, hook.body);
  // No webhook worker yet: the deliveries wait in their queue.
  for (let i = 0; i < 3; i++) await send(t.app, org.sendingKey, message(org, { to: `q${i}@example.com` }));
  await waitFor(async () => value(await scrape(), 'mailroom_queue_due_jobs{queue="deliver-webhook"}') >= 3, 5000);
  const waiting = await scrape();
  assert.ok(value(waiting, 'mailroom_queue_oldest_due_seconds{queue="deliver-webhook"}') >= 0);
  assert.ok(waiting.has('mailroom_queue_due_jobs{queue="deliver-email"}'));

  const before = waiting;
  const log = { error: () => {}, warn: () => {} };
  const webhooks = await startWebhookDelivery(t.db, t.config, log);
  try {
    await waitFor(() => received.length >= 3, 10_000);
    await waitFor(async () => value(await scrape(), 'mailroom_queue_due_jobs{queue="deliver-webhook"}') === 0, 10_000);
  } finally {
    await webhooks.close();
  }
  const after = await scrape();
  assert.ok(
    value(after, 'mailroom_webhook_attempts_total{result="succeeded"}') -
      value(before, 'mailroom_webhook_attempts_total{result="succeeded"}') >=
      3,
  );
  assert.ok(
    value(after, 'mailroom_webhook_delivery_lag_seconds_count') -
      value(before, 'mailroom_webhook_delivery_lag_seconds_count') >=
      3,
  );
  if (t.db.kind === 'postgres') assert.ok(value(after, 'mailroom_db_pool_connections{state="total"}') >= 1);
});

test('MAILROOM_METRICS_TOKEN: /metrics needs it', async () => {
  const app = await buildApp({ db: t.db, config: { ...t.config, metricsToken: 's3cret' }, logger: false });
  try {
    const refused = await app.inject({ method: 'GET', url: '/metrics' });
    assert.deepEqual([refused.statusCode, refused.json().name], [401, 'invalid_api_key']);
    const wrong = await app.inject({ method: 'GET', url: '/metrics', headers: bearer('s3cre') });
    assert.equal(wrong.statusCode, 401);
    const ok = await app.inject({ method: 'GET', url: '/metrics', headers: bearer('s3cret') });
    assert.equal(ok.statusCode, 200);
    assert.match(ok.body, /mailroom_messages_accepted_total/);
  } finally {
    await app.close();
  }
});

test('/readyz fails while a worker process’s queue is behind; an API-only process does not look', async () => {
  const config = { ...t.config, readyMaxQueueLagSeconds: 60 };
  const worker = await buildApp({ db: t.db, config, logger: false, runsWorkers: true });
  const api = await buildApp({ db: t.db, config, logger: false });
  try {
    assert.equal((await worker.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    await t.db.query(
      // The webhook queue: no webhook worker runs here to take it.
      `INSERT INTO jobs (queue, payload, run_at) VALUES ('deliver-webhook', '{"delivery_id": "late"}', now() - interval '10 minutes')`,
    );
    const late = await worker.inject({ method: 'GET', url: '/readyz' });
    assert.equal(late.statusCode, 503);
    assert.equal(late.json().name, 'service_unavailable');
    assert.match(late.json().message, /deliver-webhook queue is behind/);
    assert.equal((await api.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    assert.equal((await worker.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'liveness stays');
  } finally {
    await t.db.query(`DELETE FROM jobs WHERE payload ->> 'delivery_id' = 'late'`);
    await worker.close();
    await api.close();
  }
});

test('every metric the Grafana dashboard and the docs name is exposed', async () => {
  const { readFile } = await import('node:fs/promises');
  const exposition = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
  const exposed = new Set([...exposition.matchAll(/^# TYPE (\S+)/gm)].map((match) => match[1]!));
  for (const file of ['../docs/grafana-dashboard.json', '../docs/operations.md']) {
    const text = await readFile(new URL(file, import.meta.url), 'utf8');
    const named = new Set([...text.matchAll(/mailroom_[a-z_]+/g)].map((match) => match[0]));
    for (const name of named) {
      if (['mailroom_process_', 'mailroom_nodejs_', 'mailroom_jobs'].includes(name)) continue; // prefixes, a NOTIFY channel
      const base = name.replace(/_(bucket|count|sum)$/, '');
      assert.ok(exposed.has(base), `${file} names ${name}, which /metrics does not expose`);
    }
  }
});
