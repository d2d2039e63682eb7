// POST /emails/batch: independent entries, one answer per entry in order, refusals in place, strict mode.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { counts, frozenRateClock, message, sendBatch, setLimits } from './helpers/emails.ts';

let t: TestApp;
let org: TestOrganization;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'batch');
});
after(() => t.close());
beforeEach(() => setLimits(t.db, org.id, { rateLimit: 1000, monthlyQuota: 1_000_000 }));

test('every entry gets an id, in submission order, and is stored and queued', async () => {
  const entries = Array.from({ length: 100 }, (_, i) =>
    message(org, { subject: `n${i}`, to: [`a${i}@example.com`, `b${i}@example.com`] }),
  );
  const before = await counts(t.db, org.id);
  const res = await sendBatch(t.app, org.sendingKey, entries);
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  assert.equal(body.object, 'list');
  assert.equal(body.errors, undefined);
  assert.equal(body.data.length, 100);
  for (const entry of body.data) assert.deepEqual(Object.keys(entry).sort(), ['id', 'object']);
  const { rows } = await t.db.query<{ id: string; subject: string }>(
    'SELECT id, subject FROM emails WHERE id = ANY($1::uuid[])',
    [body.data.map((d: { id: string }) => d.id)],
  );
  const subjectOf = new Map(rows.map((r) => [r.id, r.subject]));
  assert.deepEqual(
    body.data.map((d: { id: string }) => subjectOf.get(d.id)),
    entries.map((e) => e.subject),
  );
  // A batch of 100 messages of two recipients each costs 200.
  assert.deepEqual(await counts(t.db, org.id), { emails: before.emails + 100, charged: before.charged + 200 });
  const jobs = await t.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM jobs WHERE payload->>'email_id' = ANY($1)",
    [body.data.map((d: { id: string }) => d.id)],
  );
  assert.equal(jobs.rows[0]!.n, 100);
});

test('a bad entry refuses only itself; its place holds an error; errors are listed', async () => {
  const entries = [
    message(org, { subject: 'first' }),
    message(org, { to: 'not an address' }),
    message(org, { template: { id: 'x' } }),
    message(org, { subject: 'fourth', topic_id: 'x' }),
    message(org, { attachments: [{ filename: 'a', content: '!!' }] }),
    message(org, { subject: 'last' }),
  ];
  const before = await counts(t.db, org.id);
  const res = await sendBatch(t.app, org.fullKey, entries);
  assert.equal(res.statusCode, 200, res.body);
  const { data, errors } = res.json();
  assert.equal(data.length, 6);
  assert.deepEqual(
    data.map((d: { object: string }) => d.object),
    ['email', 'error', 'error', 'error', 'error', 'email'],
  );
  assert.deepEqual(
    errors.map((e: { index: number; name: string; statusCode: number }) => [e.index, e.statusCode, e.name]),
    [
      [1, 400, 'validation_error'],
      [2, 400, 'unsupported_in_batch'],
      [3, 400, 'unsupported_in_batch'],
      [4, 400, 'invalid_attachment'],
    ],
  );
  assert.deepEqual(data[1], { object: 'error', id: null, ...errors[0] });
  // template and topic_id are refused in a batch entry, named as the field, whatever else the entry holds.
  assert.equal(errors[1].field, 'template');
  assert.equal(errors[2].field, 'topic_id');
  assert.deepEqual(await counts(t.db, org.id), { emails: before.emails + 2, charged: before.charged + 2 });
});

test('x-batch-validation: strict refuses the whole batch for one bad entry, nothing accepted or charged', async () => {
  const before = await counts(t.db, org.id);
  const res = await sendBatch(
    t.app,
    org.fullKey,
    [message(org), message(org, { to: 'bad' }), message(org, { to: 'worse' })],
    {
      'x-batch-validation': 'strict',
    },
  );
  assert.equal(res.statusCode, 400);
  const body = res.json();
  assert.equal(body.name, 'validation_error');
  assert.equal(body.field, '1.to');
  assert.match(body.message, /^Entry 1: .*and 1 more/);
  assert.deepEqual(await counts(t.db, org.id), before);
  const template = await sendBatch(
    t.app,
    org.fullKey,
    [message(org), message(org, { text: undefined, template: { id: 'x' } })],
    { 'x-batch-validation': 'strict' },
  );
  assert.deepEqual(
    [template.statusCode, template.json().name, template.json().field],
    [400, 'unsupported_in_batch', 'template'],
  );
  assert.match(template.json().message, /^Entry 1: template .*POST \/emails/);
  assert.deepEqual(await counts(t.db, org.id), before);
  const fine = await sendBatch(t.app, org.fullKey, [message(org), message(org)], { 'x-batch-validation': 'strict' });
  assert.equal(fine.statusCode, 200);
  assert.equal(fine.json().data.length, 2);
});

test('whole-request errors: not an array, empty, over 100 entries', async () => {
  const cases: Array<[unknown, string]> = [
    [message(org), 'validation_error'],
    [[], 'validation_error'],
    [Array.from({ length: 101 }, () => message(org)), 'validation_error'],
  ];
  for (const [body, name] of cases) {
    const res = await sendBatch(t.app, org.fullKey, body);
    assert.equal(res.statusCode, 400, res.body);
    assert.equal(res.json().name, name);
  }
});

test('each message counts against the rate limit: a large batch trips it partway; the rest are 429 one by one', async () => {
  await setLimits(t.db, org.id, { rateLimit: 5 });
  // The bucket's clock stands still: the second request finds it empty however long the first one took.
  const clock = frozenRateClock(t.db);
  try {
    const res = await sendBatch(
      t.app,
      org.fullKey,
      Array.from({ length: 8 }, () => message(org)),
    );
    assert.equal(res.statusCode, 200, res.body);
    const { data, errors } = res.json();
    assert.deepEqual(
      data.map((d: { object: string }) => d.object),
      [...Array(5).fill('email'), ...Array(3).fill('error')],
    );
    assert.deepEqual(
      errors.map((e: { index: number; statusCode: number; name: string }) => [e.index, e.statusCode, e.name]),
      [
        [5, 429, 'rate_limit_exceeded'],
        [6, 429, 'rate_limit_exceeded'],
        [7, 429, 'rate_limit_exceeded'],
      ],
    );
    // Spent before the first entry: the whole request is 429, with retry-after.
    const spent = await sendBatch(t.app, org.fullKey, [message(org)]);
    assert.equal(spent.statusCode, 429);
    assert.equal(spent.json().name, 'rate_limit_exceeded');
    assert.ok(Number(spent.headers['retry-after']) >= 1);
  } finally {
    clock.release();
  }
});

test('strict batches are all or nothing for the limits too', async () => {
  await setLimits(t.db, org.id, { rateLimit: 3 });
  const before = await counts(t.db, org.id);
  const res = await sendBatch(
    t.app,
    org.fullKey,
    Array.from({ length: 4 }, () => message(org)),
    { 'x-batch-validation': 'strict' },
  );
  assert.equal(res.statusCode, 429);
  assert.deepEqual(await counts(t.db, org.id), before);
  const ok = await sendBatch(
    t.app,
    org.fullKey,
    Array.from({ length: 3 }, () => message(org)),
    { 'x-batch-validation': 'strict' },
  );
  assert.equal(ok.statusCode, 200, ok.body);
});

test('the monthly quota runs out partway: later entries 429 monthly_quota_exceeded', async () => {
  const { charged } = await counts(t.db, org.id);
  await setLimits(t.db, org.id, { monthlyQuota: charged + 5 });
  const res = await sendBatch(t.app, org.fullKey, [
    message(org, { to: ['a@example.com', 'b@example.com'] }),
    message(org, { to: ['a@example.com', 'b@example.com'] }),
    message(org, { to: ['a@example.com', 'b@example.com'] }),
    message(org),
  ]);
  const { data, errors } = res.json();
  assert.deepEqual(
    data.map((d: { object: string }) => d.object),
    ['email', 'email', 'error', 'error'],
  );
  assert.deepEqual(
    errors.map((e: { name: string }) => e.name),
    ['monthly_quota_exceeded', 'monthly_quota_exceeded'],
  );
  assert.equal((await counts(t.db, org.id)).charged, charged + 4);
});
