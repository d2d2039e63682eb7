// The official Resend SDK, pointed at Mailroom, sends, batches and retries idempotently: existing
// applications switch by changing only the base URL.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { counts } from './helpers/emails.ts';

let t: TestApp;
let org: TestOrganization;
let resend: Resend;
let address: string;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'sdk');
  address = await t.app.listen({ port: 0, host: '127.0.0.1' });
  resend = new Resend(org.sendingKey, { baseUrl: address });
});
after(() => t.close());

test('emails.send', async () => {
  const { data, error } = await resend.emails.send({
    from: `Acme <onboarding@${org.domain}>`,
    to: ['delivered@example.com'],
    subject: 'Hello from the Resend SDK',
    html: '<strong>It works</strong>',
    text: 'It works',
    tags: [{ name: 'category', value: 'sdk_test' }],
    attachments: [{ filename: 'note.txt', content: Buffer.from('attached') }],
    scheduledAt: new Date(Date.now() + 3600_000).toISOString(),
  });
  assert.equal(error, null, JSON.stringify(error));
  assert.match(data!.id, /^[0-9a-f-]{36}$/);
});

test('a refusal comes back as the SDK error', async () => {
  const { data, error } = await resend.emails.send({
    from: 'someone@not-ours.example',
    to: 'x@example.com',
    subject: 's',
    text: 't',
  });
  assert.equal(data, null);
  assert.equal(error?.name, 'invalid_from_address');
});

test('batch.send (the SDK asks for strict validation)', async () => {
  const { data, error } = await resend.batch.send([
    { from: `a@${org.domain}`, to: 'one@example.com', subject: '1', text: 'one' },
    { from: `a@${org.domain}`, to: ['two@example.com', 'three@example.com'], subject: '2', html: '<p>two</p>' },
  ]);
  assert.equal(error, null, JSON.stringify(error));
  assert.equal(data!.data.length, 2);
  for (const entry of data!.data) assert.match(entry.id, /^[0-9a-f-]{36}$/);
});

test('an idempotent retry returns the same id and sends once', async () => {
  const payload = { from: `a@${org.domain}`, to: 'once@example.com', subject: 'once', text: 'only once' };
  const first = await resend.emails.send(payload, { idempotencyKey: `sdk-${process.pid}` });
  const before = await counts(t.db, org.id);
  const second = await resend.emails.send(payload, { idempotencyKey: `sdk-${process.pid}` });
  assert.equal(first.error, null);
  assert.equal(second.data!.id, first.data!.id);
  assert.deepEqual(await counts(t.db, org.id), before);
});

test('topics and contacts, with per-topic subscriptions, through the SDK', async () => {
  const manage = new Resend(org.fullKey, { baseUrl: resend.baseUrl });
  const topic = await manage.topics.create({ name: 'Weekly digest', defaultSubscription: 'opt_out' });
  assert.equal(topic.error, null, JSON.stringify(topic.error));
  const topicId = topic.data!.id;

  const contact = await manage.contacts.create({ email: 'reader@example.com', firstName: 'Ada' });
  assert.equal(contact.error, null, JSON.stringify(contact.error));
  const read = await manage.contacts.get({ email: 'reader@example.com' });
  assert.equal(read.data?.first_name, 'Ada');

  const updated = await manage.contacts.topics.update({
    email: 'reader@example.com',
    topics: [{ id: topicId, subscription: 'opt_in' }],
  });
  assert.equal(updated.error, null, JSON.stringify(updated.error));
  const listed = await manage.contacts.topics.list({ email: 'reader@example.com' });
  assert.equal(listed.error, null, JSON.stringify(listed.error));
  assert.deepEqual(
    listed.data!.data.map((entry) => [entry.id, entry.subscription]),
    [[topicId, 'opt_in']],
  );

  assert.equal((await manage.topics.get(topicId)).data?.name, 'Weekly digest');
  assert.equal((await manage.contacts.remove({ email: 'reader@example.com' })).error, null);
  assert.equal((await manage.topics.remove(topicId)).error, null);
});

test("contacts with an audienceId (Resend's older audiences: segments) through the SDK", async () => {
  const manage = new Resend(org.fullKey, { baseUrl: resend.baseUrl });
  const audience = await manage.audiences.create({ name: 'Newsletter' });
  assert.equal(audience.error, null, JSON.stringify(audience.error));
  const audienceId = audience.data!.id;

  const created = await manage.contacts.create({ audienceId, email: 'member@example.com', firstName: 'Grace' });
  assert.equal(created.error, null, JSON.stringify(created.error));
  const id = created.data!.id;
  // Not a member: the audience's list holds only the contact created in it.
  assert.equal((await manage.contacts.create({ email: 'outsider@example.com' })).error, null);

  const byEmail = await manage.contacts.get({ audienceId, email: 'member@example.com' });
  assert.equal(byEmail.error, null, JSON.stringify(byEmail.error));
  assert.deepEqual([byEmail.data!.id, byEmail.data!.first_name], [id, 'Grace']);
  assert.equal((await manage.contacts.get({ audienceId, id })).data?.email, 'member@example.com');

  const updated = await manage.contacts.update({ audienceId, id, lastName: 'Hopper', unsubscribed: true });
  assert.equal(updated.error, null, JSON.stringify(updated.error));
  const read = await manage.contacts.get({ audienceId, email: 'member@example.com' });
  assert.deepEqual([read.data?.last_name, read.data?.unsubscribed], ['Hopper', true]);

  const listed = await manage.contacts.list({ audienceId });
  assert.equal(listed.error, null, JSON.stringify(listed.error));
  assert.deepEqual(
    listed.data!.data.map((contact) => contact.email),
    ['member@example.com'],
  );

  // Another organization's audience is not found, whatever the contact.
  const other = await createTestOrganization(t.db, t.config, 'sdk-other');
  const theirs = await new Resend(other.fullKey, { baseUrl: resend.baseUrl }).audiences.create({ name: 'Theirs' });
  const foreign = theirs.data!.id;
  for (const call of [
    manage.contacts.create({ audienceId: foreign, email: 'x@example.com' }),
    manage.contacts.get({ audienceId: foreign, email: 'member@example.com' }),
    manage.contacts.update({ audienceId: foreign, id, firstName: 'X' }),
    manage.contacts.remove({ audienceId: foreign, id }),
    manage.contacts.list({ audienceId: foreign }),
  ]) {
    const { error } = await call;
    assert.deepEqual([error?.statusCode, error?.name], [404, 'not_found'], JSON.stringify(error));
  }

  const removed = await manage.contacts.remove({ audienceId, email: 'member@example.com' });
  assert.equal(removed.error, null, JSON.stringify(removed.error));
  const gone = await manage.contacts.get({ audienceId, id });
  assert.equal(gone.error?.statusCode, 404);
  assert.equal((await manage.contacts.remove({ email: 'outsider@example.com' })).error, null);
});

test('domains.update switches tracking per domain; domains.get shows it', async () => {
  const admin = new Resend(org.fullKey, { baseUrl: address });
  const list = await admin.domains.list();
  assert.equal(list.error, null, JSON.stringify(list.error));
  const id = list.data!.data.find((domain) => domain.name === org.domain)!.id;

  const { data, error } = await admin.domains.update({ id, openTracking: false, clickTracking: true });
  assert.equal(error, null, JSON.stringify(error));
  assert.deepEqual(data, { object: 'domain', id });
  const read = await admin.domains.get(id);
  assert.equal(read.error, null, JSON.stringify(read.error));
  assert.equal(read.data!.open_tracking, false);
  assert.equal(read.data!.click_tracking, true);

  // tls is kept (Resend's Domain does not show it; Mailroom's answer adds it), and can be set back.
  const enforced = await admin.domains.update({ id, openTracking: true, tls: 'enforced' });
  assert.equal(enforced.error, null, JSON.stringify(enforced.error));
  const afterEnforced = (await admin.domains.get(id)).data! as typeof read.data & { tls?: string };
  assert.deepEqual([afterEnforced.open_tracking, afterEnforced.tls], [true, 'enforced']);
  assert.equal((await admin.domains.update({ id, tls: 'opportunistic' })).error, null);
  assert.equal(((await admin.domains.get(id)).data! as { tls?: string }).tls, 'opportunistic');
});

test("domains.create takes any of Resend's regions and tls; domains.get answers them back", async () => {
  const admin = new Resend(org.fullKey, { baseUrl: address });
  const created = await admin.domains.create({
    name: `sdk-region-${process.pid}.example.org`,
    region: 'sa-east-1',
    tls: 'enforced',
  });
  assert.equal(created.error, null, JSON.stringify(created.error));
  assert.equal(created.data!.region, 'sa-east-1');
  const read = await admin.domains.get(created.data!.id);
  assert.deepEqual([read.data!.region, (read.data! as { tls?: string }).tls], ['sa-east-1', 'enforced']);
  assert.equal((await admin.domains.remove(created.data!.id)).error, null);
});

test('emails.list pages newest first; emails.attachments lists and reads a sent attachment', async () => {
  const admin = new Resend(org.fullKey, { baseUrl: resend.baseUrl });
  const sent = await admin.emails.send({
    from: `Acme <billing@${org.domain}>`,
    to: 'listed@example.com',
    subject: 'Listed by the SDK',
    text: 'see attached',
    attachments: [{ filename: 'receipt.txt', content: Buffer.from('paid') }],
  });
  assert.equal(sent.error, null, JSON.stringify(sent.error));

  const first = await admin.emails.list({ limit: 1 });
  assert.equal(first.error, null, JSON.stringify(first.error));
  assert.equal(first.data!.object, 'list');
  assert.equal(first.data!.has_more, true);
  assert.equal(first.data!.data[0]!.id, sent.data!.id);
  assert.equal(first.data!.data[0]!.subject, 'Listed by the SDK');
  const next = await admin.emails.list({ limit: 1, after: sent.data!.id });
  assert.equal(next.error, null, JSON.stringify(next.error));
  assert.notEqual(next.data!.data[0]!.id, sent.data!.id);

  const attachments = await admin.emails.attachments.list({ emailId: sent.data!.id });
  assert.equal(attachments.error, null, JSON.stringify(attachments.error));
  const [listed] = attachments.data!.data;
  assert.equal(listed!.filename, 'receipt.txt');
  const one = await admin.emails.attachments.get({ emailId: sent.data!.id, id: listed!.id });
  assert.equal(one.error, null, JSON.stringify(one.error));
  // The link is on MAILROOM_PUBLIC_URL; this test's server listens on a port of its own.
  const download = await fetch(new URL(new URL(one.data!.download_url).pathname, resend.baseUrl));
  assert.equal(await download.text(), 'paid');

  // A sending_access key may send but not read.
  const refused = await resend.emails.list();
  assert.equal(refused.error?.name, 'restricted_api_key');
});
