// Engagement end to end, every peer real and on loopback: the API listening on HTTP, the delivery
// worker sending to an SMTP relay, the inbound SMTP listener taking reports. A topic send reaches only
// subscribed contacts and carries a one-click link that really unsubscribes; each recipient's copy has
// its own pixel and tracked links, fetched over HTTP; the VERP return path brings a DSN and an ARF report
// back to the right message and recipient.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { startInboundServer } from '../src/inbound/inbound-server.ts';
import { readReturnPath, recipientDigest } from '../src/delivery/return-path.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { message, send } from './helpers/emails.ts';
import { dkimResult as checkDkim } from './helpers/dkim.ts';
import { startSmtpSink, type ReceivedTransaction, type SmtpSink } from './helpers/smtp-sink.ts';
import { freePort } from './helpers/server-process.ts';
import { waitFor } from './helpers/wait.ts';

const RETURN_PATH_DOMAIN = 'bounces.example.test';

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;
let delivery: TestDelivery;
let inbound: { port: number; close(): Promise<void> };
let base: string;

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_PUBLIC_URL: base,
    MAILROOM_RETURN_PATH_DOMAIN: RETURN_PATH_DOMAIN,
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  await t.app.listen({ port, host: '127.0.0.1' });
  org = await createTestOrganization(t.db, t.config, 'engage');
  // New organizations start with tracking off; this is about tracking, so it is turned on.
  await t.app.inject({
    method: 'PATCH',
    url: '/organization',
    headers: bearer(org.fullKey),
    payload: { open_tracking: true, click_tracking: true },
  });
  await observeWebhookEvents(t.app, org);
  const log = { error: () => {}, warn: () => {}, info: () => {} };
  delivery = await startTestDelivery(t);
  inbound = await startInboundServer({ db: t.db, signer: t.app.signer, host: '127.0.0.1', port: 0, log });
});
after(async () => {
  await delivery.stop();
  await inbound.close();
  await t.close();
  await sink.close();
});
beforeEach(() => sink.reset());

function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) {
  return t.app.inject({ method, url, headers: bearer(org.fullKey), ...(payload ? { payload } : {}) });
}

type Event = { type: string; recipient?: string; data?: Record<string, unknown> };
const timeline = async (id: string): Promise<Event[]> => (await call('GET', `/emails/${id}/events`)).json().data;
const outcomes = async (id: string) =>
  Object.fromEntries(
    (await timeline(id))
      .filter((e) => e.recipient && ['delivered', 'failed', 'bounced'].includes(e.type))
      .map((e) => [e.recipient, e.type === 'failed' ? `failed:${String(e.data?.reason)}` : e.type]),
  );
const sendOne = async (extra: Record<string, unknown>) => {
  const res = await send(t.app, org.fullKey, message(org, extra));
  assert.equal(res.statusCode, 200, res.body);
  return res.json().id as string;
};
/** The data of the webhook events queued for this organization, of one type. */
const webhookEvents = async (type: string) => (await queuedEvents(t.db, org.id, type)).map((event) => event.data);
const transactionTo = (address: string): ReceivedTransaction => {
  const found = sink.transactions.find((tx) => tx.rcptTo.includes(address));
  assert.ok(found, `a transaction to ${address}`);
  return found;
};

const dkimResult = (raw: Buffer) => checkDkim(t.db, org.domain, raw);

test('a topic send reaches only subscribed contacts, and its one-click link unsubscribes', async () => {
  // opt_out: only contacts who opted in receive it.
  const topic = (await call('POST', '/topics', { name: 'Product news', default_subscription: 'opt_out' })).json().id;
  await call('POST', '/contacts', { email: 'in@example.com', topics: [{ id: topic, subscription: 'opt_in' }] });
  await call('POST', '/contacts', { email: 'silent@example.com' });
  await call('POST', '/contacts', {
    email: 'gone@example.com',
    unsubscribed: true,
    topics: [{ id: topic, subscription: 'opt_in' }],
  });

  const recipients = ['in@example.com', 'silent@example.com', 'gone@example.com', 'stranger@example.com'];
  const id = await sendOne({ to: recipients, topic_id: topic, html: '<p>News</p>' });
  await waitFor(async () => Object.keys(await outcomes(id)).length === 4);
  assert.deepEqual(await outcomes(id), {
    'in@example.com': 'delivered',
    'silent@example.com': 'failed:unsubscribed',
    'gone@example.com': 'failed:unsubscribed',
    'stranger@example.com': 'failed:unsubscribed',
  });
  assert.deepEqual(
    sink.transactions.flatMap((tx) => tx.rcptTo),
    ['in@example.com'],
  );
  const failed = await webhookEvents('email.failed');
  assert.equal(failed.filter((data) => data.email_id === id && data.reason === 'unsubscribed').length, 3);

  // RFC 8058: both header fields, an http(s) URL, both covered by a valid DKIM signature.
  const raw = transactionTo('in@example.com').raw;
  const headerLines = raw
    .toString()
    .split('\r\n\r\n')[0]!
    .replace(/\r\n(?=[ \t])/g, ''); // unfolded
  const listUnsubscribe = /^List-Unsubscribe:\s*(.*)$/im.exec(headerLines)?.[1] ?? '';
  const url = /^<(http:\/\/127\.0\.0\.1:\d+\/unsubscribe\/[^>]+)>$/.exec(listUnsubscribe.trim())?.[1];
  assert.ok(url, `List-Unsubscribe: ${listUnsubscribe}`);
  assert.match(headerLines, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
  assert.match(headerLines, /^DKIM-Signature:[^]*?h=[^;]*List-Unsubscribe:List-Unsubscribe-Post/im);
  assert.equal(await dkimResult(raw), 'pass');

  // The mail client's one-click POST, over HTTP.
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'List-Unsubscribe=One-Click',
  });
  assert.equal(res.status, 200);
  const unsubscribed = await webhookEvents('contact.unsubscribed');
  assert.equal(unsubscribed.length, 1);
  assert.equal(unsubscribed[0]!.email, 'in@example.com');
  assert.equal(unsubscribed[0]!.topic_id, topic);

  // The next send on the topic does not reach them; a send without the topic still does.
  sink.reset();
  const next = await sendOne({ to: 'in@example.com', topic_id: topic, html: '<p>More news</p>' });
  await waitFor(async () => Object.keys(await outcomes(next)).length === 1);
  assert.deepEqual(await outcomes(next), { 'in@example.com': 'failed:unsubscribed' });
  const receipt = await sendOne({ to: 'in@example.com', text: 'Your receipt' });
  await waitFor(async () => (await outcomes(receipt))['in@example.com'] === 'delivered');
});

test("each recipient's copy has its own pixel and tracked links; fetching them records opened and clicked", async () => {
  const html = '<html><body><p>Hi</p><a href="https://shop.example.com/offer?a=1&amp;b=2">Offer</a></body></html>';
  const id = await sendOne({ to: ['ann@example.com', 'bob@example.com'], html, text: 'Hi' });
  await waitFor(async () => Object.keys(await outcomes(id)).length === 2);
  assert.equal(sink.transactions.length, 2, 'one copy per recipient');

  const annHtml = String((await transactionTo('ann@example.com').parse()).html);
  const bobHtml = String((await transactionTo('bob@example.com').parse()).html);
  const pixel = /<img src="([^"]+\/t\/o\/[^"]+)"/.exec(annHtml)?.[1];
  const link = /<a href="([^"]+\/t\/c\/[^"]+)"/.exec(annHtml)?.[1]?.replaceAll('&amp;', '&');
  assert.ok(pixel && link, annHtml);
  assert.ok(pixel.startsWith(`${base}/t/o/`) && link.startsWith(`${base}/t/c/`));
  assert.ok(!bobHtml.includes(pixel), "bob's copy has his own pixel");

  const image = await fetch(pixel);
  assert.equal(image.status, 200);
  assert.equal(image.headers.get('content-type'), 'image/gif');
  const redirect = await fetch(link, { redirect: 'manual' });
  assert.equal(redirect.status, 302);
  assert.equal(redirect.headers.get('location'), 'https://shop.example.com/offer?a=1&b=2');

  const events = await timeline(id);
  const engaged = events.filter((e) => e.type === 'opened' || e.type === 'clicked');
  assert.deepEqual(
    engaged.map((e) => [e.type, e.recipient]),
    [
      ['opened', 'ann@example.com'],
      ['clicked', 'ann@example.com'],
    ],
  );
  assert.deepEqual(engaged[1]!.data?.click, { link: 'https://shop.example.com/offer?a=1&b=2' });
  assert.equal((await webhookEvents('email.opened')).filter((d) => d.email_id === id).length, 1);
  assert.equal((await webhookEvents('email.clicked')).filter((d) => d.email_id === id).length, 1);
});

test('with tracking turned off for the organization, the HTML goes out as written to every recipient', async () => {
  const patched = await call('PATCH', '/organization', { open_tracking: false, click_tracking: false });
  assert.equal(patched.statusCode, 200, patched.body);
  try {
    const html = '<p><a href="https://example.com/x">x</a></p>';
    const id = await sendOne({ to: ['c1@example.com', 'c2@example.com'], html });
    await waitFor(async () => Object.keys(await outcomes(id)).length === 2);
    // Two transactions all the same, since each copy has its own return path.
    assert.equal(sink.transactions.length, 2);
    for (const transaction of sink.transactions) {
      const received = String((await transaction.parse()).html);
      assert.ok(received.includes('href="https://example.com/x"'), received);
      assert.doesNotMatch(received, /\/t\/[oc]\//);
    }
  } finally {
    await call('PATCH', '/organization', { open_tracking: true, click_tracking: true });
  }
});

/** Delivers a report to the inbound listener over SMTP, from the null reverse path as real reports come. */
async function deliverReport(to: string, raw: string): Promise<void> {
  const client = nodemailerTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
  try {
    await client.sendMail({ envelope: { from: '', to: [to] }, raw });
  } finally {
    client.close();
  }
}

test("a DSN and an ARF report sent to each copy's VERP return path record bounced and complained", async () => {
  const id = await sendOne({ to: ['bouncy@example.com', 'grumpy@example.com'], text: 'Hello' });
  await waitFor(async () => Object.keys(await outcomes(id)).length === 2);
  // Each recipient's copy went in a transaction of its own, from a return path naming that recipient.
  assert.equal(sink.transactions.length, 2);
  const returnPathOf = (recipient: string) => {
    const transaction = sink.transactions.find((tx) => tx.rcptTo.join() === recipient);
    assert.ok(transaction, `a transaction to ${recipient} alone`);
    return transaction.mailFrom;
  };
  const bouncyPath = returnPathOf('bouncy@example.com');
  const grumpyPath = returnPathOf('grumpy@example.com');
  for (const [path, recipient] of [
    [bouncyPath, 'bouncy@example.com'],
    [grumpyPath, 'grumpy@example.com'],
  ] as const) {
    const domain = RETURN_PATH_DOMAIN.replaceAll('.', '\\.');
    assert.match(path, new RegExp(`^bounce-[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{14}@${domain}$`));
    assert.ok(path.split('@')[0]!.length <= 64);
    assert.deepEqual(readReturnPath(t.app.signer, path), {
      emailId: id,
      recipientDigest: recipientDigest(t.app.signer, recipient),
    });
  }

  await deliverReport(
    bouncyPath,
    [
      'From: Mail Delivery System <mailer-daemon@mx.example.com>',
      `To: ${bouncyPath}`,
      'Subject: Undelivered Mail Returned to Sender',
      'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="b1"',
      '',
      '--b1',
      'Content-Type: text/plain',
      '',
      'Your message could not be delivered.',
      '--b1',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.com',
      '',
      'Final-Recipient: rfc822; bouncy@example.com',
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 <bouncy@example.com>: Recipient address rejected',
      '',
      '--b1',
      'Content-Type: text/rfc822-headers',
      '',
      `From: hello@${org.domain}`,
      'To: bouncy@example.com, grumpy@example.com',
      'Subject: Hi',
      '',
      '--b1--',
      '',
    ].join('\r\n'),
  );
  await deliverReport(
    grumpyPath,
    [
      'From: Feedback Loop <fbl@isp.example.net>',
      `To: ${grumpyPath}`,
      'Subject: Abuse report',
      'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=feedback-report; boundary="b2"',
      '',
      '--b2',
      'Content-Type: text/plain',
      '',
      'This is an email abuse report.',
      '--b2',
      'Content-Type: message/feedback-report',
      '',
      'Feedback-Type: abuse',
      'User-Agent: ExampleFBL/1.0',
      'Version: 1',
      'Original-Rcpt-To: grumpy@example.com',
      '',
      '--b2',
      'Content-Type: message/rfc822',
      '',
      `From: hello@${org.domain}`,
      'To: grumpy@example.com',
      'Subject: Hi',
      '',
      'Hello',
      '--b2--',
      '',
    ].join('\r\n'),
  );

  const events = await timeline(id);
  const bounced = events.find((e) => e.type === 'bounced');
  assert.equal(bounced?.recipient, 'bouncy@example.com');
  assert.deepEqual((bounced?.data as { bounce: unknown }).bounce, {
    type: 'hard',
    smtp_code: 550,
    diagnostic: '550 5.1.1 <bouncy@example.com>: Recipient address rejected',
  });
  assert.equal(events.find((e) => e.type === 'complained')?.recipient, 'grumpy@example.com');
  const suppressed = (await call('GET', '/suppressions'))
    .json()
    .data.map((s: { email: string; reason: string }) => [s.email, s.reason]);
  assert.deepEqual(suppressed, [
    ['bouncy@example.com', 'hard_bounce'],
    ['grumpy@example.com', 'complaint'],
  ]);
  assert.equal((await webhookEvents('email.bounced')).filter((d) => d.email_id === id).length, 1);
  assert.equal((await webhookEvents('email.complained')).filter((d) => d.email_id === id).length, 1);

  // Both are now suppressed: the next message fails them without sending.
  sink.reset();
  const next = await sendOne({ to: ['bouncy@example.com', 'grumpy@example.com'], text: 'Again' });
  await waitFor(async () => Object.keys(await outcomes(next)).length === 2);
  assert.deepEqual(await outcomes(next), {
    'bouncy@example.com': 'failed:suppressed',
    'grumpy@example.com': 'failed:suppressed',
  });
  assert.equal(sink.transactions.length, 0);
  assert.equal((await webhookEvents('email.suppressed')).filter((d) => d.email_id === next).length, 2);
});
