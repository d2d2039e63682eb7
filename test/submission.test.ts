// SMTP submission with real clients (nodemailer, and Python's smtplib) over STARTTLS and implicit TLS:
// what is handed in is accepted through the same core as POST /emails, delivered DKIM-signed to a
// loopback SMTP sink, and every refusal gets its SMTP reply.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import nodemailer from 'nodemailer';
import { loadTlsCertificate } from '../src/submission/tls-certificate.ts';
import { messagesAccepted } from '../src/platform/metrics.ts';
import { MAX_RECIPIENTS } from '../src/emails/validate-message.ts';
import { mayAuthenticate, startSubmissionServer, type SubmissionServer } from '../src/submission/submission-server.ts';
import { bearer, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startRelayTestBed, type RelayTestBed } from './helpers/delivery.ts';
import { counts, frozenRateClock, setLimits } from './helpers/emails.ts';
import { dkimResult as checkDkim } from './helpers/dkim.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

const LIMIT_BYTES = 200_000;
const log = { info: () => {}, warn: () => {}, error: () => {} };

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;
let dataDir: string;
let startTls: SubmissionServer;
let implicitTls: SubmissionServer;

let bed: RelayTestBed;

before(async () => {
  bed = await startRelayTestBed('submit', { MAILROOM_BODY_LIMIT_BYTES: String(LIMIT_BYTES) });
  ({ t, org, sink } = bed);
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-submission-'));
  const config = { ...t.config, dataDir };
  const tls = await loadTlsCertificate(config);
  const common = { db: t.db, config, host: '127.0.0.1', port: 0, tls, log };
  startTls = await startSubmissionServer({ ...common, implicitTls: false });
  implicitTls = await startSubmissionServer({ ...common, implicitTls: true });
});
after(async () => {
  await startTls.close();
  await implicitTls.close();
  await bed.close();
  await rm(dataDir, { recursive: true, force: true });
});

const transport = (
  options: { implicit?: boolean; pass?: string; user?: string; pool?: boolean; authMethod?: string } = {},
) =>
  nodemailer.createTransport({
    ...(options.pool ? { pool: true, maxConnections: 1 } : {}),
    ...(options.authMethod ? { authMethod: options.authMethod } : {}),
    host: '127.0.0.1',
    port: options.implicit ? implicitTls.port : startTls.port,
    secure: options.implicit ?? false,
    requireTLS: !options.implicit,
    auth: { user: options.user ?? 'mailroom', pass: options.pass ?? org.sendingKey },
    tls: { rejectUnauthorized: false }, // the self-signed certificate of the data directory
  });

const acceptedOverSmtp = async () =>
  (await messagesAccepted.get()).values.find((sample) => sample.labels.carrier === 'smtp')?.value ?? 0;

const idOf = (response: string) => /^250 2\.0\.0 OK <([0-9a-f-]{36})>$/.exec(response)?.[1];

const dkimResult = (raw: Buffer) => checkDkim(t.db, org.domain, raw);

/** A line-by-line SMTP conversation on a plain socket, for what mail libraries will not send. */
async function rawSession(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  let buffer = '';
  const waiting: Array<(line: string) => void> = [];
  socket.on('data', (chunk) => {
    buffer += chunk.toString('utf8');
    let end;
    while ((end = buffer.indexOf('\r\n')) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      // Only the last line of a multi-line reply ("250 …", not "250-…") answers a command.
      if (/^\d{3} /.test(line)) waiting.shift()?.(line);
    }
  });
  const reply = () => new Promise<string>((resolve) => waiting.push(resolve));
  const greeting = reply();
  await greeting;
  const auth = Buffer.from(`\0mailroom\0${org.fullKey}`).toString('base64');
  return {
    socket,
    reply,
    async command(line: string): Promise<string> {
      const answer = reply();
      socket.write(`${line}\r\n`);
      return answer;
    },
    async start(): Promise<void> {
      assert.match(await this.command('EHLO client.example'), /^250 /);
      assert.match(await this.command(`AUTH PLAIN ${auth}`), /^235 /);
      assert.match(await this.command(`MAIL FROM:<hello@${org.domain}>`), /^250 /);
    },
    async data(message: string): Promise<string> {
      assert.match(await this.command('DATA'), /^354 /);
      const answer = reply();
      socket.write(`${message.replace(/\r?\n\./g, '\r\n..')}\r\n.\r\n`);
      return answer;
    },
    end: () => socket.destroy(),
  };
}

describe('accepted messages', () => {
  test('nodemailer over STARTTLS: 250 with the id after commit; delivered DKIM-signed with its attachments', async () => {
    sink.reset();
    const pdf = Buffer.from('%PDF-1.4 invoice');
    const acceptedBefore = await acceptedOverSmtp();
    const info = await transport().sendMail({
      from: `Acme Billing <billing@${org.domain}>`,
      to: 'Ann <ann@example.com>',
      cc: 'carl@example.com',
      bcc: 'audit@example.com',
      replyTo: 'support@example.com',
      subject: 'Invoice 7 — über',
      text: 'Your invoice is attached.',
      html: '<p>Your invoice is <b>attached</b>.</p>',
      headers: { 'X-Tags': 'kind=invoice, vip', 'X-Order': '7', 'Idempotency-Key': 'order-7-invoice' },
      attachments: [{ filename: 'invoice.pdf', content: pdf, contentType: 'application/pdf' }],
    });
    const id = idOf(info.response);
    assert.ok(id, info.response);
    assert.equal(
      await acceptedOverSmtp(),
      acceptedBefore + 1,
      'counted in mailroom_messages_accepted_total{carrier="smtp"}',
    );

    // Committed before the 250: the message reads back at once.
    const read = await t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(org.fullKey) });
    const email = read.json();
    assert.equal(email.from, `Acme Billing <billing@${org.domain}>`);
    assert.deepEqual(
      [email.to, email.cc, email.bcc, email.reply_to],
      [['Ann <ann@example.com>'], ['carl@example.com'], ['audit@example.com'], ['support@example.com']],
    );
    assert.equal(email.subject, 'Invoice 7 — über');
    // Read back as Resend's list of name and value (a bare name is set: "true"), in no promised order.
    assert.deepEqual(
      email.tags.sort((a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name)),
      [
        { name: 'kind', value: 'invoice' },
        { name: 'vip', value: 'true' },
      ],
    );
    assert.deepEqual(email.headers, { 'X-Order': '7' }, 'instruction headers and Mailroom-owned ones are not sent on');
    assert.deepEqual(email.attachments, [
      { filename: 'invoice.pdf', content_type: 'application/pdf', size: pdf.length },
    ]);

    // Every recipient gets the message (one copy, or one each when the organization tracks).
    await waitFor(() => sink.transactions.flatMap((transaction) => transaction.rcptTo).length === 3, 10_000);
    const received = sink.transactions.flatMap((transaction) => transaction.rcptTo).sort();
    assert.deepEqual(received, ['ann@example.com', 'audit@example.com', 'carl@example.com']);
    for (const sent of sink.transactions) {
      assert.equal(await dkimResult(sent.raw), 'pass');
      const parsed = await sent.parse();
      assert.equal(parsed.messageId, `<${id}@${org.domain}>`, "Mailroom's own Message-ID, not the client's");
      assert.equal(parsed.headers.get('bcc'), undefined);
      assert.deepEqual(parsed.attachments[0]!.content, pdf);
      assert.equal(parsed.attachments[0]!.filename, 'invoice.pdf');
    }
  });

  test('implicit TLS, AUTH LOGIN, several messages on one connection; envelope recipients not in To/Cc become Bcc', async () => {
    const pooled = transport({ implicit: true, pool: true, authMethod: 'LOGIN' });
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const info = await pooled.sendMail({
        from: `hello@${org.domain}`,
        to: 'ann@example.com',
        subject: `m${i}`,
        text: 'hi',
        envelope: { from: `hello@${org.domain}`, to: ['ann@example.com', 'hidden@example.com'] },
      });
      ids.push(idOf(info.response));
    }
    assert.equal(new Set(ids).size, 3);
    const email = (
      await t.app.inject({ method: 'GET', url: `/emails/${ids[0]}`, headers: bearer(org.fullKey) })
    ).json();
    assert.deepEqual(email.bcc, ['hidden@example.com']);
    pooled.close();
  });

  test('an Idempotency-Key header: a retry after a lost reply is the same message, sent once', async () => {
    const mail = {
      from: `hello@${org.domain}`,
      to: 'ann@example.com',
      subject: 'Password reset',
      text: 'Your code is 123456',
      headers: { 'Idempotency-Key': `reset-${process.pid}` },
    };
    const first = await transport().sendMail(mail);
    const before = await counts(t.db, org.id);
    // nodemailer writes a new Date and Message-ID for the retry: still the same message.
    const again = await transport().sendMail(mail);
    assert.equal(idOf(again.response), idOf(first.response));
    assert.deepEqual(await counts(t.db, org.id), before);
    await assert.rejects(
      transport().sendMail({ ...mail, text: 'Your code is 999999' }),
      (error: { response?: string }) => {
        assert.match(error.response ?? '', /^550 5\.6\.0 .*different request/);
        return true;
      },
    );
  });

  test('an inline image without Content-Disposition keeps its Content-ID; a long References is shortened', async () => {
    const root = '<root@example.com>';
    const references = [root, ...Array.from({ length: 60 }, (_, i) => `<reply-${i}-${'x'.repeat(20)}@example.com>`)];
    const session = await rawSession(startTls.port);
    await session.start();
    assert.match(await session.command('RCPT TO:<ann@example.com>'), /^250 /);
    const reply = await session.data(
      [
        `From: hello@${org.domain}`,
        'To: ann@example.com',
        'Subject: related',
        `References: ${references.join('\r\n ')}`,
        'MIME-Version: 1.0',
        'Content-Type: multipart/related; boundary="b"',
        '',
        '--b',
        'Content-Type: text/html; charset=utf-8',
        '',
        '<p><img src="cid:logo@acme"></p>',
        '--b',
        'Content-Type: image/png; name="logo.png"',
        'Content-ID: <logo@acme>',
        'Content-Transfer-Encoding: base64',
        '',
        Buffer.from('png').toString('base64'),
        '--b--',
      ].join('\r\n'),
    );
    const id = idOf(reply);
    assert.ok(id, reply);
    session.end();
    const { rows } = await t.db.query<{ content_id: string | null; headers: Record<string, string> }>(
      `SELECT a.content_id, e.headers FROM email_attachments a JOIN emails e ON e.id = a.email_id WHERE e.id = $1`,
      [id],
    );
    assert.equal(rows[0]!.content_id, 'logo@acme');
    const kept = rows[0]!.headers.References!.split(' ');
    assert.ok(kept.join(' ').length <= 998);
    assert.equal(kept[0], root, 'the thread root stays');
    assert.equal(kept.at(-1), references.at(-1), 'and the newest ids');
  });

  test("a client that is not JavaScript: Python's smtplib over STARTTLS and over implicit TLS", async () => {
    const script = `
import smtplib, ssl, sys
from email.message import EmailMessage
port, implicit, key, sender = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3], sys.argv[4]
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
message = EmailMessage()
message["From"] = sender
message["To"] = "py@example.com"
message["Subject"] = "From Python"
message.set_content("Sent with smtplib")
message.add_attachment(b"data", maintype="application", subtype="octet-stream", filename="data.bin")
if implicit:
    client = smtplib.SMTP_SSL("127.0.0.1", port, context=context)
else:
    client = smtplib.SMTP("127.0.0.1", port)
    client.starttls(context=context)
client.login("resend", key)
client.send_message(message)
print(client.noop()[0])
client.quit()
`;
    for (const [port, implicit] of [
      [startTls.port, '0'],
      [implicitTls.port, '1'],
    ] as const) {
      const { stdout } = await promisify(execFile)('python3', [
        '-c',
        script,
        String(port),
        implicit,
        org.sendingKey,
        `Py <py@${org.domain}>`,
      ]);
      assert.equal(stdout.trim(), '250');
    }
    const listed = (
      await t.app.inject({ method: 'GET', url: '/emails?recipient=py@example.com', headers: bearer(org.fullKey) })
    ).json();
    assert.equal(listed.data.length, 2);
    const attachments = (
      await t.app.inject({ method: 'GET', url: `/emails/${listed.data[0].id}`, headers: bearer(org.fullKey) })
    ).json().attachments;
    assert.deepEqual(attachments, [{ filename: 'data.bin', content_type: 'application/octet-stream', size: 4 }]);
  });
});

test('pipelining: MAIL, RCPT and DATA in one write are answered in order', async () => {
  const session = await rawSession(startTls.port);
  assert.match(await session.command('EHLO client.example'), /^250 /);
  const auth = Buffer.from(`\0mailroom\0${org.fullKey}`).toString('base64');
  assert.match(await session.command(`AUTH PLAIN ${auth}`), /^235 /);
  const replies = Promise.all([session.reply(), session.reply(), session.reply()]);
  session.socket.write(`MAIL FROM:<hello@${org.domain}>\r\nRCPT TO:<pipe@example.com>\r\nDATA\r\n`);
  const [mail, rcpt, data] = await replies;
  assert.match(mail!, /^250 /);
  assert.match(rcpt!, /^250 /);
  assert.match(data!, /^354 /);
  const done = session.reply();
  session.socket.write(`From: hello@${org.domain}\r\nTo: pipe@example.com\r\nSubject: piped\r\n\r\nhi\r\n.\r\n`);
  assert.match(await done, /^250 2\.0\.0 OK </);
  session.end();
});

describe('refusals', () => {
  const refusal = async (promise: Promise<unknown>): Promise<string> => {
    try {
      await promise;
    } catch (error) {
      return (error as { response?: string }).response ?? String(error);
    }
    assert.fail('expected a refusal');
  };

  test('a wrong key, another user name or a session token: 535 5.7.8', async () => {
    const mail = { from: `hello@${org.domain}`, to: 'ann@example.com', subject: 's', text: 't' };
    assert.match(await refusal(transport({ pass: 'mr_' + 'x'.repeat(43) }).sendMail(mail)), /^535 5\.7\.8 /);
    assert.match(await refusal(transport({ user: 'admin' }).sendMail(mail)), /^535 5\.7\.8 /);
    assert.match(await refusal(transport({ pass: org.session }).sendMail(mail)), /^535 5\.7\.8 /);
  });

  test('the third failed AUTH on a connection closes it: 421', async () => {
    const session = await rawSession(startTls.port);
    assert.match(await session.command('EHLO client.example'), /^250 /);
    const wrong = Buffer.from(`\0mailroom\0mr_${'x'.repeat(43)}`).toString('base64');
    assert.match(await session.command(`AUTH PLAIN ${wrong}`), /^535 5\.7\.8 /);
    assert.match(await session.command(`AUTH PLAIN ${wrong}`), /^535 5\.7\.8 /);
    const closed = new Promise((resolve) => session.socket.once('close', resolve));
    assert.match(await session.command(`AUTH PLAIN ${wrong}`), /^421 4\.7\.0 /);
    await closed;
  });

  test('MAIL before AUTH: 530 5.7.0', async () => {
    const session = await rawSession(startTls.port);
    assert.match(await session.command('EHLO client.example'), /^250 /);
    assert.match(await session.command(`MAIL FROM:<hello@${org.domain}>`), /^530 5\.7\.0 /);
    session.end();
  });

  test('the monthly quota used up: 554 5.7.1', async () => {
    await setLimits(t.db, org.id, { monthlyQuota: 1 });
    try {
      const reply = await refusal(
        transport().sendMail({ from: `hello@${org.domain}`, to: 'ann@example.com', subject: 'q', text: 't' }),
      );
      assert.match(reply, /^554 5\.7\.1 .*quota/);
    } finally {
      await setLimits(t.db, org.id, { monthlyQuota: 1_000_000 });
    }
  });

  test('AUTH needs TLS except from loopback', () => {
    assert.equal(mayAuthenticate({ secure: false, remoteAddress: '203.0.113.9' }), false);
    assert.equal(mayAuthenticate({ secure: false, remoteAddress: '::ffff:198.51.100.7' }), false);
    assert.equal(mayAuthenticate({ secure: true, remoteAddress: '203.0.113.9' }), true);
    assert.equal(mayAuthenticate({ secure: false, remoteAddress: '127.0.0.1' }), true);
    assert.equal(mayAuthenticate({ secure: false, remoteAddress: '::1' }), true);
    assert.equal(mayAuthenticate({ secure: false, remoteAddress: '::ffff:127.0.0.1' }), true);
  });

  test('a From on a domain the organization has not verified: 550 5.7.1', async () => {
    const reply = await refusal(
      transport().sendMail({ from: 'someone@not-verified.example', to: 'ann@example.com', subject: 's', text: 't' }),
    );
    assert.match(reply, /^550 5\.7\.1 .*not-verified\.example/);
  });

  test('a key limited to one domain (domain_id) sends from it, and another domain of the organization gets 550 5.7.1', async () => {
    const domains = await t.app.inject({ method: 'GET', url: '/domains', headers: bearer(org.fullKey) });
    const ownDomainId = domains.json().data.find((d: { name: string }) => d.name === org.domain).id as string;
    const second = await t.app.inject({
      method: 'POST',
      url: '/domains',
      headers: bearer(org.fullKey),
      payload: { name: `smtp-second-${process.pid}.example.test` },
    });
    assert.equal(second.statusCode, 201, second.body);
    await t.db.query(`UPDATE domains SET status = 'verified', verified_at = now() WHERE id = $1`, [second.json().id]);
    const key = await t.app.inject({
      method: 'POST',
      url: '/api-keys',
      headers: bearer(org.fullKey),
      payload: { name: 'smtp limited', permission: 'sending_access', domain_id: ownDomainId },
    });
    assert.equal(key.statusCode, 201, key.body);
    const limited = transport({ pass: key.json().token });
    const mail = { to: 'ann@example.com', subject: 'limited', text: 't' };
    assert.ok(idOf((await limited.sendMail({ ...mail, from: `hello@${org.domain}` })).response));
    const before = await counts(t.db, org.id);
    const reply = await refusal(limited.sendMail({ ...mail, from: `hello@${second.json().name}` }));
    assert.match(
      reply,
      new RegExp(`^550 5\\.7\\.1 This API key may send only from ${org.domain.replaceAll('.', '\\.')}, not from`),
    );
    assert.match(reply, /\(from\)$/);
    assert.deepEqual(await counts(t.db, org.id), before);
    // The organization's unlimited sending key sends from the second domain.
    assert.ok(idOf((await transport().sendMail({ ...mail, from: `hello@${second.json().name}` })).response));
  });

  test('a 51st RCPT TO: 452 4.5.3 with the limit in words, whatever the headers say; the 50 accepted get the message', async () => {
    const overLimit = new RegExp(
      `^452 4\\.5\\.3 Too many recipients: at most ${MAX_RECIPIENTS} recipients per message`,
    );
    const session = await rawSession(startTls.port);
    await session.start();
    for (let i = 0; i < MAX_RECIPIENTS; i++) {
      assert.match(await session.command(`RCPT TO:<r${i}@example.com>`), /^250 /);
    }
    assert.match(await session.command(`RCPT TO:<r${MAX_RECIPIENTS}@example.com>`), overLimit);
    // The transaction goes on with the 50 accepted: named in To and Cc, or sent to as Bcc.
    const id = idOf(
      await session.data(
        `From: hello@${org.domain}\r\nTo: r0@example.com\r\nCc: r1@example.com\r\nSubject: 50\r\n\r\nhi`,
      ),
    );
    assert.ok(id);
    const email = (await t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(org.fullKey) })).json();
    assert.deepEqual(
      [email.to, email.cc, email.bcc.length],
      [['r0@example.com'], ['r1@example.com'], MAX_RECIPIENTS - 2],
    );

    // Counted in RCPT TO commands of the transaction: a new one starts from 0, and a repeated address counts.
    assert.match(await session.command(`MAIL FROM:<hello@${org.domain}>`), /^250 /);
    for (let i = 0; i < MAX_RECIPIENTS; i++) assert.match(await session.command('RCPT TO:<same@example.com>'), /^250 /);
    assert.match(await session.command('RCPT TO:<same@example.com>'), overLimit);
    session.end();

    // A mail library sends every recipient it was given, goes on with those accepted (the 51st got 452),
    // and its headers name the one refused: the message is refused for the limit, not for naming someone
    // the envelope does not.
    const before = await counts(t.db, org.id);
    const to = Array.from({ length: MAX_RECIPIENTS + 1 }, (_, i) => `n${i}@example.com`);
    const reply = await refusal(transport().sendMail({ from: `hello@${org.domain}`, to, subject: 's', text: 't' }));
    assert.match(
      reply,
      new RegExp(
        `^550 5\\.5\\.3 A message may have at most ${MAX_RECIPIENTS} recipients; the to header names n50@example\\.com`,
      ),
    );
    assert.deepEqual(await counts(t.db, org.id), before);
  });

  test('the size limit is announced with SIZE and enforced: 552 5.3.4', async () => {
    const session = await rawSession(startTls.port);
    const ehlo = await new Promise<string>((resolve) => {
      let text = '';
      session.socket.on('data', function collect(chunk) {
        text += chunk.toString();
        if (/^250 /m.test(text)) {
          session.socket.off('data', collect);
          resolve(text);
        }
      });
      session.socket.write('EHLO client.example\r\n');
    });
    assert.match(ehlo, new RegExp(`250[- ]SIZE ${LIMIT_BYTES}`));
    session.end();
    const reply = await refusal(
      transport().sendMail({
        from: `hello@${org.domain}`,
        to: 'ann@example.com',
        subject: 'big',
        text: 'x'.repeat(LIMIT_BYTES + 10),
      }),
    );
    assert.match(reply, /^552 /);
  });

  test('the rate limit: 451 4.7.1, so the client keeps the message and retries', async () => {
    await setLimits(t.db, org.id, { rateLimit: 1 });
    // The bucket's clock stands still: the second message is over the limit however slowly it comes.
    const clock = frozenRateClock(t.db);
    try {
      const mail = { from: `hello@${org.domain}`, to: 'ann@example.com', subject: 'r', text: 't' };
      const sender = transport();
      assert.ok(idOf((await sender.sendMail(mail)).response));
      assert.match(await refusal(sender.sendMail(mail)), /^451 4\.7\.1 Rate limit/);
      // A second later the token is back, and the retry goes through.
      clock.advance(1000);
      assert.ok(idOf((await sender.sendMail(mail)).response));
    } finally {
      clock.release();
      await setLimits(t.db, org.id, { rateLimit: 1000 });
    }
  });

  test('a header line with a bare CR: 550 5.6.0, nothing stored', async () => {
    const before = await counts(t.db, org.id);
    const session = await rawSession(startTls.port);
    await session.start();
    assert.match(await session.command('RCPT TO:<ann@example.com>'), /^250 /);
    const reply = await session.data(
      `From: hello@${org.domain}\r\nTo: ann@example.com\r\nX-Note: one\rBcc: injected@example.com\r\nSubject: s\r\n\r\nbody`,
    );
    assert.match(reply, /^550 5\.6\.0 /);
    session.end();
    assert.deepEqual(await counts(t.db, org.id), before);
  });

  test('what the API schema refuses is refused here too: 101 attachments, a NUL in the body', async () => {
    const attachments = Array.from({ length: 101 }, (_, i) => ({ filename: `a${i}.txt`, content: 'x' }));
    const many = await refusal(
      transport().sendMail({
        from: `hello@${org.domain}`,
        to: 'ann@example.com',
        subject: 's',
        text: 't',
        attachments,
      }),
    );
    assert.match(many, /^550 5\.6\.0 .*\(attachments\)/);
    const nul = await refusal(
      transport().sendMail({ from: `hello@${org.domain}`, to: 'ann@example.com', subject: 's', text: 'a\u0000b' }),
    );
    assert.match(nul, /^550 5\.6\.0 text contains a character that cannot be stored/);
    // The API refuses it too, instead of failing on the database.
    const api = await t.app.inject({
      method: 'POST',
      url: '/emails',
      headers: bearer(org.fullKey),
      payload: { from: `hello@${org.domain}`, to: 'ann@example.com', subject: 's', text: 'a\u0000b' },
    });
    assert.deepEqual([api.statusCode, api.json().field], [400, 'text']);
  });

  test('a header recipient the envelope does not name: refused, not sent to', async () => {
    const before = await counts(t.db, org.id);
    const reply = await refusal(
      transport().sendMail({
        from: `hello@${org.domain}`,
        to: ['ann@example.com', 'bob@example.com'],
        subject: 'one copy each',
        text: 't',
        envelope: { from: `hello@${org.domain}`, to: ['ann@example.com'] },
      }),
    );
    assert.match(reply, /^550 5\.6\.0 .*bob@example\.com.*not an envelope recipient/);
    assert.deepEqual(await counts(t.db, org.id), before);
  });

  test('X-Tags given twice: 550 5.6.0', async () => {
    const session = await rawSession(startTls.port);
    await session.start();
    assert.match(await session.command('RCPT TO:<ann@example.com>'), /^250 /);
    const reply = await session.data(
      `From: hello@${org.domain}\r\nTo: ann@example.com\r\nX-Tags: a=1\r\nX-Tags: a=2\r\nSubject: s\r\n\r\nbody`,
    );
    assert.match(reply, /^550 5\.6\.0 The x-tags header is given more than once/);
    session.end();
  });

  test('a key revoked while its connection is open sends nothing more: 535 5.7.8', async () => {
    const key = await t.app.inject({
      method: 'POST',
      url: '/api-keys',
      headers: bearer(org.fullKey),
      payload: { name: 'smtp', permission: 'sending_access' },
    });
    const { id, token } = key.json();
    const pooled = transport({ pass: token, pool: true });
    const mail = { from: `hello@${org.domain}`, to: 'ann@example.com', subject: 'r', text: 't' };
    assert.ok(idOf((await pooled.sendMail(mail)).response));
    await t.app.inject({ method: 'DELETE', url: `/api-keys/${id}`, headers: bearer(org.fullKey) });
    assert.match(await refusal(pooled.sendMail(mail)), /^535 5\.7\.8 The API key has been revoked/);
    pooled.close();
  });

  test('a connection dropped in the middle of DATA stores nothing', async () => {
    const before = await counts(t.db, org.id);
    const session = await rawSession(startTls.port);
    await session.start();
    assert.match(await session.command('RCPT TO:<ann@example.com>'), /^250 /);
    assert.match(await session.command('DATA'), /^354 /);
    session.socket.write(`From: hello@${org.domain}\r\nTo: ann@example.com\r\nSubject: cut\r\n\r\nhalf a mess`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    session.end();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(await counts(t.db, org.id), before);
  });
});
