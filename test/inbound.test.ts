// The inbound SMTP listener end to end, every peer real and on loopback: a message is sent through the
// delivery worker to an SMTP relay, then bounce reports (RFC 3464) and complaints (RFC 5965) come back
// over SMTP to its VERP return path and are recorded on its timeline, its recipients, the suppression
// list and the webhook queue. Also: what the listener refuses, what it drops, and that nothing a
// report says can make it fail.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { simpleParser } from 'mailparser';
import type { Database } from '../src/platform/db/database.ts';
import { startInboundServer, type InboundServer } from '../src/inbound/inbound-server.ts';
import { REPORT_PARSER_OPTIONS, readDeliveryReports } from '../src/inbound/delivery-reports.ts';
import { returnPathAddress } from '../src/delivery/return-path.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { message, send } from './helpers/emails.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { deliveryStatusReport, failedRecipient, feedbackReport } from './helpers/delivery-reports.ts';
import { waitFor } from './helpers/wait.ts';
import { openSmtp } from './helpers/raw-smtp.ts';

const RETURN_PATH_DOMAIN = 'bounces.example.test';

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;
let delivery: TestDelivery;
let inbound: InboundServer;
const quiet = { error: () => {}, warn: () => {}, info: () => {} };

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  org = await createTestOrganization(t.db, t.config, 'inbound');
  await observeWebhookEvents(t.app, org);
  delivery = await startTestDelivery(t);
  inbound = await startInboundServer({ db: t.db, signer: t.app.signer, host: '127.0.0.1', port: 0, log: quiet });
});
after(async () => {
  await inbound.close();
  await delivery.stop();
  await t.close();
  await sink.close();
});

type Event = { type: string; recipient?: string; data?: Record<string, unknown> };
const timeline = async (id: string): Promise<Event[]> =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) })).json().data;
const reportEntries = async (id: string) =>
  (await timeline(id)).filter((e) => e.type === 'bounced' || e.type === 'complained');
const recipientStatus = async (id: string) =>
  Object.fromEntries(
    (
      await t.db.query<{ address: string; status: string }>(
        'SELECT address, status FROM email_recipients WHERE email_id = $1',
        [id],
      )
    ).rows.map((row) => [row.address, row.status]),
  );
const suppression = async (address: string) =>
  (
    await t.db.query<{ reason: string }>(
      'SELECT reason FROM suppressions WHERE organization_id = $1 AND address = $2',
      [org.id, address],
    )
  ).rows[0]?.reason;
const webhookEvents = async (id: string, type: string) =>
  (await queuedEvents(t.db, org.id, type, { email_id: id })).map((event) => event.data);

let counter = 0;
/** Fresh addresses per test, so suppressions of one test do not stop the sends of another. */
const address = (name: string) => `${name}${++counter}@example.com`;

/** The return path of `recipient`'s copy of message `id`. */
const returnPathOf = (id: string, recipient: string) =>
  returnPathAddress({ signer: t.app.signer, domain: RETURN_PATH_DOMAIN }, id, recipient);

/** The message-only return path messages were sent from before each recipient had their own. */
function oldFormReturnPath(id: string): string {
  const hex = id.replaceAll('-', '');
  return `bounce-${hex}-${t.app.signer.tag('return-path', hex, 8)}@${RETURN_PATH_DOMAIN}`;
}

/** A message really sent through the worker to the relay, and the return path of its first recipient. */
async function sentMessage(to: string[]): Promise<{ id: string; verp: string }> {
  const res = await send(t.app, org.fullKey, message(org, { to, text: 'Hello' }));
  assert.equal(res.statusCode, 200, res.body);
  const id = res.json().id as string;
  await waitFor(async () => (await timeline(id)).filter((e) => e.type === 'delivered').length === to.length, 10_000);
  return { id, verp: returnPathOf(id, to[0]!) };
}

/** Hands a report to the listener over SMTP from the null reverse path (MAIL FROM:<>), as real reports come. */
async function deliverReport(to: string, raw: string, port = inbound.port): Promise<string> {
  const client = nodemailerTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
  try {
    const info = await client.sendMail({ envelope: { from: '', to: [to] }, raw });
    return info.response;
  } finally {
    client.close();
  }
}

const CRLF = '\r\n';

/** A bounce report of a message from the organization's domain, to `original` (its To header). */
const dsn = (verp: string, recipientBlocks: string[][], original = 'someone@example.com') =>
  deliveryStatusReport(verp, recipientBlocks, { from: `hello@${org.domain}`, to: original });
const failed = failedRecipient;

/** An RFC 5965 report of a message from the organization's domain; `feedback` are its machine fields. */
const arf = (verp: string, feedback: string[], originalTo: string) =>
  feedbackReport(verp, feedback, { from: `hello@${org.domain}`, to: originalTo });

test('a DSN for one recipient records a hard bounce, suppresses the address and queues email.bounced', async () => {
  const [gone, fine] = [address('gone'), address('fine')];
  const { id, verp } = await sentMessage([gone, fine]);

  const response = await deliverReport(verp, dsn(verp, [failed(gone)], `${gone}, ${fine}`));
  assert.match(response, /^250 /);

  const entries = await reportEntries(id);
  assert.deepEqual(
    entries.map((e) => [e.type, e.recipient]),
    [['bounced', gone]],
  );
  assert.deepEqual(entries[0]!.data, {
    bounce: { type: 'hard', smtp_code: 550, diagnostic: '550 5.1.1 user unknown' },
    status: '5.1.1',
    source: 'dsn',
  });
  assert.deepEqual(await recipientStatus(id), { [gone]: 'bounced', [fine]: 'delivered' });
  assert.equal(await suppression(gone), 'hard_bounce');
  assert.equal(await suppression(fine), undefined);
  const events = await webhookEvents(id, 'email.bounced');
  assert.equal(events.length, 1);
  assert.equal(events[0]!.recipient, gone);
  // The webhook's bounce is Resend's, with Mailroom's fields kept in it.
  assert.deepEqual(events[0]!.bounce, {
    type: 'Permanent',
    subType: 'NoEmail',
    message: '550 5.1.1 user unknown',
    diagnosticCode: ['smtp; 550 5.1.1 user unknown'],
    smtp_code: 550,
    diagnostic: '550 5.1.1 user unknown',
  });
  assert.deepEqual(events[0]!.to, [gone], 'the event names the bounced recipient only');
});

test('the same DSN delivered twice records one entry and one webhook event', async () => {
  const gone = address('twice');
  const { id, verp } = await sentMessage([gone]);
  const report = dsn(verp, [failed(gone)]);
  await deliverReport(verp, report);
  assert.match(await deliverReport(verp, report), /^250 /);
  assert.equal((await reportEntries(id)).length, 1);
  assert.equal((await webhookEvents(id, 'email.bounced')).length, 1);
});

test('an ARF report records complained for Original-Rcpt-To, suppresses it and queues email.complained', async () => {
  const [calm, angry] = [address('calm'), address('angry')];
  const { id } = await sentMessage([calm, angry]);
  const verp = returnPathOf(id, angry);
  const feedback = ['Feedback-Type: abuse', 'User-Agent: ExampleFBL/1.0', 'Version: 1', `Original-Rcpt-To: ${angry}`];

  assert.match(await deliverReport(verp, arf(verp, feedback, `${calm}, ${angry}`)), /^250 /);

  const entries = await reportEntries(id);
  assert.deepEqual(
    entries.map((e) => [e.type, e.recipient, e.data]),
    [['complained', angry, { feedback_type: 'abuse', user_agent: 'ExampleFBL/1.0' }]],
  );
  assert.equal(await suppression(angry), 'complaint');
  assert.equal(await suppression(calm), undefined);
  assert.deepEqual(await recipientStatus(id), { [calm]: 'delivered', [angry]: 'delivered' });
  const events = await webhookEvents(id, 'email.complained');
  assert.deepEqual(
    events.map((e) => [e.recipient, e.feedback_type]),
    [[angry, 'abuse']],
  );
});

test("a report to one recipient's return path marks that recipient only, whoever it names", async () => {
  const [victim, sender] = [address('victim'), address('sender')];
  const { id } = await sentMessage([victim, sender]);
  // The sender received a copy and knows its return path: they can speak for themselves, not for the victim.
  const own = returnPathOf(id, sender);
  const feedback = ['Feedback-Type: abuse', 'Version: 1', `Original-Rcpt-To: ${victim}`];
  assert.match(await deliverReport(own, dsn(own, [failed(victim)], victim)), /^250 /);
  assert.match(await deliverReport(own, arf(own, feedback, victim)), /^250 /);
  assert.deepEqual(
    (await reportEntries(id)).map((e) => [e.type, e.recipient]),
    [
      ['bounced', sender],
      ['complained', sender],
    ],
  );
  assert.deepEqual(await recipientStatus(id), { [victim]: 'delivered', [sender]: 'bounced' });
  assert.equal(await suppression(victim), undefined);
  assert.equal(await suppression(sender), 'hard_bounce');

  // A return path signed for an address that is not a recipient of this message records nothing.
  const stranger = returnPathOf(id, address('stranger'));
  assert.match(await deliverReport(stranger, dsn(stranger, [failed(victim)])), /^250 /);
  assert.equal((await reportEntries(id)).length, 2);
});

test('a DSN to the old message-only return path is still read, by the recipient it names', async () => {
  const [gone, fine] = [address('oldgone'), address('oldfine')];
  const { id } = await sentMessage([gone, fine]);
  const old = oldFormReturnPath(id);
  assert.match(await deliverReport(old, dsn(old, [failed(gone.toUpperCase())])), /^250 /);
  assert.deepEqual(
    (await reportEntries(id)).map((e) => [e.type, e.recipient]),
    [['bounced', gone]],
  );
  assert.equal(await suppression(gone), 'hard_bounce');
  assert.equal(await suppression(fine), undefined);
});

test('to the old return path, a complaint without Original-Rcpt-To goes to the recipient the original names, or the only one', async () => {
  const feedback = ['Feedback-Type: abuse', 'User-Agent: ExampleFBL/1.0', 'Version: 1'];

  // The embedded original names one of the two recipients.
  const [one, two] = [address('one'), address('two')];
  const pair = await sentMessage([one, two]);
  pair.verp = oldFormReturnPath(pair.id);
  await deliverReport(pair.verp, arf(pair.verp, feedback, two.toUpperCase()));
  assert.deepEqual(
    (await reportEntries(pair.id)).map((e) => e.recipient),
    [two],
  );

  // Redacted original, single recipient: it can only be them.
  const only = address('only');
  const single = await sentMessage([only]);
  single.verp = oldFormReturnPath(single.id);
  await deliverReport(single.verp, arf(single.verp, feedback, 'redacted@isp.example.net'));
  assert.deepEqual(
    (await reportEntries(single.id)).map((e) => e.recipient),
    [only],
  );

  // Both recipients named, none singled out: nobody is blamed.
  const [a, b] = [address('a'), address('b')];
  const both = await sentMessage([a, b]);
  both.verp = oldFormReturnPath(both.id);
  assert.match(await deliverReport(both.verp, arf(both.verp, feedback, `${a}, ${b}`)), /^250 /);
  assert.deepEqual(await reportEntries(both.id), []);
  assert.equal(await suppression(a), undefined);
});

test('a failed DSN with a 4.x.x status is a soft bounce: recorded, not suppressed', async () => {
  const full = address('full');
  const { id, verp } = await sentMessage([full]);
  await deliverReport(verp, dsn(verp, [failed(full, '4.2.2', 'smtp; 452 4.2.2 Mailbox full')]));
  const entries = await reportEntries(id);
  assert.deepEqual(entries[0]!.data, {
    bounce: { type: 'soft', smtp_code: 452, diagnostic: '452 4.2.2 Mailbox full' },
    status: '4.2.2',
    source: 'dsn',
  });
  const [event] = await webhookEvents(id, 'email.bounced');
  assert.deepEqual(
    [(event?.bounce as Record<string, unknown>).type, (event?.bounce as Record<string, unknown>).subType],
    ['Transient', 'MailboxFull'],
  );
  assert.deepEqual(await recipientStatus(id), { [full]: 'bounced' });
  assert.equal(await suppression(full), undefined);
});

test('a hard bounce that refuses the content, not the mailbox, is recorded but not suppressed', async () => {
  const picky = address('picky');
  const { id, verp } = await sentMessage([picky]);
  await deliverReport(verp, dsn(verp, [failed(picky, '5.7.1', 'smtp; 554 5.7.1 Message rejected as spam')]));
  assert.equal((await reportEntries(id))[0]?.type, 'bounced');
  assert.equal(await suppression(picky), undefined);
});

test('Action: delayed, delivered, relayed and expanded record nothing', async () => {
  const slow = address('slow');
  const { id, verp } = await sentMessage([slow]);
  const block = (action: string, status: string) => [
    `Final-Recipient: rfc822; ${slow}`,
    `Action: ${action}`,
    `Status: ${status}`,
  ];
  const report = dsn(verp, [
    block('delayed', '4.4.7'),
    block('delivered', '2.0.0'),
    block('relayed', '2.0.0'),
    block('expanded', '2.0.0'),
  ]);
  assert.match(await deliverReport(verp, report), /^250 /);
  assert.deepEqual(await reportEntries(id), []);
  assert.deepEqual(await recipientStatus(id), { [slow]: 'delivered' });
});

test('RCPT TO anything but a signed return path is refused with 550, and nothing is recorded', async () => {
  const victim = address('victim');
  const { id, verp } = await sentMessage([victim]);
  const at = verp.indexOf('@');
  const forged = `${verp.slice(0, at - 1)}${verp[at - 1] === '0' ? '1' : '0'}${verp.slice(at)}`;

  const session = await openSmtp(inbound.port);
  assert.match(await session.reply(), /^220 /);
  assert.match(await session.command('EHLO client.example.net'), /^250[ -]/);
  assert.match(await session.command('MAIL FROM:<>'), /^250 /);
  assert.match(await session.command(`RCPT TO:<${forged}>`), /^550 5\.1\.1 /);
  assert.match(await session.command(`RCPT TO:<postmaster@${RETURN_PATH_DOMAIN}>`), /^550 /);
  assert.match(await session.command('RCPT TO:<someone@example.com>'), /^550 /, 'not a relay');
  assert.match(await session.command('DATA'), /^503 /, 'no recipient was accepted');
  // The same signed address at any domain is still the message's return path.
  assert.match(await session.command(`RCPT TO:<${verp.slice(0, at)}@other.example>`), /^250 /);
  assert.match(await session.command('QUIT'), /^221 /);
  session.end();

  await assert.rejects(deliverReport(forged, dsn(forged, [failed(victim)])), { responseCode: 550 });
  assert.deepEqual(await reportEntries(id), []);
  assert.equal(await suppression(victim), undefined);
});

test('a report to the return path of a message that no longer exists is accepted and records nothing', async () => {
  const verp = returnPathOf(randomUUID(), 'nobody@example.com');
  assert.match(await deliverReport(verp, dsn(verp, [failed('nobody@example.com')])), /^250 /);
  assert.equal(await suppression('nobody@example.com'), undefined);
});

test('a message that is not a report (an auto-reply) is accepted and dropped', async () => {
  const away = address('away');
  const { id, verp } = await sentMessage([away]);
  const autoReply = [
    `From: ${away}`,
    `To: ${verp}`,
    'Subject: Out of office',
    'Auto-Submitted: auto-replied',
    '',
    `I am away. Final-Recipient: rfc822; ${away}`,
    'Action: failed',
    'Status: 5.1.1',
    '',
  ].join(CRLF);
  assert.match(await deliverReport(verp, autoReply), /^250 /);
  assert.deepEqual(await reportEntries(id), []);
  assert.equal(await suppression(away), undefined);
});

test('garbage reports record nothing and the listener stays up', async () => {
  const victim = address('garbage');
  const { id, verp } = await sentMessage([victim]);
  const report = (type: string, part: string, headers = '') =>
    [
      'MIME-Version: 1.0',
      `Content-Type: multipart/report; report-type=${type}; boundary="g"`,
      headers,
      '',
      '--g',
      `Content-Type: message/${type}`,
      '',
      part,
      '--g--',
      '',
    ].join(CRLF);
  const garbage = [
    report('delivery-status', 'Final-Recipient rfc822 nothing\r\n\0\0\0\r\n: : :\r\n'),
    report('delivery-status', `Final-Recipient: rfc822; ${victim}\r\nAction: failed\r\nStatus: five`),
    report('delivery-status', `Final-Recipient: x400; ${victim}\r\nAction: failed\r\nStatus: 5.1.1`),
    report('delivery-status', `Final-Recipient: rfc822; ${'x'.repeat(300_000)}\r\nAction: failed\r\nStatus: 5.1.1`),
    report('delivery-status', `Final-Recipient: rfc822; not-an-address\r\nAction: failed\r\nStatus: 5.1.1`),
    report('feedback-report', 'Feedback-Type: not-spam\r\nUser-Agent: x\r\nVersion: 1'),
    report('feedback-report', 'Feedback-Type: \u0000\u0001 abuse!\r\nVersion: 1'),
    report('feedback-report', 'User-Agent: no type\r\nVersion: 1'),
    report('unknown-type', `Final-Recipient: rfc822; ${victim}\r\nAction: failed\r\nStatus: 5.1.1`),
    'Content-Type: multipart/report; report-type=delivery-status\r\n\r\nno boundary at all\r\n',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="x"\r\n\r\n--x\r\n--x\r\n--x--\r\n',
    Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)).toString('latin1'),
    '\r\n\r\n\r\n',
  ];
  for (const raw of garbage) assert.match(await deliverReport(verp, raw), /^250 /);

  // A client that hangs up in the middle of DATA.
  const session = await openSmtp(inbound.port);
  await session.reply();
  await session.command('HELO client.example.net');
  await session.command('MAIL FROM:<>');
  await session.command(`RCPT TO:<${verp}>`);
  assert.match(await session.command('DATA'), /^354 /);
  session.write(dsn(verp, [failed(victim)]).slice(0, 400));
  session.end();

  assert.deepEqual(await reportEntries(id), []);
  assert.equal(await suppression(victim), undefined);
  // Still up, and still recording.
  assert.match(await deliverReport(verp, dsn(verp, [failed(victim)])), /^250 /);
  assert.equal((await reportEntries(id)).length, 1);
});

test('a message over 10 MiB is refused with 552', async () => {
  const { verp } = await sentMessage([address('big')]);
  const session = await openSmtp(inbound.port);
  await session.reply();
  assert.match(await session.command('EHLO client.example.net'), /SIZE 10485760/);
  assert.match(await session.command('MAIL FROM:<> SIZE=20000000'), /^552 /);
  session.end();

  const huge = `Subject: big${CRLF}${CRLF}${`${'x'.repeat(998)}${CRLF}`.repeat(10_600)}`;
  await assert.rejects(deliverReport(verp, huge), { responseCode: 552 });
});

test('a database failure answers 451, so the sender tries again later', async () => {
  const gone = address('retry');
  const { id, verp } = await sentMessage([gone]);
  const broken: Database = {
    kind: t.db.kind,
    query: <Row>(text: string, params?: readonly unknown[]) => t.db.query<Row>(text, params),
    transaction: async () => {
      throw new Error('the database is unreachable');
    },
    listen: (channel, onNotify) => t.db.listen(channel, onNotify),
    close: async () => {},
  };
  const errors: unknown[] = [];
  const log = { ...quiet, error: (...args: unknown[]) => void errors.push(args) };
  const failing = await startInboundServer({ db: broken, signer: t.app.signer, host: '127.0.0.1', port: 0, log });
  try {
    await assert.rejects(deliverReport(verp, dsn(verp, [failed(gone)]), failing.port), { responseCode: 451 });
  } finally {
    await failing.close();
  }
  assert.equal(errors.length, 1);
  assert.deepEqual(await reportEntries(id), []);
  // The retry, once the database is back.
  assert.match(await deliverReport(verp, dsn(verp, [failed(gone)])), /^250 /);
  assert.equal((await reportEntries(id)).length, 1);
});

test('close() lets a message in progress finish, and tells idle sessions to go', async () => {
  const gone = address('closing');
  const { id, verp } = await sentMessage([gone]);
  const server = await startInboundServer({ db: t.db, signer: t.app.signer, host: '127.0.0.1', port: 0, log: quiet });
  const idle = await openSmtp(server.port);
  await idle.reply();
  await idle.command('EHLO idle.example.net');
  const busy = await openSmtp(server.port);
  await busy.reply();
  await busy.command('EHLO busy.example.net');
  await busy.command('MAIL FROM:<>');
  await busy.command(`RCPT TO:<${verp}>`);
  assert.match(await busy.command('DATA'), /^354 /);
  const report = dsn(verp, [failed(gone)]);
  busy.write(report.slice(0, 200));

  let closed = false;
  const closing = server.close().then(() => (closed = true));
  assert.match(await idle.reply(), /^421 /);
  busy.write(`${report.slice(200)}${CRLF}.${CRLF}`);
  assert.match(await busy.reply(), /^250 /);
  assert.equal((await reportEntries(id)).length, 1, 'recorded before the answer');
  assert.match(await busy.command('QUIT'), /^421 /);
  await closing;
  assert.ok(closed);
  await assert.rejects(openSmtp(server.port).then((s) => s.reply()));
});

describe('reading reports (mailparser output)', () => {
  const read = async (raw: string) => readDeliveryReports(await simpleParser(raw, REPORT_PARSER_OPTIONS));

  test('mailparser folds message/delivery-status into text unless told to keep it', async () => {
    const raw = dsn('bounce@example.test', [failed('x@example.com')]);
    const plain = await simpleParser(raw);
    assert.ok(!plain.attachments.some((a) => a.contentType === 'message/delivery-status'));
    assert.match(String(plain.text), /Final-Recipient/);
    assert.equal(readDeliveryReports(plain).reports.length, 0);
    const kept = await simpleParser(raw, REPORT_PARSER_OPTIONS);
    assert.ok(kept.attachments.some((a) => a.contentType === 'message/delivery-status' && a.partId === '2'));
  });

  test('LF line endings, folded and repeated fields, any case, several recipients', async () => {
    const raw = [
      'Content-Type: multipart/report; report-type="delivery-status"; boundary=b',
      '',
      '--b',
      'Content-Type: message/delivery-status',
      '',
      'reporting-mta: dns; mx.example.com',
      '',
      'FINAL-RECIPIENT: RFC822; <First@Example.com>',
      'ORIGINAL-RECIPIENT: rfc822;alias@example.org',
      'action: Failed',
      'status: 5.1.1 (bad destination mailbox address)',
      'Status: 4.0.0',
      'diagnostic-code: SMTP; 550-5.1.1 The email account that you tried to reach',
      '    does not exist.',
      '\tPlease try again.',
      '',
      '',
      'Original-Recipient: rfc822; second@example.com',
      'Action: failed',
      'Status: 4.4.7',
      'Diagnostic-Code: X-Postfix; delivery temporarily suspended',
      '',
      'Final-Recipient: rfc822; third@example.com',
      'Action: delayed',
      'Status: 4.4.1',
      '--b--',
      '',
    ].join('\n');
    assert.deepEqual((await read(raw)).reports, [
      {
        kind: 'bounce',
        recipient: 'First@Example.com',
        originalRecipient: 'alias@example.org',
        type: 'hard',
        status: '5.1.1',
        smtpCode: 550,
        diagnostic: '550-5.1.1 The email account that you tried to reach does not exist. Please try again.',
      },
      {
        kind: 'bounce',
        recipient: 'second@example.com',
        originalRecipient: null,
        type: 'soft',
        status: '4.4.7',
        smtpCode: null,
        diagnostic: 'delivery temporarily suspended',
      },
    ]);
  });

  test('RFC 6533 message/global-delivery-status, and values capped without control characters', async () => {
    const raw = [
      'Content-Type: multipart/report; report-type=delivery-status; boundary=b',
      '',
      '--b',
      'Content-Type: message/global-delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.com',
      '',
      'Final-Recipient: utf-8; jörg@bücher.example',
      'Action: failed',
      'Status: 5.1.1',
      `Diagnostic-Code: smtp; 550 \u0000${'ü'.repeat(995)}😀${'y'.repeat(5000)}`,
      '--b--',
      '',
    ].join('\r\n');
    const [bounce] = (await read(raw)).reports;
    assert.equal(bounce?.kind, 'bounce');
    if (bounce?.kind !== 'bounce') return;
    assert.equal(bounce.recipient, 'jörg@bücher.example');
    // At most 1000: '550 ' and 995 'ü' are 999, and 😀 (two UTF-16 units) is not cut in half.
    assert.equal(bounce.diagnostic, `550 ${'ü'.repeat(995)}`);
    assert.ok(!bounce.diagnostic.includes('\u0000'));
  });

  test('ARF: Original-Rcpt-To, several of them, and the embedded original', async () => {
    const one = await read(
      arf(
        'b@example.test',
        ['Feedback-Type: Fraud', 'Original-Rcpt-To: <x@example.com>'],
        'x@example.com, Y <y@example.com>',
      ),
    );
    assert.deepEqual(one, {
      reports: [{ kind: 'complaint', recipient: 'x@example.com', feedbackType: 'fraud', userAgent: null }],
      originalRecipients: ['x@example.com', 'y@example.com'],
    });
    const many = await read(
      arf(
        'b@example.test',
        ['Feedback-Type: abuse', 'Original-Rcpt-To: x@example.com', 'Original-Rcpt-To: y@example.com'],
        'z@example.com',
      ),
    );
    assert.equal(many.reports[0]?.kind === 'complaint' && many.reports[0].recipient, null);
  });
});
