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

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'sdk');
  const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
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
