// Webhooks end to end: real HTTP receivers on loopback, events from real sends, signatures checked with
// Stripe's own verifier and with the Standard Webhooks ones (Resend's SDK, standardwebhooks), the exact
// retry schedule, deletion, rotation, replay, a slow endpoint; the endpoint routes driven by Resend's SDK
// and checked against Resend's OpenAPI document; disabling, test events and "replay all failed since".
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { Resend } from 'resend';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { startDelivery } from '../src/delivery/start-delivery.ts';
import { createTransport } from '../src/delivery/transports/index.ts';
import type { Transport } from '../src/delivery/transport.ts';
import type { Worker } from '../src/queue/worker.ts';
import { standardSignatureHeader } from '../src/webhooks/signature.ts';
import { EVENT_TYPES } from '../src/webhooks/event-types.ts';
import { queueDeliveriesFrom } from '../src/webhooks/delivery-jobs.ts';
import { replayFailedSince } from '../src/webhooks/endpoints.ts';
import { requestProblems, responseProblems, webhookProblems } from './helpers/resend-openapi.ts';
import { startWebhookDelivery } from '../src/webhooks/start-webhooks.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send, sendBatch } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';

interface Received {
  at: number;
  headers: IncomingHttpHeaders;
  raw: string;
  body: { id: string; type: string; created_at: string; data: Record<string, unknown> };
}

/** A webhook receiver on loopback that answers with whatever `answer` says and records every request. */
async function receiver(answer: (request: Received) => number | 'hang' | Promise<number> = () => 200) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => {
      const entry = { at: Date.now(), headers: req.headers, raw, body: JSON.parse(raw || '{}') };
      received.push(entry);
      void Promise.resolve(answer(entry)).then((status) => {
        if (status === 'hang') return;
        res.writeHead(status, status >= 300 && status < 400 ? { location: 'http://127.0.0.1:9/elsewhere' } : {});
        res.end(status === 200 ? 'ok' : 'x'.repeat(5000));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  return {
    url,
    received,
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

let t: TestApp;
let org: TestOrganization;
let dataDir: string;
let transport: Transport;
let delivery: Worker;
let webhooks: Awaited<ReturnType<typeof startWebhookDelivery>>;
const stripe = new Stripe('sk_test_unused');
const resend = new Resend('re_unused');
const log = { error: () => {}, warn: () => {} };

before(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-webhooks-'));
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'capture',
    MAILROOM_DATA_DIR: dataDir,
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    // Longer than any test: an endpoint that never answers holds its slots until the test lets it go.
    MAILROOM_WEBHOOK_TIMEOUT_MS: '60000',
    MAILROOM_WEBHOOK_CONNECTIONS_PER_ENDPOINT: '2',
  });
  org = await createTestOrganization(t.db, t.config, 'hooks');
  transport = createTransport(t.config, t.db);
  delivery = await startDelivery(t.db, t.config, transport, log);
  webhooks = await startWebhookDelivery(t.db, t.config, log);
});
after(async () => {
  await delivery.stop();
  await webhooks.close();
  await transport.close();
  await t.close();
  await rm(dataDir, { recursive: true, force: true });
});

const register = async (endpoint: string, events: string[] = [], token = org.fullKey) => {
  const res = await t.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(token),
    payload: { endpoint, events },
  });
  assert.equal(res.statusCode, 201, res.body);
  return res.json() as { id: string; signing_secret: string };
};
const remove = (id: string) => t.app.inject({ method: 'DELETE', url: `/webhooks/${id}`, headers: bearer(org.session) });
/** Rotates the endpoint's signing secret; the answer carries the new one. */
const rotate = async (id: string) =>
  (
    await t.app.inject({ method: 'POST', url: `/webhooks/${id}/signing-secret/rotate`, headers: bearer(org.session) })
  ).json() as { signing_secret: string };
const sendOne = async () =>
  (await send(t.app, org.fullKey, message(org, { to: 'hooked@example.com' }))).json().id as string;
/**
 * Whether the endpoint has deliveries and every one is over (succeeded or failed) with no job left: no
 * attempt can follow. Waiting for this, not for a while, is what lets a test count attempts.
 */
const deliveriesOver = (endpointId: string) => async () => {
  const { rows } = await t.db.query<{ deliveries: number; pending: number; jobs: number }>(
    `SELECT (SELECT count(*)::int FROM webhook_deliveries WHERE endpoint_id = $1) AS deliveries,
            (SELECT count(*)::int FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending') AS pending,
            (SELECT count(*)::int FROM jobs WHERE group_key = $2) AS jobs`,
    [endpointId, endpointId],
  );
  return rows[0]!.deliveries > 0 && rows[0]!.pending === 0 && rows[0]!.jobs === 0;
};
/** Whether the message's delivered event is recorded (so every event of it has been fanned out). */
const delivered = (id: string) => async () =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(org.fullKey) })).json().last_event ===
  'delivered';

test('register: 201 with a signing secret; listing (session only) shows no secret', async () => {
  const created = await register('http://127.0.0.1:1/never', ['email.delivered']);
  assert.match(created.signing_secret, /^whsec_/);
  const one = created as unknown as Record<string, unknown>;
  assert.equal(one.object, 'webhook');
  assert.equal(one.status, 'enabled');
  assert.deepEqual(one.events, ['email.delivered']);
  const list = await t.app.inject({ method: 'GET', url: '/webhooks', headers: bearer(org.session) });
  assert.equal(list.statusCode, 200);
  assert.doesNotMatch(list.body, /whsec_/);
  const byKey = await t.app.inject({ method: 'GET', url: '/webhooks', headers: bearer(org.fullKey) });
  assert.deepEqual([byKey.statusCode, byKey.json().name], [401, 'session_required']);
  assert.equal((await remove(created.id)).statusCode, 200);
});

test('registration refuses unknown event types and private hosts', async () => {
  const unknown = await t.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(org.fullKey),
    payload: { endpoint: 'http://127.0.0.1:1/x', events: ['email.exploded'] },
  });
  assert.deepEqual(
    [unknown.statusCode, unknown.json().name, unknown.json().field],
    [400, 'validation_error', 'events'],
  );
  const strict = await buildTestApp({});
  const o = await createTestOrganization(strict.db, strict.config);
  const res = await strict.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(o.fullKey),
    payload: { endpoint: 'http://127.0.0.1:8080/hook', events: [] },
  });
  assert.deepEqual([res.statusCode, res.json().name], [400, 'invalid_webhook_endpoint']);
  await strict.close();
});

test('events of a send arrive signed (Stripe verifies them), with the headers and body of the spec', async () => {
  const hook = await receiver();
  const endpoint = await register(hook.url);
  try {
    const id = await sendOne();
    await waitFor(() => hook.received.length >= 3);
    const timeline = (
      await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) })
    ).json().data;
    for (const request of hook.received) {
      const event = stripe.webhooks.constructEvent(
        request.raw,
        String(request.headers['x-service-signature']),
        endpoint.signing_secret,
      );
      assert.equal(event.id, request.body.id);
      assert.match(String(request.headers['content-type']), /^application\/json/);
      assert.equal(request.headers['x-service-event-type'], request.body.type);
      assert.match(String(request.headers['x-service-delivery-id']), /^[0-9a-f-]{36}$/);
      assert.match(String(request.headers['x-service-signature']), /^t=\d+,v1=[0-9a-f]{64}$/);
      // email.sent has no timeline entry of its own (the message's status tells it); the others have one.
      const entry = timeline.find((e: { id: string }) => e.id === request.body.id);
      if (request.body.type !== 'email.sent') {
        assert.ok(entry, 'the webhook and the timeline entry share one evt_ id');
        assert.equal(new Date(request.body.created_at).getTime(), new Date(entry.created_at).getTime());
      }
      assert.equal(request.body.data.email_id, id);
      assert.deepEqual(request.body.data.to, ['hooked@example.com']);
    }
    const types = hook.received.map((r) => r.body.type).sort();
    assert.deepEqual(types, ['email.accepted', 'email.delivered', 'email.sent']);
    const tampered = hook.received[0]!.raw.replace('hooked', 'hacked');
    assert.throws(() =>
      stripe.webhooks.constructEvent(
        tampered,
        String(hook.received[0]!.headers['x-service-signature']),
        endpoint.signing_secret,
      ),
    );
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test('an endpoint gets only the types it subscribed to', async () => {
  const hook = await receiver();
  const endpoint = await register(hook.url, ['email.delivered']);
  try {
    // Delivered: both of the message's events are fanned out; then every delivery of the endpoint is over.
    await waitFor(delivered(await sendOne()));
    await waitFor(deliveriesOver(endpoint.id));
    assert.deepEqual(
      hook.received.map((r) => r.body.type),
      ['email.delivered'],
    );
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test('a receiver answering 503: exactly 5 attempts, each due 1, 2, 4 and 8 s after the answer before it, each with its own delivery id', async () => {
  // While an attempt is made, its job row still says when it was due (run_at): read it before answering.
  const dueAt: number[] = [];
  let endpointId = '';
  const hook = await receiver(async () => {
    const { rows } = await t.db.query<{ run_at: Date }>('SELECT run_at FROM jobs WHERE group_key = $1', [endpointId]);
    dueAt.push(rows[0]!.run_at.getTime());
    return 503;
  });
  const endpoint = await register(hook.url, ['email.accepted']);
  endpointId = endpoint.id;
  try {
    await sendOne();
    // The fifth answer ends the delivery (failed, its job gone): no sixth attempt can come.
    await waitFor(deliveriesOver(endpoint.id), 60_000, 50);
    assert.equal(hook.received.length, 5, 'no sixth attempt');
    const recorded = (
      await t.db.query<{ created_at: Date }>(
        `SELECT a.created_at FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
          WHERE d.endpoint_id = $1 ORDER BY a.attempt`,
        [endpoint.id],
      )
    ).rows.map((row) => row.created_at.getTime());
    // Each retry is due exactly its delay after the moment the answer before it was handled, which lies
    // between that attempt's arrival here and the statement that recorded it: exact, whatever the speed.
    for (const [i, delay] of [1, 2, 4, 8].entries()) {
      const handledAt = dueAt[i + 1]! - delay * 1000;
      assert.ok(
        hook.received[i]!.at <= handledAt && handledAt <= recorded[i]!,
        `retry ${i + 1} due ${delay} s after ${handledAt}, not between ${hook.received[i]!.at} and ${recorded[i]}`,
      );
      assert.ok(hook.received[i + 1]!.at >= dueAt[i + 1]!, `attempt ${i + 2} came before it was due`);
    }
    assert.equal(new Set(hook.received.map((r) => r.headers['x-service-delivery-id'])).size, 5);
    assert.equal(new Set(hook.received.map((r) => r.body.id)).size, 1, 'the event id stays the same');
    const deliveries = (
      await t.app.inject({ method: 'GET', url: `/webhooks/${endpoint.id}/deliveries`, headers: bearer(org.session) })
    ).json().data;
    assert.equal(deliveries[0].status, 'failed');
    assert.equal(deliveries[0].attempts.length, 5);
    assert.equal(deliveries[0].attempts[0].status_code, 503);
    assert.equal(deliveries[0].attempts[0].response.length, 1024, 'the first 1 KiB of the answer is kept');
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test('a 4xx (other than 408/429) or a 3xx fails at once; a 429 is retried', async () => {
  for (const [status, attempts] of [
    [400, 1],
    [410, 1],
    [302, 1],
    [429, 2],
  ] as const) {
    let calls = 0;
    const hook = await receiver(() => (++calls === 1 ? status : 200));
    const endpoint = await register(hook.url, ['email.accepted']);
    try {
      await sendOne();
      await waitFor(deliveriesOver(endpoint.id));
      assert.equal(hook.received.length, attempts, `answer ${status}`);
    } finally {
      await remove(endpoint.id);
      await hook.close();
    }
  }
});

test('deleting an endpoint drops its pending deliveries', async () => {
  // The first attempt is answered (503) only once the endpoint is deleted: no retry can come before.
  let answerFirst!: (status: number) => void;
  const firstAnswer = new Promise<number>((resolve) => (answerFirst = resolve));
  const hook = await receiver(() => firstAnswer);
  const endpoint = await register(hook.url, ['email.accepted']);
  await sendOne();
  await waitFor(() => hook.received.length >= 1);
  assert.equal((await remove(endpoint.id)).statusCode, 200);
  const jobsLeft = async () => (await t.db.query(`SELECT 1 FROM jobs WHERE group_key = $1`, [endpoint.id])).rowCount;
  assert.equal(await jobsLeft(), 0);
  answerFirst(503);
  // Its retry would have been due 1 s after the answer, had the answer kept the job.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  assert.equal(await jobsLeft(), 0);
  assert.equal(hook.received.length, 1);
  await hook.close();
});

test('a rotated secret: both secrets sign for 24 hours; replay sends the same event again', async () => {
  const hook = await receiver();
  const endpoint = await register(hook.url, ['email.accepted']);
  try {
    const rotated = await rotate(endpoint.id);
    assert.notEqual(rotated.signing_secret, endpoint.signing_secret);
    await sendOne();
    await waitFor(() => hook.received.length >= 1);
    const request = hook.received[0]!;
    const header = String(request.headers['x-service-signature']);
    assert.match(header, /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    stripe.webhooks.constructEvent(request.raw, header, rotated.signing_secret);
    stripe.webhooks.constructEvent(request.raw, header, endpoint.signing_secret);

    const deliveries = (
      await t.app.inject({ method: 'GET', url: `/webhooks/${endpoint.id}/deliveries`, headers: bearer(org.session) })
    ).json().data;
    const replay = await t.app.inject({
      method: 'POST',
      url: `/webhooks/${endpoint.id}/deliveries/${deliveries[0].id}/replay`,
      headers: bearer(org.session),
    });
    assert.equal(replay.statusCode, 200, replay.body);
    await waitFor(() => hook.received.length >= 2);
    assert.equal(hook.received[1]!.body.id, request.body.id);
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test('a slow endpoint does not hold up another', async () => {
  const slow = await receiver(() => 'hang');
  const fast = await receiver();
  const a = await register(slow.url, ['email.accepted']);
  const b = await register(fast.url, ['email.accepted']);
  try {
    // The slow endpoint never answers while the test runs, so it holds its two slots throughout: the fast
    // one gets everything all the same, and the slow one no third request.
    for (let i = 0; i < 10; i++) await sendOne();
    await waitFor(() => fast.received.length >= 10, 20_000);
    assert.ok(
      slow.received.length <= 2,
      `at most 2 requests in flight to the slow endpoint, saw ${slow.received.length}`,
    );
  } finally {
    await remove(a.id);
    await remove(b.id);
    await slow.close();
    await fast.close();
  }
});

test('two webhook workers and a backlog for one endpoint: never more requests in flight than its limit, each event once', async () => {
  // Both workers take the endpoint's jobs (a finished job's slot is handed to the next due one): the
  // limit holds across them, and every event is sent once.
  const second = await startWebhookDelivery(t.db, t.config, log);
  let inFlight = 0;
  let most = 0;
  const ids: string[] = [];
  // The first request is held until a second is in flight beside it, so the limit is reached whatever
  // the speed; every other is answered after 20 ms.
  let bothInFlight!: () => void;
  const pair = new Promise<void>((resolve) => (bothInFlight = resolve));
  const server = createServer((req, res) => {
    inFlight += 1;
    most = Math.max(most, inFlight);
    if (most >= 2) bothInFlight();
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on(
      'end',
      () =>
        void pair.then(() =>
          setTimeout(() => {
            ids.push((JSON.parse(raw) as { id: string }).id);
            inFlight -= 1;
            res.end('ok');
          }, 20),
        ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = await register(`http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, [
    'email.accepted',
  ]);
  try {
    // One batch: its 30 events are queued at once, a backlog for both workers.
    const batch = await sendBatch(
      t.app,
      org.fullKey,
      Array.from({ length: 30 }, () => message(org, { to: 'hooked@example.com' })),
    );
    assert.equal(batch.statusCode, 200, batch.body);
    await waitFor(() => ids.length >= 30, 15_000);
    await waitFor(async () => inFlight === 0 && (await deliveriesOver(endpoint.id)()));
    assert.equal(ids.length, 30);
    assert.equal(new Set(ids).size, 30);
    assert.equal(most, 2, `requests in flight at once: ${most}`);
  } finally {
    await second.close();
    await remove(endpoint.id);
    await new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
  }
});

test('an answer with characters the database cannot store is recorded with them replaced, once', async () => {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok\u0000done'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = await register(`http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, [
    'email.accepted',
  ]);
  try {
    await sendOne();
    const attempts = async () =>
      (
        await t.db.query<{ response: string; status: string }>(
          `SELECT a.response, d.status FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
            WHERE d.endpoint_id = $1`,
          [endpoint.id],
        )
      ).rows;
    await waitFor(deliveriesOver(endpoint.id));
    assert.deepEqual(await attempts(), [{ response: 'ok\uFFFDdone', status: 'succeeded' }]);
  } finally {
    await remove(endpoint.id);
    await new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
  }
});

test('domain and template changes are events too, fanned out like the email ones', async () => {
  const hook = await receiver();
  const endpoint = await register(hook.url, [
    'domain.created',
    'domain.deleted',
    'template.created',
    'template.deleted',
  ]);
  try {
    const domain = await t.app.inject({
      method: 'POST',
      url: '/domains',
      headers: bearer(org.fullKey),
      payload: { name: 'events.example' },
    });
    const template = await t.app.inject({
      method: 'POST',
      url: '/templates',
      headers: bearer(org.fullKey),
      payload: { name: 'Welcome', text: 'Hi' },
    });
    await t.app.inject({ method: 'DELETE', url: `/templates/${template.json().id}`, headers: bearer(org.fullKey) });
    await t.app.inject({ method: 'DELETE', url: `/domains/${domain.json().id}`, headers: bearer(org.fullKey) });
    // Email events: not subscribed. Once the message is delivered all its events are fanned out, and once
    // the endpoint's deliveries are over nothing more can come.
    await waitFor(delivered(await sendOne()));
    await waitFor(deliveriesOver(endpoint.id));
    const got = hook.received.map((r) => [r.body.type, r.body.data.name]).sort();
    assert.deepEqual(got, [
      ['domain.created', 'events.example'],
      ['domain.deleted', 'events.example'],
      ['template.created', 'Welcome'],
      ['template.deleted', 'Welcome'],
    ]);
    // A template's events carry its dates, as every other object's do.
    const created = hook.received.find((r) => r.body.type === 'template.created')!.body.data;
    assert.deepEqual(Object.keys(created).sort(), ['created_at', 'id', 'name', 'updated_at']);
    assert.equal(new Date(String(created.created_at)).toISOString(), created.created_at);
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

const header = (request: Received, name: string) => String(request.headers[name]);

/**
 * Verifies one received request with the secret in all three ways a receiver would: Resend's SDK,
 * standardwebhooks and Stripe's library. Returns, per verifier, whether it accepted the request (each
 * also has to return the body's event).
 */
function verifyAll(request: Received, secret: string, raw = request.raw) {
  const attempt = (verify: () => unknown) => {
    try {
      assert.equal((verify() as { id?: unknown }).id, request.body.id);
      return true;
    } catch (error) {
      if (error instanceof assert.AssertionError) throw error;
      return false;
    }
  };
  return {
    resend: attempt(() =>
      resend.webhooks.verify({
        payload: raw,
        headers: {
          id: header(request, 'webhook-id'),
          timestamp: header(request, 'webhook-timestamp'),
          signature: header(request, 'webhook-signature'),
        },
        webhookSecret: secret,
      }),
    ),
    standardwebhooks: attempt(() => new Webhook(secret).verify(raw, request.headers as Record<string, string>)),
    stripe: attempt(() => stripe.webhooks.constructEvent(raw, header(request, 'x-service-signature'), secret)),
  };
}
const ALL = { resend: true, standardwebhooks: true, stripe: true };
const NONE = { resend: false, standardwebhooks: false, stripe: false };
const otherSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

test('webhook-signature is the Standard Webhooks scheme: the published test vector', () => {
  assert.equal(
    standardSignatureHeader(
      ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
      'msg_p5jXN8AQM9LWM0D4loKWxJek',
      1614265330,
      '{"test": 2432232314}',
    ),
    'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  );
});

test('every delivery carries the Standard Webhooks headers: Resend, standardwebhooks and Stripe verify it; a wrong secret or a changed body fails all three', async () => {
  const hook = await receiver();
  const endpoint = await register(hook.url);
  try {
    await sendOne();
    await waitFor(() => hook.received.some((r) => r.body.type === 'email.delivered'));
    assert.ok(hook.received.length >= 2);
    for (const request of hook.received) {
      assert.equal(header(request, 'webhook-id'), request.body.id, 'webhook-id is the event id');
      assert.match(header(request, 'webhook-id'), /^evt_[0-9a-f-]{36}$/);
      const t = /^t=(\d+),/.exec(header(request, 'x-service-signature'))?.[1];
      assert.equal(header(request, 'webhook-timestamp'), t, 'one timestamp for both schemes');
      assert.ok(Math.abs(Number(t) - Date.now() / 1000) < 30);
      assert.match(header(request, 'webhook-signature'), /^v1,[A-Za-z0-9+/]{43}=$/);
      // The spec's headers are still there, unchanged.
      assert.equal(request.headers['x-service-event-type'], request.body.type);
      assert.match(header(request, 'x-service-delivery-id'), /^[0-9a-f-]{36}$/);

      assert.deepEqual(verifyAll(request, endpoint.signing_secret), ALL);
      assert.deepEqual(verifyAll(request, otherSecret()), NONE, 'another secret verifies nothing');
      assert.deepEqual(
        verifyAll(request, endpoint.signing_secret, request.raw.replace('hooked', 'hacked')),
        NONE,
        'a changed body verifies nothing',
      );
    }
    // A webhook-id other than the one signed fails too: the id is part of what is signed.
    const first = hook.received[0]!;
    const otherId = { ...first, headers: { ...first.headers, 'webhook-id': hook.received[1]!.body.id } };
    assert.equal(verifyAll(otherId, endpoint.signing_secret).standardwebhooks, false);
    assert.equal(verifyAll(otherId, endpoint.signing_secret).resend, false);
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test('a rotation: both secrets verify with all three verifiers for 24 hours, then only the new one', async () => {
  const hook = await receiver();
  const endpoint = await register(hook.url, ['email.accepted']);
  try {
    const rotated = await rotate(endpoint.id);
    await sendOne();
    await waitFor(() => hook.received.length >= 1);
    const during = hook.received[0]!;
    assert.match(header(during, 'webhook-signature'), /^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual(verifyAll(during, rotated.signing_secret), ALL);
    assert.deepEqual(verifyAll(during, endpoint.signing_secret), ALL);
    assert.deepEqual(verifyAll(during, otherSecret()), NONE);

    // The 24 hours are over: the previous secret signs no more.
    await t.db.query(
      `UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`,
      [endpoint.id],
    );
    await sendOne();
    await waitFor(() => hook.received.length >= 2);
    const later = hook.received[1]!;
    assert.match(header(later, 'webhook-signature'), /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual(verifyAll(later, rotated.signing_secret), ALL);
    assert.deepEqual(verifyAll(later, endpoint.signing_secret), NONE);
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test('webhook-id is the same on every attempt of a retried delivery and on its replay; each attempt verifies', async () => {
  let calls = 0;
  const hook = await receiver(() => (++calls <= 2 ? 503 : 200));
  const endpoint = await register(hook.url, ['email.accepted']);
  try {
    await sendOne();
    await waitFor(() => hook.received.length >= 3, 10_000, 50);
    const attempts = hook.received.slice(0, 3);
    assert.equal(new Set(attempts.map((r) => header(r, 'webhook-id'))).size, 1, 'one webhook-id for the delivery');
    assert.equal(header(attempts[0]!, 'webhook-id'), attempts[0]!.body.id);
    assert.equal(new Set(attempts.map((r) => header(r, 'x-service-delivery-id'))).size, 3, 'one delivery id each');
    const stamps = attempts.map((r) => Number(header(r, 'webhook-timestamp')));
    assert.ok(stamps[2]! > stamps[0]!, `each attempt is signed at its own time: ${stamps.join(', ')}`);
    for (const request of attempts) assert.deepEqual(verifyAll(request, endpoint.signing_secret), ALL);

    // The answered attempt is recorded just after the answer, in a batch with others.
    let deliveries: Array<{ id: string; status: string }> = [];
    await waitFor(async () => {
      deliveries = (
        await t.app.inject({ method: 'GET', url: `/webhooks/${endpoint.id}/deliveries`, headers: bearer(org.session) })
      ).json().data;
      return deliveries[0]?.status === 'succeeded';
    });
    const replay = await t.app.inject({
      method: 'POST',
      url: `/webhooks/${endpoint.id}/deliveries/${deliveries[0]!.id}/replay`,
      headers: bearer(org.session),
    });
    assert.equal(replay.statusCode, 200, replay.body);
    await waitFor(() => hook.received.length >= 4);
    const replayed = hook.received[3]!;
    assert.equal(header(replayed, 'webhook-id'), header(attempts[0]!, 'webhook-id'), 'a replay keeps the webhook-id');
    assert.deepEqual(verifyAll(replayed, endpoint.signing_secret), ALL);
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

let address: Promise<string> | undefined;
/** The app's address on loopback, for Resend's SDK (it listens once, for the tests that need it). */
const listening = () => (address ??= t.app.listen({ port: 0, host: '127.0.0.1' }));

/** Every answer `fetch` gets while `body` runs (the SDK's own requests, on the wire), to check each one. */
async function recordingAnswers<T>(body: () => Promise<T>) {
  const answers: Array<{ method: string; path: string; status: number; body: unknown }> = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const response = await realFetch(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input));
    const text = await response.clone().text();
    answers.push({
      method: init?.method ?? 'GET',
      path: url.pathname + url.search,
      status: response.status,
      body: text ? JSON.parse(text) : undefined,
    });
    return response;
  };
  try {
    return { result: await body(), answers };
  } finally {
    globalThis.fetch = realFetch;
  }
}

test("Resend's SDK: create, get, list in pages, update and remove, each answer valid by Resend's OpenAPI document", async () => {
  const base = await listening();
  // Creating, reading and changing take a full_access key; listing and removing a dashboard session,
  // which the SDK sends as its key.
  const byKey = new Resend(org.fullKey, { baseUrl: base });
  const bySession = new Resend(org.session, { baseUrl: base });
  const createBody = {
    endpoint: 'http://127.0.0.1:9/sdk',
    events: ['email.sent', 'email.delivered', 'email.received'],
  };
  assert.deepEqual(requestProblems('POST', '/webhooks', createBody), []);
  const { answers } = await recordingAnswers(async () => {
    const created = await byKey.webhooks.create(createBody as Parameters<typeof byKey.webhooks.create>[0]);
    assert.equal(created.error, null, JSON.stringify(created.error));
    assert.equal(created.data!.object, 'webhook');
    assert.match(created.data!.signing_secret, /^whsec_/);
    const id = created.data!.id;

    const read = await byKey.webhooks.get(id);
    assert.equal(read.error, null, JSON.stringify(read.error));
    assert.deepEqual(
      [read.data!.endpoint, read.data!.events, read.data!.status, read.data!.signing_secret],
      [createBody.endpoint, createBody.events, 'enabled', created.data!.signing_secret],
    );

    const update = { status: 'disabled' as const, events: ['email.bounced' as const] };
    assert.deepEqual(requestProblems('PATCH', `/webhooks/${id}`, update), []);
    const updated = await byKey.webhooks.update(id, update);
    assert.equal(updated.error, null, JSON.stringify(updated.error));
    assert.deepEqual([updated.data!.object, updated.data!.id], ['webhook', id]);
    const after = await byKey.webhooks.get(id);
    assert.deepEqual([after.data!.status, after.data!.events], ['disabled', ['email.bounced']]);
    await byKey.webhooks.update(id, { status: 'enabled' });
    assert.equal((await bySession.webhooks.get(id)).data!.status, 'enabled', 'a session reads it too');
    const listByKey = await byKey.webhooks.list();
    assert.equal(listByKey.error?.name, 'session_required', "listing stays a dashboard session's");

    // Three more, then pages of two, newest first, going older with `after` and back with `before`.
    for (const n of [1, 2, 3])
      await byKey.webhooks.create({ endpoint: `http://127.0.0.1:9/sdk${n}`, events: ['email.sent'] });
    const all = await bySession.webhooks.list();
    assert.equal(all.error, null, JSON.stringify(all.error));
    assert.equal(all.data!.has_more, false);
    const ids = all.data!.data.map((webhook) => webhook.id);
    assert.ok(ids.length >= 4);
    assert.doesNotMatch(JSON.stringify(all.data), /whsec_/, 'no secret in a listing');
    const first = await bySession.webhooks.list({ limit: 2 });
    assert.deepEqual([first.data!.has_more, first.data!.data.map((w) => w.id)], [true, ids.slice(0, 2)]);
    const second = await bySession.webhooks.list({ limit: 2, after: ids[1]! });
    assert.deepEqual(
      second.data!.data.map((w) => w.id),
      ids.slice(2, 4),
    );
    assert.equal(second.data!.has_more, ids.length > 4);
    const back = await bySession.webhooks.list({ limit: 1, before: ids[2]! });
    assert.deepEqual([back.data!.has_more, back.data!.data.map((w) => w.id)], [true, [ids[1]]]);

    for (const other of ids) {
      const removed = await bySession.webhooks.remove(other);
      assert.equal(removed.error, null, JSON.stringify(removed.error));
      assert.deepEqual([removed.data!.object, removed.data!.id, removed.data!.deleted], ['webhook', other, true]);
    }
    const gone = await bySession.webhooks.get(id);
    assert.equal(gone.error?.name, 'not_found');
  });
  const checked = answers.filter((answer) => answer.status < 300);
  assert.ok(checked.length >= 14, `${checked.length} answers`);
  for (const answer of checked) {
    assert.deepEqual(
      responseProblems(answer.method, answer.path, answer.status, answer.body),
      [],
      `${answer.method} ${answer.path} ${answer.status}: ${JSON.stringify(answer.body)}`,
    );
  }
});

test('bad input to the endpoint routes is a 400 in the error envelope naming the field, never a 500', async () => {
  const endpoint = await register('http://127.0.0.1:9/bad');
  try {
    // [method, url, body, the field named]; a missing field is missing_required_field, the rest validation_error.
    const cases: Array<[string, string, unknown, string | undefined]> = [
      ['PATCH', `/webhooks/${endpoint.id}`, { status: 'paused' }, 'status'],
      ['PATCH', `/webhooks/${endpoint.id}`, { enabled: false }, undefined],
      ['GET', '/webhooks?limit=0', undefined, 'limit'],
      ['GET', '/webhooks?limit=101', undefined, 'limit'],
      ['GET', `/webhooks?after=${endpoint.id}&before=${endpoint.id}`, undefined, 'before'],
      ['GET', '/webhooks?after=00000000-0000-0000-0000-000000000000', undefined, 'after'],
      ['GET', '/webhooks?before=not-an-id', undefined, 'before'],
      ['POST', `/webhooks/${endpoint.id}/test`, { type: 'email.exploded' }, 'type'],
      ['POST', `/webhooks/${endpoint.id}/test`, {}, 'type'],
      ['POST', `/webhooks/${endpoint.id}/deliveries/replay`, { since: 'yesterday' }, 'since'],
      ['POST', `/webhooks/${endpoint.id}/deliveries/replay`, {}, 'since'],
    ];
    for (const [method, url, payload, field] of cases) {
      const res = await t.app.inject({
        method: method as 'GET',
        url,
        headers: bearer(org.session),
        ...(payload === undefined ? {} : { payload: payload as object }),
      });
      assert.equal(res.statusCode, 400, `${method} ${url} ${JSON.stringify(payload)}: ${res.body}`);
      const missing = payload !== undefined && field !== undefined && !(field in (payload as object));
      assert.equal(res.json().name, missing ? 'missing_required_field' : 'validation_error', res.body);
      if (field) assert.equal(res.json().field, field, `${method} ${url} ${JSON.stringify(payload)}: ${res.body}`);
    }
  } finally {
    await remove(endpoint.id);
  }
});

const deliveriesOf = async (endpointId: string) =>
  (
    await t.app.inject({ method: 'GET', url: `/webhooks/${endpointId}/deliveries`, headers: bearer(org.session) })
  ).json().data as Array<{
    id: string;
    event_id: string;
    type: string;
    status: string;
    failure: string | null;
    replay_of: string | null;
    test: boolean;
    payload: { id: string; type: string; test?: boolean; data: Record<string, unknown> };
    attempts: Array<{ status_code: number | null; response: string | null }>;
  }>;
const postAsSession = (url: string, payload?: object) =>
  t.app.inject({ method: 'POST', url, headers: bearer(org.session), ...(payload ? { payload } : {}) });

test('a test event of every catalog type: signed like any event, marked "test": true, its sample data valid by Resend\'s schema for the type; the deliveries list shows the body sent and the answer', async () => {
  const hook = await receiver();
  const endpoint = await register(hook.url, ['email.delivered']);
  try {
    for (const type of EVENT_TYPES) {
      const res = await postAsSession(`/webhooks/${endpoint.id}/test`, { type });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual([res.json().object, res.json().type, res.json().test], ['webhook_delivery', type, true]);
    }
    // Any type from the catalog, whether or not the endpoint subscribes to it.
    await waitFor(() => hook.received.length === EVENT_TYPES.length, 20_000);
    await waitFor(deliveriesOver(endpoint.id));
    assert.deepEqual(hook.received.map((r) => r.body.type).sort(), [...EVENT_TYPES].sort());
    const deliveries = await deliveriesOf(endpoint.id);
    for (const request of hook.received) {
      assert.deepEqual(verifyAll(request, endpoint.signing_secret), ALL);
      assert.equal((request.body as { test?: unknown }).test, true);
      assert.equal(request.body.data.email_id ?? request.body.data.id, '00000000-0000-0000-0000-000000000000');
      const problems = webhookProblems(request.body);
      if (problems) assert.deepEqual(problems, [], `${request.body.type}: ${request.raw}`);
      const delivery = deliveries.find((d) => d.event_id === request.body.id)!;
      assert.deepEqual(delivery.payload, JSON.parse(request.raw), 'the deliveries list shows the body sent');
      assert.deepEqual([delivery.status, delivery.test], ['succeeded', true]);
      assert.deepEqual([delivery.attempts[0]!.status_code, delivery.attempts[0]!.response], [200, 'ok']);
    }
    assert.equal(
      hook.received.filter((r) => webhookProblems(r.body) !== undefined).length,
      17,
      "every one of Resend's 17 types was checked",
    );
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test('disabling: no new deliveries, the pending ones fail as endpoint_disabled; enabled again, "replay all failed since" sends each failed delivery once, and a double click sends nothing twice', async () => {
  let answer = 503;
  const hook = await receiver(() => answer);
  const endpoint = await register(hook.url, ['email.accepted']);
  try {
    const start = new Date(Date.now() - 1000);
    // One delivery fails outright (410); another is still being retried (503) when the endpoint is disabled.
    answer = 410;
    await sendOne();
    await waitFor(deliveriesOver(endpoint.id));
    answer = 503;
    await sendOne();
    await waitFor(async () =>
      (await deliveriesOf(endpoint.id)).some((d) => d.attempts.length >= 1 && d.status === 'pending'),
    );
    const disabled = await t.app.inject({
      method: 'PATCH',
      url: `/webhooks/${endpoint.id}`,
      headers: bearer(org.session),
      payload: { status: 'disabled' },
    });
    assert.deepEqual([disabled.statusCode, disabled.json().status], [200, 'disabled']);
    const afterDisable = await deliveriesOf(endpoint.id);
    // Newest first: the one disabled while it waited, then the one refused.
    assert.deepEqual(
      afterDisable.map((d) => [d.status, d.failure]),
      [
        ['failed', 'endpoint_disabled'],
        ['failed', null],
      ],
    );
    const { rowCount: jobs } = await t.db.query('SELECT 1 FROM jobs WHERE group_key = $1', [endpoint.id]);
    assert.equal(jobs, 0, 'no job left for the disabled endpoint');

    // While disabled: events are not fanned out to it; test events and replays are refused.
    const received = hook.received.length;
    await waitFor(delivered(await sendOne()));
    assert.equal((await deliveriesOf(endpoint.id)).length, 2, 'no delivery for an event while disabled');
    for (const [url, payload] of [
      [`/webhooks/${endpoint.id}/test`, { type: 'email.accepted' }],
      [`/webhooks/${endpoint.id}/deliveries/replay`, { since: start.toISOString() }],
      [`/webhooks/${endpoint.id}/deliveries/${afterDisable[0]!.id}/replay`, undefined],
    ] as const) {
      const refused = await postAsSession(url, payload);
      assert.deepEqual([refused.statusCode, refused.json().name], [400, 'invalid_state'], url);
    }
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(hook.received.length, received, 'the retry that was due is not made');

    await t.app.inject({
      method: 'PATCH',
      url: `/webhooks/${endpoint.id}`,
      headers: bearer(org.session),
      payload: { status: 'enabled' },
    });
    answer = 200;
    // A time after both deliveries replays nothing.
    const none = await postAsSession(`/webhooks/${endpoint.id}/deliveries/replay`, {
      since: new Date(Date.now() + 60_000).toISOString(),
    });
    assert.deepEqual([none.statusCode, none.json().replayed], [200, 0], none.body);
    // One request replays a bounded batch, oldest first, and says that more remain.
    const first = await replayFailedSince(t.db, org.id, endpoint.id, start, 1);
    assert.deepEqual([first.replayed, first.has_more], [1, true]);
    // A double click: two requests at once replay each remaining failed delivery once between them.
    const clicks = await Promise.all([
      postAsSession(`/webhooks/${endpoint.id}/deliveries/replay`, { since: start.toISOString() }),
      postAsSession(`/webhooks/${endpoint.id}/deliveries/replay`, { since: start.toISOString() }),
    ]);
    assert.deepEqual(
      clicks.map((click) => click.statusCode),
      [200, 200],
    );
    assert.deepEqual(clicks.map((click) => click.json().replayed).sort(), [0, 1]);
    assert.deepEqual(
      clicks.map((click) => click.json().has_more),
      [false, false],
    );
    assert.equal(clicks[0]!.json().object, 'webhook_replay');
    await waitFor(deliveriesOver(endpoint.id));
    const replays = hook.received.slice(received);
    assert.equal(replays.length, 2, 'each failed delivery sent once more');
    assert.deepEqual(
      new Set(replays.map((r) => r.body.id)),
      new Set(afterDisable.map((d) => d.event_id)),
      'the same events, with their ids',
    );
    const listed = await deliveriesOf(endpoint.id);
    assert.equal(listed.filter((d) => d.replay_of !== null && d.status === 'succeeded').length, 2);
    const again = await postAsSession(`/webhooks/${endpoint.id}/deliveries/replay`, { since: start.toISOString() });
    assert.equal(again.json().replayed, 0, 'replayed deliveries are not replayed again');
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test("Resend's SDK: webhooks.events list, get, attempts and replay name the endpoint's deliveries, in the SDK's shapes", async () => {
  let calls = 0;
  const hook = await receiver(() => (++calls === 1 ? 503 : 200));
  const endpoint = await register(hook.url, ['email.accepted']);
  const sdk = new Resend(org.session, { baseUrl: await listening() });
  try {
    const sent = await postAsSession(`/webhooks/${endpoint.id}/test`, { type: 'email.delivered' });
    assert.equal(sent.statusCode, 200, sent.body);
    await waitFor(deliveriesOver(endpoint.id), 10_000);
    assert.equal(hook.received.length, 2, 'a 503, then a 200');

    const listed = await sdk.webhooks.events.list({ webhookId: endpoint.id });
    assert.equal(listed.error, null, JSON.stringify(listed.error));
    assert.equal(listed.data!.has_more, false);
    const [event] = listed.data!.data;
    assert.deepEqual(Object.keys(event!).sort(), ['created_at', 'id', 'status', 'type']);
    assert.deepEqual([event!.id, event!.type, event!.status], [sent.json().id, 'email.delivered', 'success']);

    const read = await sdk.webhooks.events.get({ webhookId: endpoint.id, eventId: event!.id });
    assert.equal(read.error, null, JSON.stringify(read.error));
    assert.deepEqual(
      [read.data!.object, read.data!.status, read.data!.next_attempt_at],
      ['webhook_event', 'success', null],
    );
    assert.deepEqual(read.data!.payload, JSON.parse(hook.received[1]!.raw), 'the body that was sent');

    const attempts = await sdk.webhooks.events.attempts.list({ webhookId: endpoint.id, eventId: event!.id });
    assert.equal(attempts.error, null, JSON.stringify(attempts.error));
    assert.deepEqual(
      attempts.data!.data.map((a) => [a.http_status_code, a.response.slice(0, 2)]),
      [
        [200, 'ok'],
        [503, 'xx'],
      ],
      'newest first, each with the start of the answer',
    );
    for (const attempt of attempts.data!.data) {
      assert.match(attempt.id, /^[0-9a-f-]{36}$/);
      assert.ok(!Number.isNaN(Date.parse(attempt.sent_at)));
    }
    const firstPage = await sdk.webhooks.events.attempts.list({ webhookId: endpoint.id, eventId: event!.id, limit: 1 });
    assert.deepEqual([firstPage.data!.has_more, firstPage.data!.data[0]!.http_status_code], [true, 200]);
    const nextPage = await sdk.webhooks.events.attempts.list({
      webhookId: endpoint.id,
      eventId: event!.id,
      limit: 1,
      after: firstPage.data!.data[0]!.id,
    });
    assert.deepEqual([nextPage.data!.has_more, nextPage.data!.data[0]!.http_status_code], [false, 503]);

    const replayed = await sdk.webhooks.events.replay({ webhookId: endpoint.id, eventId: event!.id });
    assert.equal(replayed.error, null, JSON.stringify(replayed.error));
    assert.equal(replayed.data!.object, 'webhook_event');
    assert.notEqual(replayed.data!.id, event!.id, 'a replay is a new delivery');
    await waitFor(() => hook.received.length === 3);
    assert.equal(hook.received[2]!.body.id, hook.received[1]!.body.id, 'with the same evt_ id');
    const after = await sdk.webhooks.events.list({ webhookId: endpoint.id, limit: 1 });
    assert.deepEqual([after.data!.has_more, after.data!.data[0]!.id], [true, replayed.data!.id]);

    const missing = await sdk.webhooks.events.get({ webhookId: endpoint.id, eventId: randomUUID() });
    assert.equal(missing.error?.name, 'not_found');
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});

test('a delivery queued for an endpoint disabled meanwhile (a fan-out that raced the switch) fails as endpoint_disabled, unsent, instead of waiting for ever', async () => {
  const hook = await receiver();
  const endpoint = await register(hook.url, ['email.accepted']);
  try {
    await t.app.inject({
      method: 'PATCH',
      url: `/webhooks/${endpoint.id}`,
      headers: bearer(org.session),
      payload: { status: 'disabled' },
    });
    // What such a fan-out leaves: a pending delivery and its job, committed after the switch.
    await t.db.query(
      `WITH deliveries AS (
         INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload)
         VALUES ($1, $2, gen_random_uuid(), 'email.accepted', '{"type":"email.accepted","created_at":"2026-01-01T00:00:00Z"}')
         RETURNING id, endpoint_id
       ),
       queued AS (${queueDeliveriesFrom('deliveries')})
       SELECT 1`,
      [org.id, endpoint.id],
    );
    await waitFor(deliveriesOver(endpoint.id));
    const [delivery] = await deliveriesOf(endpoint.id);
    assert.deepEqual(
      [delivery!.status, delivery!.failure, delivery!.attempts.length],
      ['failed', 'endpoint_disabled', 0],
    );
    assert.equal(hook.received.length, 0);
  } finally {
    await remove(endpoint.id);
    await hook.close();
  }
});
