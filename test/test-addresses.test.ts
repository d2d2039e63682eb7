// Resend's test addresses end to end: API → queue → worker → timeline, webhook events and suppression
// list, with a real SMTP relay (a loopback smtp-server) that must never see them, and an `mx` run whose
// DNS server records every name it is asked about.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startRelayTestBed, startTestDelivery, type RelayTestBed } from './helpers/delivery.ts';
import { startDnsServer, type DnsServer, type Zone } from './helpers/dns-server.ts';
import { message, send, sendBatch } from './helpers/emails.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { testOutcome } from '../src/emails/test-addresses.ts';
import { registry } from '../src/platform/metrics.ts';

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;

let bed: RelayTestBed;

before(async () => {
  bed = await startRelayTestBed('testaddr', {
    MAILROOM_SMTP_TIMEOUT_MS: '2000',
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  ({ t, org, sink } = bed);
  await observeWebhookEvents(t.app, org);
});
after(() => bed.close());
beforeEach(() => sink.reset());

type Event = { type: string; recipient?: string; data?: Record<string, unknown>; created_at: string };

const BOUNCE = {
  bounce: {
    type: 'hard',
    smtp_code: 550,
    diagnostic: '550 5.1.1 The email account that you tried to reach does not exist',
  },
};
const COMPLAINT = { feedback_type: 'abuse', user_agent: null };

const call = (app: TestApp, o: TestOrganization, method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
  app.app.inject({ method, url, headers: bearer(o.fullKey), ...(payload ? { payload } : {}) });

async function sendAndWait(app: TestApp, o: TestOrganization, extra: Record<string, unknown>): Promise<string> {
  const res = await send(app.app, o.fullKey, message(o, extra));
  assert.equal(res.statusCode, 200, res.body);
  const id = res.json().id as string;
  await waitFor(async () => (await statusOf(app, id)) === 'sent', 8000);
  return id;
}

async function statusOf(app: TestApp, id: string): Promise<string | undefined> {
  return (await app.db.query<{ status: string }>('SELECT status FROM emails WHERE id = $1', [id])).rows[0]?.status;
}

async function timeline(app: TestApp, o: TestOrganization, id: string): Promise<Event[]> {
  return (await call(app, o, 'GET', `/emails/${id}/events`)).json().data;
}

/** Each recipient's timeline kinds, in order. */
function byRecipient(events: Event[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const e of events) if (e.recipient) (out[e.recipient] ??= []).push(e.type);
  return out;
}

test('which addresses are test addresses: the three local parts, optional +label, resend.dev exactly, any case', () => {
  assert.equal(testOutcome('delivered@resend.dev'), 'delivered');
  assert.equal(testOutcome('bounced@resend.dev'), 'bounced');
  assert.equal(testOutcome('complained@resend.dev'), 'complained');
  assert.equal(testOutcome('Delivered+Signup.Flow@RESEND.dev'), 'delivered');
  assert.equal(testOutcome('bounced+@resend.dev'), 'bounced');
  assert.equal(testOutcome('complained+a+b@resend.dev'), 'complained');
  assert.equal(testOutcome('foo@resend.dev'), undefined);
  assert.equal(testOutcome('delivered2@resend.dev'), undefined);
  assert.equal(testOutcome('delivered@sub.resend.dev'), undefined);
  assert.equal(testOutcome('delivered@resend.dev.example.com'), undefined);
  assert.equal(testOutcome('delivered@example.com'), undefined);
  assert.equal(testOutcome('resend.dev'), undefined);
});

test('a mixed message: the real recipient is sent to, the test recipients never reach the transport', async () => {
  const id = await sendAndWait(t, org, {
    to: ['real@example.com', 'delivered@resend.dev'],
    cc: 'Complained+Cc@resend.dev',
    bcc: ['bounced@resend.dev'],
  });
  assert.deepEqual(
    sink.transactions.map((tx) => tx.rcptTo),
    [['real@example.com']],
  );

  const events = await timeline(t, org, id);
  assert.deepEqual(byRecipient(events), {
    'real@example.com': ['delivered'],
    'delivered@resend.dev': ['delivered'],
    'Complained+Cc@resend.dev': ['delivered', 'complained'],
    'bounced@resend.dev': ['bounced'],
  });
  assert.deepEqual(events.find((e) => e.type === 'bounced')!.data, BOUNCE);
  assert.deepEqual(events.find((e) => e.type === 'complained')!.data, COMPLAINT);
  const delivered = events.find((e) => e.type === 'delivered' && e.recipient === 'delivered@resend.dev')!;
  assert.equal(delivered.data!.smtp_code, 250);

  // The webhook events of real outcomes, with the recipient in each.
  const recipients = async (type: string) =>
    (await queuedEvents(t.db, org.id, type, { email_id: id })).map((e) => e.data.recipient).sort();
  assert.deepEqual(await recipients('email.delivered'), [
    'Complained+Cc@resend.dev',
    'delivered@resend.dev',
    'real@example.com',
  ]);
  const [bounced] = await queuedEvents(t.db, org.id, 'email.bounced', { email_id: id });
  assert.equal(bounced!.data.recipient, 'bounced@resend.dev');
  // The webhook's bounce is Resend's (a bad mailbox: Permanent, NoEmail), with the timeline's fields in it.
  assert.deepEqual(bounced!.data.bounce, {
    ...BOUNCE.bounce,
    type: 'Permanent',
    subType: 'NoEmail',
    message: BOUNCE.bounce.diagnostic,
    diagnosticCode: [`smtp; ${BOUNCE.bounce.diagnostic}`],
  });
  const [complained] = await queuedEvents(t.db, org.id, 'email.complained', { email_id: id });
  assert.equal(complained!.data.recipient, 'Complained+Cc@resend.dev');
  assert.equal(complained!.data.feedback_type, 'abuse');
  const [deliveredFirst] = await queuedEvents(t.db, org.id, 'email.delivered', {
    email_id: id,
    recipient: 'Complained+Cc@resend.dev',
  });
  assert.ok(deliveredFirst!.created_at < complained!.created_at, 'delivered comes before complained');
  assert.deepEqual(await queuedEvents(t.db, org.id, 'email.failed', { email_id: id }), []);
  assert.deepEqual(await queuedEvents(t.db, org.id, 'email.suppressed', { email_id: id }), []);

  assert.equal(await statusOf(t, id), 'sent');
});

test('only test recipients: no SMTP transaction at all, and the message is sent', async () => {
  const id = await sendAndWait(t, org, { to: ['delivered+only@resend.dev', 'BOUNCED+Only@Resend.Dev'] });
  assert.deepEqual(sink.transactions, []);
  assert.deepEqual(byRecipient(await timeline(t, org, id)), {
    'delivered+only@resend.dev': ['delivered'],
    'BOUNCED+Only@resend.dev': ['bounced'],
  });
});

/** mailroom_recipient_outcomes_total of every domain group, per outcome, as a scrape reads it. */
async function outcomeCounts(): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('mailroom_recipient_outcomes_total')!.get();
  const counts: Record<string, number> = {};
  for (const value of metric.values) counts[value.labels.outcome!] = (counts[value.labels.outcome!] ?? 0) + value.value;
  return counts;
}

test('the Prometheus outcome counts leave the test addresses out (their bounces and complaints would trip the alerts)', async () => {
  const before = await outcomeCounts();
  await sendAndWait(t, org, {
    to: ['bounced+prom@resend.dev', 'complained+prom@resend.dev', 'delivered+prom@resend.dev'],
  });
  assert.deepEqual(await outcomeCounts(), before);
  await sendAndWait(t, org, { to: ['real-prom@example.com'] });
  const after = await outcomeCounts();
  assert.equal(after.delivered, (before.delivered ?? 0) + 1);
  assert.equal(after.bounced ?? 0, before.bounced ?? 0);
});

test('with tracking, the real recipient gets a tracked copy and the test recipients none', async () => {
  assert.equal(
    (await call(t, org, 'PATCH', '/organization', { open_tracking: true, click_tracking: true })).statusCode,
    200,
  );
  try {
    const id = await sendAndWait(t, org, {
      to: ['tracked@example.com', 'delivered@resend.dev', 'complained@resend.dev'],
      html: '<p>Hi <a href="https://example.com/x">there</a></p>',
    });
    assert.deepEqual(
      sink.transactions.map((tx) => tx.rcptTo),
      [['tracked@example.com']],
    );
    assert.deepEqual(byRecipient(await timeline(t, org, id)), {
      'complained@resend.dev': ['delivered', 'complained'],
      'delivered@resend.dev': ['delivered'],
      'tracked@example.com': ['delivered'],
    });
  } finally {
    await call(t, org, 'PATCH', '/organization', { open_tracking: false, click_tracking: false });
  }
});

test('a bounce or a complaint does not suppress the test address: the same test runs again', async () => {
  for (let run = 0; run < 2; run++) {
    const id = await sendAndWait(t, org, { to: ['bounced@resend.dev', 'complained@resend.dev'] });
    assert.deepEqual(byRecipient(await timeline(t, org, id)), {
      'bounced@resend.dev': ['bounced'],
      'complained@resend.dev': ['delivered', 'complained'],
    });
  }
  for (const address of ['bounced@resend.dev', 'complained@resend.dev']) {
    assert.equal((await call(t, org, 'GET', `/suppressions/${address}`)).statusCode, 404);
  }
  assert.deepEqual(sink.transactions, []);
});

test('a test address the organization suppressed itself fails as suppressed, like any address', async () => {
  const added = await call(t, org, 'POST', '/suppressions', { email: 'delivered+blocked@resend.dev' });
  assert.equal(added.statusCode, 201, added.body);
  const id = await sendAndWait(t, org, { to: 'delivered+blocked@resend.dev' });
  assert.deepEqual(byRecipient(await timeline(t, org, id)), { 'delivered+blocked@resend.dev': ['failed'] });
  assert.equal((await queuedEvents(t.db, org.id, 'email.suppressed', { email_id: id })).length, 1);
});

test('any other address at resend.dev is refused when sent, naming the field; nothing is stored', async () => {
  for (const [to, field] of [
    ['foo@resend.dev', 'to'],
    [['ok@example.com', 'Delivred@Resend.dev'], 'to.1'],
  ] as const) {
    const res = await send(t.app, org.fullKey, message(org, { to }));
    assert.equal(res.statusCode, 400, res.body);
    assert.equal(res.json().name, 'validation_error');
    assert.equal(res.json().field, field);
    assert.match(res.json().message, /not a test address/);
  }
  const bcc = await send(t.app, org.fullKey, message(org, { bcc: 'postmaster@resend.dev' }));
  assert.equal(bcc.statusCode, 400, bcc.body);
  assert.equal(bcc.json().field, 'bcc');

  // In a batch, only the entry that names one is refused.
  const batch = await sendBatch(t.app, org.fullKey, [
    message(org, { to: 'delivered@resend.dev' }),
    message(org, { to: 'nobody@resend.dev' }),
  ]);
  assert.equal(batch.statusCode, 200, batch.body);
  const [accepted, refused] = batch.json().data;
  assert.equal(accepted.object, 'email');
  assert.equal(refused.object, 'error');
  assert.equal(refused.name, 'validation_error');
});

test('mx transport: no DNS lookup for resend.dev; the real recipient is resolved and sent to', async () => {
  const queried: string[] = [];
  const zone: Zone = new (class extends Map<string, Parameters<Zone['set']>[1]> {
    override get(name: string) {
      queried.push(name);
      return super.get(name);
    }
  })();
  const dns: DnsServer = await startDnsServer(zone);
  const mxSink = await startSmtpSink({ starttls: false });
  const mx = await buildTestApp({
    MAILROOM_TRANSPORT: 'mx',
    MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_DNS_TIMEOUT_MS: '500',
    MAILROOM_MX_PORT: String(mxSink.port),
    MAILROOM_SMTP_TIMEOUT_MS: '2000',
  });
  const o = await createTestOrganization(mx.db, mx.config, 'mx');
  const worker = await startTestDelivery(mx);
  try {
    zone.set('real.test', { a: ['127.0.0.1'] });
    const id = await sendAndWait(mx, o, {
      to: ['ann@real.test', 'delivered@resend.dev', 'bounced+mx@resend.dev', 'complained@resend.dev'],
    });
    assert.deepEqual(byRecipient(await timeline(mx, o, id)), {
      'ann@real.test': ['delivered'],
      'bounced+mx@resend.dev': ['bounced'],
      'complained@resend.dev': ['delivered', 'complained'],
      'delivered@resend.dev': ['delivered'],
    });
    assert.deepEqual(
      mxSink.transactions.map((tx) => tx.rcptTo),
      [['ann@real.test']],
    );
    assert.ok(queried.includes('real.test'), `the real domain was resolved: ${queried.join(', ')}`);
    assert.deepEqual(
      queried.filter((name) => name.endsWith('resend.dev')),
      [],
    );
  } finally {
    await worker.stop();
    await mx.close();
    await mxSink.close();
    await dns.close();
  }
});
