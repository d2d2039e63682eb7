// The suppression list over the API, and what it does to sending: a listed address is not sent to
// (failed, reason suppressed, email.suppressed); taken off the list, it is sent to again. Every answer
// is checked against Resend's published schema, and the Resend SDK drives the list as it drives Resend's.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { message, send } from './helpers/emails.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';
import { responseProblems } from './helpers/resend-openapi.ts';
import { Resend } from 'resend';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let sink: SmtpSink;
let delivery: TestDelivery;

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  t = await buildTestApp({ MAILROOM_TRANSPORT: 'smtp', MAILROOM_SMTP_URL: sink.url });
  org = await createTestOrganization(t.db, t.config, 'sup');
  other = await createTestOrganization(t.db, t.config, 'sup-other');
  delivery = await startTestDelivery(t);
});
after(async () => {
  await delivery.stop();
  await t.close();
  await sink.close();
});

/** Calls the API; every answer to an operation Resend has must also be one its schema allows. */
const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, token = org.fullKey) => {
  const res = await t.app.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
  assert.deepEqual(
    responseProblems(method, url, res.statusCode, res.json()) ?? [],
    [],
    `${method} ${url}: ${res.body}`,
  );
  return res;
};

test('add, read, list and remove an address; the address is kept lower-cased and bare', async () => {
  const added = await call('POST', '/suppressions', { email: 'Someone.Else@Example.COM' });
  assert.equal(added.statusCode, 201, added.body);
  assert.equal(added.json().email, 'someone.else@example.com');
  assert.equal(added.json().reason, 'manual');

  // Adding it again changes nothing and says so with 200.
  const again = await call('POST', '/suppressions', { email: 'someone.else@example.com' });
  assert.equal(again.statusCode, 200);
  assert.equal(again.json().created_at, added.json().created_at);

  const read = await call('GET', '/suppressions/SOMEONE.ELSE@example.com');
  assert.equal(read.statusCode, 200);
  assert.deepEqual(read.json(), added.json());

  const removed = await call('DELETE', '/suppressions/someone.else@example.com');
  assert.deepEqual(removed.json(), {
    object: 'suppression',
    id: added.json().id,
    email: 'someone.else@example.com',
    deleted: true,
  });
  assert.equal((await call('GET', '/suppressions/someone.else@example.com')).statusCode, 404);
  assert.equal((await call('DELETE', '/suppressions/someone.else@example.com')).statusCode, 404);
});

test('bad input is a 400 in the envelope, an unknown address a 404', async () => {
  for (const payload of [
    {},
    { email: 'not an address' },
    { email: 'Name <a@example.com>' },
    { email: 1 },
    { email: 'a@example.com', reason: 'x' },
  ]) {
    const res = await call('POST', '/suppressions', payload);
    assert.equal(res.statusCode, 400, JSON.stringify(payload));
    assert.match(res.json().name, /^(validation_error|missing_required_field)$/);
  }
  assert.equal((await call('GET', '/suppressions/not-an-address')).json().name, 'not_found');
  for (const query of ['limit=0', 'limit=101', 'limit=x', 'after=nobody@example.com', 'after=junk', 'other=1']) {
    const res = await call('GET', `/suppressions?${query}`);
    assert.equal(res.statusCode, 400, query);
    assert.equal(res.json().name, 'validation_error', query);
  }
});

test('the list pages oldest first, and an organization sees only its own', async () => {
  const addresses = ['p1@example.com', 'p2@example.com', 'p3@example.com'];
  for (const email of addresses) await call('POST', '/suppressions', { email });
  await call('POST', '/suppressions', { email: 'theirs@example.com' }, other.fullKey);

  const first = (await call('GET', '/suppressions?limit=2')).json();
  assert.equal(first.has_more, true);
  const second = (await call('GET', `/suppressions?limit=2&after=${first.data[1].email}`)).json();
  assert.equal(second.has_more, false);
  const listed = [...first.data, ...second.data].map((s: { email: string }) => s.email);
  assert.deepEqual(listed, addresses);

  assert.equal((await call('GET', '/suppressions/theirs@example.com')).statusCode, 404);
  assert.equal((await call('DELETE', '/suppressions/theirs@example.com')).statusCode, 404);
  assert.equal((await call('GET', '/suppressions/theirs@example.com', undefined, other.fullKey)).statusCode, 200);
  for (const email of addresses) await call('DELETE', `/suppressions/${email}`);
});

test('a suppressed address is not sent to and reads failed/suppressed; removed, it is sent to again', async () => {
  await call('POST', '/suppressions', { email: 'blocked@example.com' });
  const events = async (id: string) =>
    (await call('GET', `/emails/${id}/events`)).json().data as Array<{
      type: string;
      recipient?: string;
      data?: { reason?: string };
    }>;

  const res = await send(t.app, org.fullKey, message(org, { to: ['BLOCKED@example.com', 'open@example.com'] }));
  const id = res.json().id as string;
  await waitFor(async () => (await events(id)).filter((e) => e.recipient).length === 2);
  const byRecipient = Object.fromEntries((await events(id)).filter((e) => e.recipient).map((e) => [e.recipient, e]));
  assert.equal(byRecipient['BLOCKED@example.com']?.type, 'failed');
  assert.equal(byRecipient['BLOCKED@example.com']?.data?.reason, 'suppressed');
  assert.equal(byRecipient['open@example.com']?.type, 'delivered');
  assert.ok(sink.transactions.every((tx) => !tx.rcptTo.some((r) => r.toLowerCase() === 'blocked@example.com')));

  await call('DELETE', '/suppressions/blocked@example.com');
  const later = (await send(t.app, org.fullKey, message(org, { to: 'blocked@example.com' }))).json().id as string;
  await waitFor(async () => (await events(later)).some((e) => e.type === 'delivered'));
});

test("each entry has a stable id: read and removed by id or by address; another organization's id is not found", async () => {
  const added = (await call('POST', '/suppressions', { email: 'by-id@example.com' })).json();
  assert.match(added.id, /^[0-9a-f-]{36}$/);
  assert.equal(added.origin, 'manual');
  assert.equal(added.source_id, null);
  const byId = await call('GET', `/suppressions/${added.id}`);
  assert.deepEqual(byId.json(), added);
  assert.deepEqual((await call('GET', '/suppressions/by-id@example.com')).json(), added);
  assert.equal((await call('GET', `/suppressions/${added.id}`, undefined, other.fullKey)).statusCode, 404);
  assert.equal((await call('DELETE', `/suppressions/${added.id}`, undefined, other.fullKey)).statusCode, 404);
  // Listed again after removal, it is a new entry with a new id.
  assert.equal((await call('DELETE', `/suppressions/${added.id}`)).json().id, added.id);
  const again = (await call('POST', '/suppressions', { email: 'by-id@example.com' })).json();
  assert.notEqual(again.id, added.id);
  await call('DELETE', `/suppressions/${again.id}`);
});

test('batch add: all or nothing, one answer per address in order; an address already listed keeps its entry', async () => {
  const listed = (await call('POST', '/suppressions', { email: 'old@example.com' })).json();
  const res = await call('POST', '/suppressions/batch/add', {
    emails: ['One@Example.com', 'old@example.com', 'two@example.com', 'one@example.com'],
  });
  assert.equal(res.statusCode, 201, res.body);
  const ids = res.json().data.map((entry: { object: string; id: string }) => entry.id);
  assert.equal(ids.length, 4);
  assert.equal(ids[1], listed.id);
  assert.equal(ids[0], ids[3]);
  assert.equal((await call('GET', `/suppressions/${ids[0]}`)).json().email, 'one@example.com');
  assert.equal((await call('GET', `/suppressions/${ids[2]}`)).json().email, 'two@example.com');

  // One bad address refuses the whole call, naming it; nothing is added.
  const refused = await call('POST', '/suppressions/batch/add', { emails: ['three@example.com', 'not an address'] });
  assert.equal(refused.statusCode, 400);
  assert.deepEqual([refused.json().name, refused.json().field], ['validation_error', 'emails.1']);
  assert.equal((await call('GET', '/suppressions/three@example.com')).statusCode, 404);

  // Resend's limit: 1 to 100 addresses.
  const many = Array.from({ length: 101 }, (_, i) => `m${i}@example.com`);
  for (const emails of [[], many]) {
    const res = await call('POST', '/suppressions/batch/add', { emails });
    assert.equal(res.statusCode, 400);
    assert.deepEqual([res.json().name, res.json().field], ['validation_error', 'emails']);
  }
  const hundred = await call('POST', '/suppressions/batch/add', { emails: many.slice(0, 100) });
  assert.equal(hundred.json().data.length, 100);

  const removed = await call('POST', '/suppressions/batch/remove', {
    emails: [...many.slice(0, 100), 'one@example.com', 'two@example.com', 'old@example.com'],
  });
  assert.equal(removed.statusCode, 400, 'more than 100 to remove is refused too');
  assert.equal((await call('GET', '/suppressions/m0@example.com')).statusCode, 200, 'and nothing was removed');
  await call('POST', '/suppressions/batch/remove', { emails: many.slice(0, 100) });
  await call('POST', '/suppressions/batch/remove', { ids: [ids[0], ids[1], ids[2]] });
});

test('batch remove: by addresses or by ids, not both; entries not on the list are left out of the answer', async () => {
  const [a, b] = (
    await call('POST', '/suppressions/batch/add', { emails: ['ra@example.com', 'rb@example.com'] })
  ).json().data;
  const theirs = (await call('POST', '/suppressions', { email: 'rc@example.com' }, other.fullKey)).json();

  for (const [payload, name, field] of [
    [{}, 'missing_required_field', 'emails'],
    [{ emails: ['ra@example.com'], ids: [a.id] }, 'validation_error', 'ids'],
    [{ ids: [a.id, 'nope'] }, 'validation_error', 'ids.1'],
    [{ emails: ['ra@example.com', 'junk'] }, 'validation_error', 'emails.1'],
    [{ emails: [] }, 'validation_error', 'emails'],
  ] as const) {
    const res = await call('POST', '/suppressions/batch/remove', payload);
    assert.equal(res.statusCode, 400, JSON.stringify(payload));
    assert.deepEqual([res.json().name, res.json().field], [name, field], JSON.stringify(payload));
  }
  assert.equal((await call('GET', `/suppressions/${a.id}`)).statusCode, 200, 'a refused call removes nothing');

  // Another organization's id, or an address not listed, is not removed and not answered.
  const byIds = await call('POST', '/suppressions/batch/remove', { ids: [a.id, theirs.id, a.id] });
  assert.deepEqual(byIds.json(), { data: [{ object: 'suppression', id: a.id, deleted: true }] });
  assert.equal((await call('GET', `/suppressions/${theirs.id}`, undefined, other.fullKey)).statusCode, 200);
  const byEmails = await call('POST', '/suppressions/batch/remove', { emails: ['RB@example.com', 'ra@example.com'] });
  assert.deepEqual(byEmails.json(), { data: [{ object: 'suppression', id: b.id, deleted: true }] });
  await call('DELETE', `/suppressions/${theirs.id}`, undefined, other.fullKey);
});

test('the list filters by origin and pages with after or before, by id or address', async () => {
  const [x, y, z] = (
    await call('POST', '/suppressions/batch/add', { emails: ['lx@example.com', 'ly@example.com', 'lz@example.com'] })
  ).json().data;
  await t.db.query(
    `INSERT INTO suppressions (organization_id, address, reason, source_email_id)
     VALUES ($1, 'lb@example.com', 'hard_bounce', '0196b4a0-0000-7000-8000-000000000001')`,
    [org.id],
  );
  const bounces = (await call('GET', '/suppressions?origin=bounce')).json().data;
  assert.deepEqual(
    bounces.map((s: { email: string; origin: string; reason: string; source_id: string }) => [
      s.email,
      s.origin,
      s.reason,
      s.source_id,
    ]),
    [['lb@example.com', 'bounce', 'hard_bounce', '0196b4a0-0000-7000-8000-000000000001']],
  );
  assert.equal((await call('GET', '/suppressions?origin=complaint')).json().data.length, 0);
  assert.equal((await call('GET', '/suppressions?origin=other')).statusCode, 400);

  const manual = (await call('GET', '/suppressions?origin=manual')).json().data.map((s: { id: string }) => s.id);
  assert.deepEqual(manual.slice(-3).sort(), [x.id, y.id, z.id].sort());
  const afterFirst = (await call('GET', `/suppressions?origin=manual&limit=1&after=${manual.at(-3)}`)).json();
  assert.deepEqual([afterFirst.data[0].id, afterFirst.has_more], [manual.at(-2), true]);
  const beforeLast = (await call('GET', `/suppressions?origin=manual&limit=1&before=${manual.at(-1)}`)).json();
  assert.deepEqual([beforeLast.data[0].id, beforeLast.has_more], [manual.at(-2), true]);
  const both = await call('GET', `/suppressions?after=${x.id}&before=${z.id}`);
  assert.deepEqual([both.statusCode, both.json().field], [400, 'before']);
  const unknownCursor = await call('GET', '/suppressions?before=0196b4a0-0000-7000-8000-000000000009');
  assert.deepEqual([unknownCursor.statusCode, unknownCursor.json().field], [400, 'before']);

  await call('POST', '/suppressions/batch/remove', {
    emails: ['lx@example.com', 'ly@example.com', 'lz@example.com', 'lb@example.com'],
  });
});

test('a hard bounce lists the address with origin bounce and the message that bounced as source_id', async () => {
  sink.replyToRecipient('gone-for-good@example.com', { code: 550, message: '5.1.1 No such user' });
  const id = (await send(t.app, org.fullKey, message(org, { to: 'gone-for-good@example.com' }))).json().id as string;
  const read = () => call('GET', '/suppressions/gone-for-good@example.com');
  await waitFor(async () => (await read()).statusCode === 200);
  const entry = (await read()).json();
  assert.deepEqual([entry.origin, entry.reason, entry.source_id], ['bounce', 'hard_bounce', id]);
  await call('DELETE', `/suppressions/${entry.id}`);
});

test('the Resend SDK adds, lists, reads, removes and batches suppressions', async () => {
  const base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  const resend = new Resend(org.fullKey, { baseUrl: base });

  const added = await resend.suppressions.add({ email: 'sdk-one@example.com' });
  assert.equal(added.error, null, JSON.stringify(added.error));
  const id = added.data!.id;
  const got = await resend.suppressions.get(id);
  assert.equal(got.data?.email, 'sdk-one@example.com');
  assert.equal(got.data?.origin, 'manual');
  assert.equal((await resend.suppressions.get('sdk-one@example.com')).data?.id, id);
  const listed = await resend.suppressions.list({ origin: 'manual', limit: 100 });
  assert.ok(listed.data?.data.some((entry) => entry.id === id));

  const batch = await resend.suppressions.batch.add({ emails: ['sdk-two@example.com', 'sdk-three@example.com'] });
  assert.equal(batch.error, null, JSON.stringify(batch.error));
  assert.equal(batch.data!.data.length, 2);
  const tooMany = await resend.suppressions.batch.add({ emails: [] });
  assert.equal(tooMany.error?.name, 'validation_error');

  const removedByIds = await resend.suppressions.batch.remove({ ids: [batch.data!.data[0]!.id] });
  assert.deepEqual(removedByIds.data?.data, [{ object: 'suppression', id: batch.data!.data[0]!.id, deleted: true }]);
  const removedByEmails = await resend.suppressions.batch.remove({ emails: ['sdk-three@example.com'] });
  assert.equal(removedByEmails.data?.data[0]?.deleted, true);
  const removed = await resend.suppressions.remove('sdk-one@example.com');
  assert.deepEqual([removed.data?.id, removed.data?.deleted], [id, true]);
  assert.equal((await resend.suppressions.get(id)).error?.name, 'not_found');
});
