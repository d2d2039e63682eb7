// Idempotency-Key on POST /emails and /emails/batch: one key, one send, the same answer replayed within
// 24 hours; and limits shared between processes.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildApp, type App } from '../src/app.ts';
import type { Database } from '../src/platform/db/database.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { counts, frozenRateClock, message, send, sendBatch, setLimits } from './helpers/emails.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let n = 0;
const key = () => `key-${process.pid}-${++n}`;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'idem');
  other = await createTestOrganization(t.db, t.config, 'idem2');
});
after(() => t.close());
beforeEach(() => setLimits(t.db, org.id, { rateLimit: 1000, monthlyQuota: 1_000_000 }));

test('a retry with the same key and body replays the response and sends nothing again', async () => {
  const k = key();
  const first = await send(t.app, org.fullKey, message(org), { 'idempotency-key': k });
  assert.equal(first.statusCode, 200);
  assert.equal(first.headers['idempotent-replayed'], undefined);
  const before = await counts(t.db, org.id);
  // Same body with its keys in another order: the same request.
  const reordered = Object.fromEntries(Object.entries(message(org)).reverse());
  const again = await send(t.app, org.fullKey, reordered, { 'idempotency-key': k });
  assert.equal(again.statusCode, 200);
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.deepEqual(again.json(), first.json());
  assert.deepEqual(await counts(t.db, org.id), before, 'nothing stored or charged by the replay');
});

test('the same key with a different body → 409 invalid_idempotent_request', async () => {
  const k = key();
  await send(t.app, org.fullKey, message(org), { 'idempotency-key': k });
  const res = await send(t.app, org.fullKey, message(org, { subject: 'changed' }), { 'idempotency-key': k });
  assert.equal(res.statusCode, 409);
  assert.equal(res.json().name, 'invalid_idempotent_request');
  const batch = await sendBatch(t.app, org.fullKey, [message(org)], { 'idempotency-key': k });
  assert.equal(batch.json().name, 'invalid_idempotent_request', 'another path is another request');
});

test('a key still in progress → 409 concurrent_idempotent_requests', async () => {
  const k = key();
  await t.db.query(
    "INSERT INTO idempotency_keys (organization_id, key, fingerprint, locked_until) VALUES ($1, $2, $3, now() + interval '1 minute')",
    [org.id, k, 'x'],
  );
  // Fingerprint differs here, but an in-flight claim of the same request is the concurrent case:
  await t.db.query('UPDATE idempotency_keys SET fingerprint = $3 WHERE organization_id = $1 AND key = $2', [
    org.id,
    k,
    (await import('../src/platform/http/idempotency.ts')).requestFingerprint('POST', '/emails', message(org)),
  ]);
  const res = await send(t.app, org.fullKey, message(org), { 'idempotency-key': k });
  assert.equal(res.statusCode, 409);
  assert.equal(res.json().name, 'concurrent_idempotent_requests');
  // Its holder died: once the lease has passed, a retry takes the key over and sends.
  await t.db.query("UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE key = $1", [k]);
  const retry = await send(t.app, org.fullKey, message(org), { 'idempotency-key': k });
  assert.equal(retry.statusCode, 200);
});

test('20 identical requests at once: exactly one message and one charge', async () => {
  const k = key();
  const before = await counts(t.db, org.id);
  const body = message(org, { to: ['a@example.com', 'b@example.com'] });
  const answers = await Promise.all(
    Array.from({ length: 20 }, () => send(t.app, org.fullKey, body, { 'idempotency-key': k })),
  );
  const statuses = answers.map((r) => r.statusCode);
  assert.ok(
    statuses.every((s) => s === 200 || s === 409),
    statuses.join(),
  );
  const ids = new Set(answers.filter((r) => r.statusCode === 200).map((r) => r.json().id));
  assert.equal(ids.size, 1, 'every 200 names the same message');
  for (const r of answers.filter((a) => a.statusCode === 409))
    assert.equal(r.json().name, 'concurrent_idempotent_requests');
  assert.deepEqual(await counts(t.db, org.id), { emails: before.emails + 1, charged: before.charged + 2 });
});

test('keys are scoped to the organization', async () => {
  const k = key();
  const a = await send(t.app, org.fullKey, message(org), { 'idempotency-key': k });
  const b = await send(t.app, other.fullKey, message(other), { 'idempotency-key': k });
  assert.equal(b.statusCode, 200);
  assert.equal(b.headers['idempotent-replayed'], undefined);
  assert.notEqual(a.json().id, b.json().id);
});

test('a key over 256 characters → 400 invalid_idempotency_key; 256 is fine', async () => {
  const res = await send(t.app, org.fullKey, message(org), { 'idempotency-key': 'k'.repeat(257) });
  assert.equal(res.statusCode, 400);
  assert.equal(res.json().name, 'invalid_idempotency_key');
  assert.equal((await send(t.app, org.fullKey, message(org), { 'idempotency-key': 'k'.repeat(256) })).statusCode, 200);
});

test('after 24 hours the key is new again', async () => {
  const k = key();
  const first = await send(t.app, org.fullKey, message(org), { 'idempotency-key': k });
  await t.db.query("UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = $1", [k]);
  const later = await send(t.app, org.fullKey, message(org, { subject: 'different is fine now' }), {
    'idempotency-key': k,
  });
  assert.equal(later.statusCode, 200);
  assert.notEqual(later.json().id, first.json().id);
});

test('a 400 is remembered; a 429 is not (a retry after the limit resets can succeed)', async () => {
  const k = key();
  const bad = await send(t.app, org.fullKey, message(org, { to: 'nope' }), { 'idempotency-key': k });
  assert.equal(bad.statusCode, 400);
  const replay = await send(t.app, org.fullKey, message(org, { to: 'nope' }), { 'idempotency-key': k });
  assert.deepEqual([replay.statusCode, replay.headers['idempotent-replayed']], [400, 'true']);
  assert.deepEqual(replay.json(), bad.json());

  const k2 = key();
  await setLimits(t.db, org.id, { monthlyQuota: 0 });
  const limited = await send(t.app, org.fullKey, message(org), { 'idempotency-key': k2 });
  assert.equal(limited.statusCode, 429);
  await setLimits(t.db, org.id, { monthlyQuota: 1_000_000 });
  const retried = await send(t.app, org.fullKey, message(org), { 'idempotency-key': k2 });
  assert.equal(retried.statusCode, 200);
  assert.equal(retried.headers['idempotent-replayed'], undefined);
});

test('batches replay too', async () => {
  const k = key();
  const first = await sendBatch(t.app, org.fullKey, [message(org), message(org, { to: 'bad' })], {
    'idempotency-key': k,
  });
  const before = await counts(t.db, org.id);
  const again = await sendBatch(t.app, org.fullKey, [message(org), message(org, { to: 'bad' })], {
    'idempotency-key': k,
  });
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.deepEqual(again.json(), first.json());
  assert.deepEqual(await counts(t.db, org.id), before);
});

test('a batch whose every entry is invalid is remembered too: a retry replays it at once', async () => {
  const k = key();
  const entries = [message(org, { to: 'bad' }), message(org, { from: 'x@unverified.example' })];
  const first = await sendBatch(t.app, org.fullKey, entries, { 'idempotency-key': k });
  assert.equal(first.statusCode, 200);
  assert.equal(first.json().errors.length, 2);
  const again = await sendBatch(t.app, org.fullKey, entries, { 'idempotency-key': k });
  assert.equal(again.statusCode, 200, again.body);
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.deepEqual(again.json(), first.json());
});

test('two API processes on one database enforce one rate limit and one quota', async () => {
  // A second app with its own connection pool stands for a second process (PGlite: one process only).
  let second: { app: App; db: Database; close(): Promise<void> };
  if (t.db.kind === 'postgres') {
    const { rows } = await t.db.query<{ db: string }>('SELECT current_database() AS db');
    const url = new URL(process.env.DATABASE_URL!);
    url.pathname = `/${rows[0]!.db}`;
    const db = openPostgres(url.toString(), 5);
    const app = await buildApp({ db, config: t.config, logger: false });
    second = { app, db, close: async () => (await app.close(), await db.close()) };
  } else {
    const app = await buildApp({ db: t.db, config: t.config, logger: false });
    second = { app, db: t.db, close: () => app.close() };
  }
  // One message a second, and the bucket's clock stands still in both processes: exactly one of the
  // twelve goes through however long they take, where a bucket per process would let two through.
  const clock = frozenRateClock(t.db, second.db);
  try {
    await setLimits(t.db, org.id, { rateLimit: 1 });
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => send(i % 2 ? t.app : second.app, org.fullKey, message(org))),
    );
    assert.equal(answers.filter((r) => r.statusCode === 200).length, 1, answers.map((r) => r.statusCode).join());
    assert.equal(answers.filter((r) => r.statusCode === 429).length, 11);
  } finally {
    clock.release();
    await second.close();
  }
});

test('near the monthly quota, concurrent sends are counted exactly: never over', async () => {
  const { charged } = await counts(t.db, org.id);
  await setLimits(t.db, org.id, { monthlyQuota: charged + 10 });
  const answers = await Promise.all(Array.from({ length: 25 }, () => send(t.app, org.fullKey, message(org))));
  assert.equal(answers.filter((r) => r.statusCode === 200).length, 10, answers.map((r) => r.statusCode).join());
  for (const r of answers.filter((a) => a.statusCode !== 200)) assert.equal(r.json().name, 'monthly_quota_exceeded');
  assert.equal((await counts(t.db, org.id)).charged, charged + 10);
});
