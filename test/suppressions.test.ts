// The suppression list over the API, and what it does to sending: a listed address is not sent to
// (failed, reason suppressed, email.suppressed); taken off the list, it is sent to again.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { message, send } from './helpers/emails.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

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

const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, token = org.fullKey) =>
  t.app.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });

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
  assert.deepEqual(removed.json(), { object: 'suppression', email: 'someone.else@example.com', deleted: true });
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
