// Webhook payloads in Resend's shapes: every event type Mailroom emits that Resend defines is triggered
// for real (sends through the delivery worker to a loopback SMTP sink and to Resend's test addresses,
// opens and clicks fetched over HTTP from the listening app, contacts and domains changed through the
// API), received by a loopback HTTP endpoint through the webhook worker, verified with Resend's SDK and
// validated against Resend's published OpenAPI (its `webhooks`).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { Resend, type WebhookEventPayload } from 'resend';
import { startWebhookDelivery } from '../src/webhooks/start-webhooks.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send } from './helpers/emails.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { freePort } from './helpers/server-process.ts';
import { waitFor } from './helpers/wait.ts';
import { resendWebhookTypes, webhookProblems } from './helpers/resend-openapi.ts';

interface Received {
  type: string;
  created_at: string;
  data: Record<string, unknown>;
}

/** Resend's types Mailroom does not emit yet: email.received comes once receiving exists. */
const NOT_EMITTED = ['email.received'];

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;
let delivery: TestDelivery;
let webhooks: Awaited<ReturnType<typeof startWebhookDelivery>>;
let hook: Server;
let base: string;
let secret: string;
const received: Received[] = [];
const resend = new Resend('re_unused');

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_PUBLIC_URL: base,
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    // A deferred recipient is tried again a second later, so one message is taken twice.
    MAILROOM_DELIVERY_RETRY_SCHEDULE: '1,1,1',
  });
  await t.app.listen({ port, host: '127.0.0.1' });
  org = await createTestOrganization(t.db, t.config, 'payloads');
  const tracking = await call('PATCH', '/organization', { open_tracking: true, click_tracking: true });
  assert.equal(tracking.statusCode, 200, tracking.body);

  // The receiver checks each request's signature with Resend's SDK before keeping its body.
  hook = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => {
      const header = (name: string) => String(req.headers[name]);
      const event: WebhookEventPayload = resend.webhooks.verify({
        payload: raw,
        headers: {
          id: header('webhook-id'),
          timestamp: header('webhook-timestamp'),
          signature: header('webhook-signature'),
        },
        webhookSecret: secret,
      });
      received.push(event as unknown as Received);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(hook.address() as { port: number }).port}/hook`;
  const registered = await call('POST', '/webhooks', { endpoint, events: [] });
  assert.equal(registered.statusCode, 201, registered.body);
  secret = registered.json().signing_secret;

  const log = { error: () => {}, warn: () => {} };
  webhooks = await startWebhookDelivery(t.db, t.config, log);
  delivery = await startTestDelivery(t);
});

after(async () => {
  await delivery?.stop();
  await webhooks?.close();
  await t?.close();
  await sink?.close();
  await new Promise<void>((resolve) => (hook ? (hook.closeAllConnections(), hook.close(() => resolve())) : resolve()));
});

function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) {
  return t.app.inject({
    method,
    url,
    headers: bearer(org.fullKey),
    ...(payload !== undefined ? { payload: payload as object } : {}),
  });
}

const sendOk = async (extra: Record<string, unknown>) => {
  const res = await send(t.app, org.fullKey, message(org, extra));
  assert.equal(res.statusCode, 200, res.body);
  return res.json().id as string;
};
const eventsOf = (type: string, where: (data: Record<string, unknown>) => boolean = () => true) =>
  received.filter((e) => e.type === type && where(e.data));
const arrived = (type: string, where?: (data: Record<string, unknown>) => boolean) =>
  waitFor(() => eventsOf(type, where).length > 0, 20_000);
const about = (emailId: string, recipient?: string) => (data: Record<string, unknown>) =>
  data.email_id === emailId && (recipient === undefined || data.recipient === recipient);

/** GET over real HTTP from the listening app, as a mail client fetches a pixel or follows a link. */
async function fetchAsClient(url: string) {
  const res = await fetch(url, { redirect: 'manual', headers: { 'user-agent': 'PayloadTest/1.0 (a mail client)' } });
  await res.arrayBuffer();
  return res.status;
}

test('every event type Mailroom shares with Resend arrives valid by Resend’s schema', async () => {
  // contact.created, contact.updated, contact.deleted
  const contact = await call('POST', '/contacts', { email: 'carol@example.com', first_name: 'Carol' });
  assert.equal(contact.statusCode, 201, contact.body);
  const contactId = contact.json().id as string;
  assert.equal((await call('PATCH', `/contacts/${contactId}`, { last_name: 'Jones' })).statusCode, 200);
  assert.equal((await call('DELETE', `/contacts/${contactId}`)).statusCode, 200);

  // domain.created, domain.updated, domain.deleted
  const domain = await call('POST', '/domains', { name: `hooks-${process.pid}.example.test` });
  assert.ok([200, 201].includes(domain.statusCode), domain.body);
  const domainId = domain.json().id as string;
  const shownRecords = (await call('GET', `/domains/${domainId}`)).json().records as Array<Record<string, unknown>>;
  assert.equal((await call('PATCH', `/domains/${domainId}`, { click_tracking: false })).statusCode, 200);
  assert.equal((await call('DELETE', `/domains/${domainId}`)).statusCode, 200);

  // One message to a real mailbox (delivered, opened, clicked), one that is deferred once, Resend's test
  // addresses (delivered, bounced, complained) and a real 550 5.1.1 from the sink (bounced).
  sink.replyToRecipient('later@example.com', { code: 451, message: '4.7.1 Try again later' });
  sink.replyToRecipient('nobody@example.com', { code: 550, message: '5.1.1 No such user here' });
  const html = '<html><body><p>Hi</p><a href="https://shop.example.com/offer">Offer</a></body></html>';
  const tags = [{ name: 'category', value: 'receipt' }];
  const mainId = await sendOk({
    to: ['ann@example.com', 'delivered@resend.dev', 'bounced@resend.dev', 'complained@resend.dev'],
    cc: ['nobody@example.com'],
    html,
    tags,
    headers: { 'X-Entity-Ref-ID': 'ref-42' },
  });
  const laterId = await sendOk({ to: 'later@example.com' });

  // email.opened, email.clicked: from ann's copy, fetched as a mail client would.
  await arrived('email.delivered', about(mainId, 'ann@example.com'));
  const copy = sink.transactions.find((tx) => tx.rcptTo.includes('ann@example.com'));
  assert.ok(copy, 'ann was sent a copy');
  const body = String((await copy.parse()).html);
  await arrived('email.bounced', about(mainId, 'nobody@example.com'));
  await arrived('email.delivery_delayed', about(laterId, 'later@example.com'));
  sink.reset(); // the retry, a second later, is delivered
  await arrived('email.delivered', about(laterId, 'later@example.com'));
  const pixel = /<img src="([^"]+\/t\/o\/[^"]+)"/.exec(body)?.[1];
  const link = /<a href="([^"]+\/t\/c\/[^"]+)"/.exec(body)?.[1]?.replaceAll('&amp;', '&');
  assert.ok(pixel && link, body);
  assert.equal(await fetchAsClient(pixel), 200);
  assert.equal(await fetchAsClient(link), 302);

  // email.suppressed: an address added by hand, and one that bounced (nobody@, above).
  assert.equal((await call('POST', '/suppressions', { email: 'gone@example.com' })).statusCode, 201);
  const suppressedId = await sendOk({ to: ['gone@example.com', 'nobody@example.com'] });

  // email.failed: a topic send to someone who is not a contact of an opt-in topic.
  const topic = await call('POST', '/topics', { name: 'News', default_subscription: 'opt_in' });
  assert.equal(topic.statusCode, 201, topic.body);
  const failedId = await sendOk({ to: 'stranger@example.com', topic_id: topic.json().id });

  // email.scheduled, then Mailroom's email.rescheduled and email.canceled for the same message.
  const scheduledId = await sendOk({
    to: 'someday@example.com',
    scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
  });
  const rescheduled = await call('PATCH', `/emails/${scheduledId}`, {
    scheduled_at: new Date(Date.now() + 2 * 86_400_000).toISOString(),
  });
  assert.equal(rescheduled.statusCode, 200, rescheduled.body);
  assert.equal((await call('POST', `/emails/${scheduledId}/cancel`)).statusCode, 200);

  await arrived('email.suppressed', about(suppressedId, 'nobody@example.com'));
  await arrived('email.suppressed', about(suppressedId, 'gone@example.com'));
  await arrived('email.failed', about(failedId));
  await arrived('email.clicked', about(mainId));
  await arrived('email.canceled', about(scheduledId));
  const expected = resendWebhookTypes.filter((type) => !NOT_EMITTED.includes(type));
  await waitFor(() => expected.every((type) => eventsOf(type).length > 0), 20_000).catch(() => {});
  const missing = expected.filter((type) => eventsOf(type).length === 0);
  assert.deepEqual(missing, [], 'every type Resend defines and Mailroom emits was received');

  // Each payload of a type Resend defines, by its schema.
  const problems = received.flatMap((event) =>
    (webhookProblems(event) ?? []).map((problem) => `${event.type}: ${problem}`),
  );
  assert.deepEqual(problems, []);

  // Where the SDK's types ask more than the schema: message_id on every outbound email event.
  for (const event of received.filter((e) => e.type.startsWith('email.'))) {
    assert.equal(typeof event.data.message_id, 'string', `${event.type} has message_id`);
    assert.equal(typeof event.data.created_at, 'string', `${event.type} has data.created_at`);
  }

  // The message's fields are the ones the API shows.
  const shown = (await call('GET', `/emails/${mainId}`)).json();
  const delivered = eventsOf('email.delivered', about(mainId, 'ann@example.com'))[0]!;
  assert.equal(delivered.data.created_at, shown.created_at);
  assert.equal(delivered.data.message_id, shown.message_id);
  assert.deepEqual(delivered.data.to, ['ann@example.com'], 'a recipient event names that recipient');
  assert.deepEqual(delivered.data.tags, { category: 'receipt' });
  assert.deepEqual(delivered.data.headers, [{ name: 'X-Entity-Ref-ID', value: 'ref-42' }]);
  assert.equal(delivered.data.smtp_code, 250, "Mailroom's own fields stay");

  // email.sent: once per message, at its first take, though the deferred one was taken twice.
  for (const id of [mainId, laterId, suppressedId, failedId]) {
    await arrived('email.sent', about(id));
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_deliveries WHERE event_type = 'email.sent' AND payload #>> '{data,email_id}' = $1`,
      [id],
    );
    assert.equal(rows[0]!.n, 1, `one email.sent for ${id}`);
    const sent = eventsOf('email.sent', about(id));
    assert.deepEqual(
      sent[0]!.data.to,
      (await call('GET', `/emails/${id}`)).json().to,
      "a message event has the message's To",
    );
  }
  assert.equal(eventsOf('email.sent', about(scheduledId)).length, 0, 'a cancelled scheduled message is never sent');
  const scheduled = eventsOf('email.scheduled', about(scheduledId))[0]!;
  assert.equal(typeof scheduled.data.scheduled_at, 'string');

  // Bounces: a real 550 5.1.1 and the test address, with Mailroom's fields kept beside Resend's.
  const bounce = eventsOf('email.bounced', about(mainId, 'nobody@example.com'))[0]!.data.bounce;
  assert.deepEqual(bounce, {
    type: 'Permanent',
    subType: 'NoEmail',
    message: '550 5.1.1 No such user here',
    diagnosticCode: ['smtp; 550 5.1.1 No such user here'],
    smtp_code: 550,
    diagnostic: '550 5.1.1 No such user here',
  });
  const testBounce = eventsOf('email.bounced', about(mainId, 'bounced@resend.dev'))[0]!.data.bounce as Record<
    string,
    unknown
  >;
  assert.equal(testBounce.type, 'Permanent');
  assert.equal(testBounce.subType, 'NoEmail');

  // The click: who clicked, with what, when.
  const click = eventsOf('email.clicked', about(mainId, 'ann@example.com'))[0]!.data.click as Record<string, unknown>;
  assert.equal(click.link, 'https://shop.example.com/offer');
  assert.equal(click.ipAddress, '127.0.0.1');
  assert.equal(click.userAgent, 'PayloadTest/1.0 (a mail client)');
  assert.ok(!Number.isNaN(Date.parse(String(click.timestamp))));

  // Suppressed: the origin of each suppression.
  const suppressed = (recipient: string) =>
    eventsOf('email.suppressed', about(suppressedId, recipient))[0]!.data.suppressed as Record<string, unknown>;
  assert.equal(suppressed('nobody@example.com').reason, 'previous_bounce');
  assert.equal(suppressed('nobody@example.com').origin, 'bounce');
  assert.equal(suppressed('gone@example.com').origin, 'manual');
  assert.equal(suppressed('gone@example.com').type, 'OnAccountSuppressionList');

  // Failed: Resend's `failed`, Mailroom's `reason` kept.
  const failed = eventsOf('email.failed', about(failedId))[0]!.data;
  assert.deepEqual(failed.failed, { reason: 'unsubscribed' });
  assert.equal(failed.reason, 'unsubscribed');

  // Domains: the DKIM and SPF records as GET /domains/:id shows them.
  const created = eventsOf('domain.created', (data) => data.id === domainId)[0]!.data;
  const records = created.records as Array<Record<string, unknown>>;
  for (const kind of ['DKIM', 'SPF']) {
    const shownRecord = shownRecords.find((r) => r.record === kind)!;
    const sentRecord = records.find((r) => r.record === kind)!;
    for (const field of ['name', 'value', 'type', 'ttl', 'status']) {
      assert.equal(sentRecord[field], shownRecord[field], `${kind} ${field}`);
    }
  }
  assert.equal(eventsOf('domain.deleted', (data) => data.id === domainId).length, 1);

  // Contacts: names only when set, as strings.
  const contactCreated = eventsOf('contact.created', (data) => data.id === contactId)[0]!.data;
  assert.equal(contactCreated.first_name, 'Carol');
  assert.ok(!('last_name' in contactCreated), 'an unset name is left out, not null');
  const contactUpdated = eventsOf('contact.updated', (data) => data.id === contactId)[0]!.data;
  assert.equal(contactUpdated.last_name, 'Jones');
});

test('tags in every form a send takes arrive as an object of strings', async () => {
  const cases: Array<[unknown, Record<string, string>]> = [
    [undefined, {}],
    [{}, {}],
    [
      { plan: 'pro', seats: 5, trial: false },
      { plan: 'pro', seats: '5', trial: 'false' },
    ],
    [
      [{ name: 'category', value: 'welcome' }, 'vip', { name: 'category', value: 'receipt' }],
      { category: 'receipt', vip: 'true' },
    ],
  ];
  for (const [tags, expected] of cases) {
    const id = await sendOk({ to: 'delivered@resend.dev', ...(tags !== undefined && { tags }) });
    for (const type of ['email.accepted', 'email.sent', 'email.delivered']) {
      await arrived(type, about(id));
      assert.deepEqual(eventsOf(type, about(id))[0]?.data.tags, expected, `${type} of tags ${JSON.stringify(tags)}`);
    }
  }
});
