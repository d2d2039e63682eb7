// A message's life through the real queue and worker: reading it and its timeline, delivery (capture
// transport), scheduling, cancel and reschedule, the cancel/worker race, suppressed recipients.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDelivery } from '../src/delivery/start-delivery.ts';
import { takeMessage } from '../src/delivery/take-message.ts';
import { createTransport } from '../src/delivery/transports/index.ts';
import type { Transport } from '../src/delivery/transport.ts';
import type { Worker } from '../src/queue/worker.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let dataDir: string;
let transport: Transport;
let worker: Worker | undefined;

const silentLog = { error: () => {}, warn: () => {} };

before(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-lifecycle-'));
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'capture',
    MAILROOM_DATA_DIR: dataDir,
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  org = await createTestOrganization(t.db, t.config, 'life');
  other = await createTestOrganization(t.db, t.config, 'life2');
  transport = createTransport(t.config, t.db);
});
after(async () => {
  await worker?.stop();
  await transport.close();
  await t.close();
  await rm(dataDir, { recursive: true, force: true });
});

const startWorker = async () => {
  worker ??= await startDelivery(t.db, t.config, transport, silentLog);
};
const read = (id: string, token = org.fullKey) =>
  t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(token) });
const timeline = async (id: string) =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) })).json()
    .data as Array<{
    id: string;
    type: string;
    created_at: string;
    recipient?: string;
    data?: Record<string, unknown>;
  }>;
const cancel = (id: string) =>
  t.app.inject({ method: 'POST', url: `/emails/${id}/cancel`, headers: bearer(org.fullKey) });
const reschedule = (id: string, at: string) =>
  t.app.inject({ method: 'PATCH', url: `/emails/${id}`, headers: bearer(org.fullKey), payload: { scheduled_at: at } });
const later = (ms: number) => new Date(Date.now() + ms).toISOString();
const sendOne = async (extra: Record<string, unknown> = {}) => {
  const res = await send(t.app, org.fullKey, message(org, extra));
  assert.equal(res.statusCode, 200, res.body);
  return res.json().id as string;
};

test('GET /emails/:id returns the stored message, last_event queued or scheduled before sending', async () => {
  const content = Buffer.from('hello').toString('base64');
  const id = await sendOne({
    to: ['A <a@example.com>'],
    cc: 'c@example.com',
    bcc: ['b@example.com'],
    reply_to: 'r@example.com',
    html: '<p>x</p>',
    tags: { kind: 'receipt' },
    headers: { 'X-Ref': '7' },
    attachments: [{ filename: 'a.txt', content }],
    scheduled_at: later(3600_000),
  });
  const res = await read(id);
  assert.equal(res.statusCode, 200);
  const email = res.json();
  assert.deepEqual(Object.keys(email).sort(), [
    'attachments',
    'bcc',
    'cc',
    'created_at',
    'from',
    'headers',
    'html',
    'id',
    'last_event',
    'message_id',
    'object',
    'reply_to',
    'scheduled_at',
    'subject',
    'tags',
    'template',
    'text',
    'to',
    'topic_id',
  ]);
  assert.equal(email.object, 'email');
  assert.deepEqual(email.to, ['A <a@example.com>']);
  assert.deepEqual(email.bcc, ['b@example.com']);
  assert.deepEqual(email.attachments, [{ filename: 'a.txt', content_type: 'text/plain', size: 5 }]);
  // Tags read back as Resend's list of name and value, whichever form they were sent in.
  assert.deepEqual(email.tags, [{ name: 'kind', value: 'receipt' }]);
  assert.equal(email.last_event, 'scheduled');
  assert.match(email.message_id, /^<[0-9a-f-]{36}@/);
  const queued = await read(await sendOne({ to: 'q@example.com' }));
  assert.equal(queued.json().last_event, 'queued');
});

test('last_event reads sent once a worker takes the message, until a newer outcome; tags have one form', async () => {
  const id = await sendOne({ to: 'taken@example.com', tags: [{ name: 'n', value: 7 }, 'flag'] });
  assert.equal((await read(id)).json().last_event, 'queued');
  // What a worker does first: take the message for its first delivery attempt (no worker runs yet here).
  const taken = await takeMessage(t.db, id);
  assert.ok(typeof taken === 'object' && 'email' in taken, 'taken');
  const email = (await read(id)).json();
  assert.equal(email.last_event, 'sent');
  assert.deepEqual(email.tags, [
    { name: 'n', value: '7' },
    { name: 'flag', value: 'true' },
  ]);
  // The timeline keeps its own kind; the list filter takes sent, and accepted as its alias.
  assert.deepEqual(
    (await timeline(id)).map((event) => event.type),
    ['accepted'],
  );
  for (const filter of ['sent', 'accepted']) {
    const listed = await t.app.inject({
      method: 'GET',
      url: `/emails?last_event=${filter}&recipient=taken@example.com`,
      headers: bearer(org.fullKey),
    });
    assert.deepEqual(
      listed.json().data.map((item: { id: string; last_event: string }) => [item.id, item.last_event]),
      [[id, 'sent']],
      filter,
    );
  }
});

test('the timeline starts with accepted, with evt_ ids; a scheduled message then has scheduled', async () => {
  const queued = await timeline(await sendOne());
  assert.deepEqual(
    queued.map((e) => [e.type, e.data]),
    [['accepted', undefined]],
  );
  assert.match(queued[0]!.id, /^evt_[0-9a-f-]{36}$/);
  const at = later(3600_000);
  const events = await timeline(await sendOne({ scheduled_at: at }));
  assert.deepEqual(
    events.map((e) => [e.type, e.data]),
    [
      ['accepted', { scheduled_at: at }],
      ['scheduled', { scheduled_at: at }],
    ],
  );
  assert.match(events[1]!.id, /^evt_[0-9a-f-]{36}$/);
});

test('scheduling, each rescheduling and the cancel are on the timeline, each with its webhook event id', async () => {
  const hook = await t.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(org.fullKey),
    payload: { endpoint: 'http://127.0.0.1:9/timeline', events: [] },
  });
  assert.equal(hook.statusCode, 201, hook.body);
  try {
    const first = later(3600_000);
    const second = later(7200_000);
    const third = later(10_800_000);
    const id = await sendOne({ scheduled_at: first });
    assert.equal((await reschedule(id, second)).statusCode, 200);
    assert.equal((await reschedule(id, third)).statusCode, 200);
    assert.equal((await cancel(id)).statusCode, 200);
    const events = await timeline(id);
    assert.deepEqual(
      events.map((e) => [e.type, e.data]),
      [
        ['accepted', { scheduled_at: first }],
        ['scheduled', { scheduled_at: first }],
        ['rescheduled', { scheduled_at: second, previous_scheduled_at: first }],
        ['rescheduled', { scheduled_at: third, previous_scheduled_at: second }],
        ['canceled', undefined],
      ],
    );
    // Each entry and the webhook event of the same happening share their evt_ id and their times.
    const { rows } = await t.db.query<{ payload: { id: string; type: string; data: Record<string, unknown> } }>(
      'SELECT payload FROM webhook_deliveries WHERE endpoint_id = $1 AND payload @> $2::jsonb',
      [hook.json().id, JSON.stringify({ data: { email_id: id } })],
    );
    const webhooks = new Map(rows.map(({ payload }) => [payload.id, payload]));
    const types = ['email.accepted', 'email.scheduled', 'email.rescheduled', 'email.rescheduled', 'email.canceled'];
    assert.equal(webhooks.size, events.length);
    events.forEach((entry, i) => {
      const event = webhooks.get(entry.id);
      assert.equal(event?.type, types[i], `${entry.type} ${entry.id}`);
      for (const [field, value] of Object.entries(entry.data ?? {})) assert.equal(event!.data[field], value, field);
    });
  } finally {
    await t.app.inject({ method: 'DELETE', url: `/webhooks/${hook.json().id}`, headers: bearer(org.fullKey) });
  }
});

test('rescheduling a queued message records no previous time; the timeline reads sent once taken', async () => {
  const id = await sendOne({ to: 'moved@example.com' });
  const at = later(3600_000);
  assert.equal((await reschedule(id, at)).statusCode, 200);
  assert.deepEqual(
    (await timeline(id)).map((e) => [e.type, e.data]),
    [
      ['accepted', undefined],
      ['rescheduled', { scheduled_at: at, previous_scheduled_at: null }],
    ],
  );
  assert.equal((await read(id)).json().last_event, 'scheduled');
  // A worker taking it (its time come) makes it sent, though its newest entry is a rescheduling.
  await t.db.query(`UPDATE emails SET scheduled_at = now() - interval '1 second' WHERE id = $1`, [id]);
  const taken = await takeMessage(t.db, id);
  assert.ok(typeof taken === 'object' && 'email' in taken, 'taken');
  assert.equal((await read(id)).json().last_event, 'sent');
  const listed = await t.app.inject({
    method: 'GET',
    url: '/emails?last_event=sent&recipient=moved@example.com',
    headers: bearer(org.fullKey),
  });
  assert.deepEqual(
    listed.json().data.map((item: { id: string }) => item.id),
    [id],
  );
});

test("another organization's message is 404 everywhere; a malformed id too", async () => {
  const id = await sendOne({ scheduled_at: later(3600_000) });
  for (const url of [`/emails/${id}`, `/emails/${id}/events`]) {
    const res = await t.app.inject({ method: 'GET', url, headers: bearer(other.fullKey) });
    assert.equal(res.statusCode, 404);
  }
  const res = await t.app.inject({ method: 'POST', url: `/emails/${id}/cancel`, headers: bearer(other.fullKey) });
  assert.equal(res.statusCode, 404);
  assert.equal((await read('not-a-uuid')).statusCode, 404);
  assert.equal((await cancel('not-a-uuid')).statusCode, 404);
});

test('cancel a scheduled message: canceled, timeline entry, job gone; then invalid_state', async () => {
  const id = await sendOne({ scheduled_at: later(3600_000) });
  const res = await cancel(id);
  assert.equal(res.statusCode, 200);
  assert.deepEqual(res.json(), { object: 'email', id });
  assert.equal((await read(id)).json().last_event, 'canceled');
  assert.deepEqual(
    (await timeline(id)).map((e) => e.type),
    ['accepted', 'scheduled', 'canceled'],
  );
  const jobs = await t.db.query("SELECT 1 FROM jobs WHERE payload->>'email_id' = $1", [id]);
  assert.equal(jobs.rowCount, 0);
  const again = await cancel(id);
  assert.equal(again.statusCode, 400);
  assert.equal(again.json().name, 'invalid_state');
  const moved = await reschedule(id, later(7200_000));
  assert.equal(moved.json().name, 'invalid_state');
});

test('reschedule moves scheduled_at and the job; a past time is refused', async () => {
  const id = await sendOne({ scheduled_at: later(3600_000) });
  const at = new Date(Date.now() + 7200_000).toISOString();
  const res = await reschedule(id, at);
  assert.equal(res.statusCode, 200, res.body);
  assert.equal((await read(id)).json().scheduled_at, at);
  const job = await t.db.query<{ run_at: Date }>("SELECT run_at FROM jobs WHERE payload->>'email_id' = $1", [id]);
  assert.equal(job.rows[0]!.run_at.toISOString(), at);
  const past = await reschedule(id, '2020-01-01T00:00:00Z');
  assert.deepEqual([past.statusCode, past.json().name], [400, 'validation_error']);
  const missing = await t.app.inject({
    method: 'PATCH',
    url: `/emails/${id}`,
    headers: bearer(org.fullKey),
    payload: {},
  });
  assert.deepEqual([missing.statusCode, missing.json().name], [400, 'missing_required_field']);
});

test('the worker delivers: each recipient delivered, last_event delivered, the .eml carries the Message-ID', async () => {
  await startWorker();
  const id = await sendOne({ to: ['x@example.com', 'y@example.com'], bcc: 'z@example.com' });
  await waitFor(async () => (await timeline(id)).filter((e) => e.type === 'delivered').length === 3);
  const email = (await read(id)).json();
  assert.equal(email.last_event, 'delivered');
  const delivered = (await timeline(id))
    .filter((e) => e.type === 'delivered')
    .map((e) => e.recipient)
    .sort();
  assert.deepEqual(delivered, ['x@example.com', 'y@example.com', 'z@example.com']);
  const { readCaptured } = await import('../src/delivery/transports/capture.ts');
  const eml = (await readCaptured(dataDir, id))!.toString();
  assert.ok(eml.includes(`Message-ID: ${email.message_id}`), 'the captured message carries the Message-ID');
  assert.doesNotMatch(eml, /^Bcc:/im);
  const cancelled = await cancel(id);
  assert.deepEqual([cancelled.statusCode, cancelled.json().name], [400, 'invalid_state']);
});

test('a scheduled message is picked up within one second of scheduled_at, and not before', async () => {
  await startWorker();
  const at = new Date(Date.now() + 1500);
  const id = await sendOne({ scheduled_at: at.toISOString() });
  await waitFor(async () => (await timeline(id)).some((e) => e.type === 'delivered'), 10_000);
  const delivered = (await timeline(id)).find((e) => e.type === 'delivered')!;
  assert.ok(new Date(delivered.created_at) >= at, `delivered at ${delivered.created_at}, before ${at.toISOString()}`);
  // The one test of the real poll timer: measured when the worker took the message, by the database's
  // clock (the take sets sent_at to now() as it moves the message to sending), so the bound covers the
  // scheduler alone (its poll, every 250 ms, and the claim) and not composing, signing and sending,
  // whose time grows with a slow machine.
  const { rows } = await t.db.query<{ late_ms: number }>(
    'SELECT (extract(epoch FROM sent_at - scheduled_at) * 1000)::float8 AS late_ms FROM emails WHERE id = $1',
    [id],
  );
  const lateBy = rows[0]!.late_ms;
  assert.ok(lateBy >= 0 && lateBy < 1000, `taken ${lateBy} ms after scheduled_at`);
});

test('cancel racing the worker: either the send is prevented or the cancel is refused, never both', async () => {
  await startWorker();
  const cancelled: string[] = [];
  let sent = 0;
  for (let i = 0; i < 25; i++) {
    const id = await sendOne({ to: `race${i}@example.com` });
    await new Promise((resolve) => setTimeout(resolve, i % 5)); // vary who wins
    const res = await cancel(id);
    if (res.statusCode === 200) {
      cancelled.push(id);
    } else {
      assert.equal(res.json().name, 'invalid_state');
      sent += 1;
      await waitFor(async () => (await timeline(id)).some((e) => e.type === 'delivered'));
      assert.ok(!(await timeline(id)).some((e) => e.type === 'canceled'));
    }
  }
  assert.equal(cancelled.length + sent, 25);
  // No job of a cancelled message is left, and the worker is stopped (a stop waits for the jobs it
  // runs): a wrong send would have happened by now, whatever the speed.
  await waitFor(
    async () =>
      (await t.db.query("SELECT 1 FROM jobs WHERE payload->>'email_id' = ANY($1::text[])", [cancelled])).rowCount === 0,
  );
  await worker!.stop();
  worker = undefined;
  const { readCaptured } = await import('../src/delivery/transports/capture.ts');
  for (const id of cancelled) {
    const types = (await timeline(id)).map((e) => e.type);
    assert.ok(!types.includes('delivered'), `cancelled and delivered: ${types.join()}`);
    assert.equal(await readCaptured(dataDir, id), undefined);
  }
});

test('a suppressed recipient is not sent to: failed, reason suppressed; the others are delivered', async () => {
  await startWorker();
  await t.db.query(
    "INSERT INTO suppressions (organization_id, address, reason) VALUES ($1, 'gone@example.com', 'hard_bounce')",
    [org.id],
  );
  const id = await sendOne({ to: ['Gone@example.com', 'here@example.com'] });
  await waitFor(async () => (await timeline(id)).filter((e) => e.type !== 'accepted').length === 2);
  const events = await timeline(id);
  const failed = events.find((e) => e.type === 'failed')!;
  assert.equal(failed.recipient, 'Gone@example.com');
  assert.deepEqual(failed.data, { reason: 'suppressed' });
  assert.equal(events.find((e) => e.type === 'delivered')!.recipient, 'here@example.com');
});
