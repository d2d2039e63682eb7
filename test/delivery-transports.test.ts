import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dkimVerify } from 'mailauth';
import { simpleParser } from 'mailparser';
import { ConfigError, loadConfig, type Config } from '../src/platform/config.ts';
import { composeMessage } from '../src/delivery/compose.ts';
import { createComposer } from '../src/delivery/composer.ts';
import { classifySmtpReply } from '../src/delivery/smtp-outcome.ts';
import { createTransport, readCaptured, type TransportOptions } from '../src/delivery/transports/index.ts';
import type { OutgoingMessage, RecipientResult, Transport } from '../src/delivery/transport.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { openTestDatabase, type TestDatabase } from './helpers/database.ts';

// Every transport against real peers on loopback: an SMTP server (smtp-server) that records what it
// receives and answers as told, and a DNS server (dns2) whose zone each test writes.

const SENDER_DOMAIN = 'sender.test';
const SELECTOR = 'mailroom';
const keys = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  publicKeyEncoding: { type: 'spki', format: 'der' },
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
});
const DKIM_RECORD = `v=DKIM1; k=rsa; p=${keys.publicKey.toString('base64')}`;

let dataDir: string;
let database: TestDatabase; // the shaping state the SMTP transports share
let dns: DnsServer;
let sink: SmtpSink; // 127.0.0.1:P, with STARTTLS
let backupSink: SmtpSink; // 127.0.0.3:P, the same port: a second MX host
let plainSink: SmtpSink; // no STARTTLS
let brokenTlsSink: SmtpSink; // offers STARTTLS, then fails every handshake
let authSink: SmtpSink; // takes only relay:secret
const DEAD_HOST = '127.0.0.2'; // nothing listens there on P: connection refused

before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'mailroom-transports-'));
  database = await openTestDatabase();
  dns = await startDnsServer();
  sink = await startSmtpSink();
  backupSink = await startSmtpSink({ host: '127.0.0.3', port: sink.port });
  plainSink = await startSmtpSink({ starttls: false });
  brokenTlsSink = await startSmtpSink({ failTlsHandshake: true });
  authSink = await startSmtpSink({ checkCredentials: (user, pass) => user === 'relay' && pass === 'secret' });
});

after(async () => {
  await Promise.all([sink, backupSink, plainSink, brokenTlsSink, authSink, dns].map((server) => server?.close()));
  await rm(dataDir, { recursive: true, force: true });
  await database.close();
});

const transportFor = (config: Config, options: TransportOptions = {}) => createTransport(config, database.db, options);

function configWith(env: Record<string, string> = {}): Config {
  return loadConfig({
    MAILROOM_DATA_DIR: dataDir,
    MAILROOM_SMTP_TIMEOUT_MS: '2000',
    MAILROOM_DNS_TIMEOUT_MS: '300',
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_MX_PORT: String(sink.port),
    MAILROOM_HELO_NAME: 'out.mailroom.test',
    ...env,
  });
}

function outgoing(overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  const to = overrides.to ?? ['ann@one.test'];
  return {
    emailId: randomUUID(),
    organizationId: randomUUID(),
    firstAttempt: true,
    messageId: `<${randomUUID()}@${SENDER_DOMAIN}>`,
    from: `Sender <news@${SENDER_DOMAIN}>`,
    to,
    cc: [],
    replyTo: [],
    subject: 'Hello',
    html: '<p>Hello</p>',
    text: 'Hello',
    headers: undefined,
    attachments: [],
    envelope: { from: `bounces@${SENDER_DOMAIN}`, to },
    dkim: { domain: SENDER_DOMAIN, selector: SELECTOR, privateKey: keys.privateKey },
    tls: 'opportunistic',
    ...overrides,
  };
}

async function dkimResult(raw: Buffer | string): Promise<string> {
  const { results } = await dkimVerify(raw, {
    resolver: async (name, type) => {
      if (type === 'TXT' && name === `${SELECTOR}._domainkey.${SENDER_DOMAIN}`) return [[DKIM_RECORD]];
      throw Object.assign(new Error(`no ${type} for ${name}`), { code: 'ENOTFOUND' });
    },
  });
  assert.equal(results.length, 1);
  return results[0]!.status.result;
}

const outcomes = (results: RecipientResult[]) =>
  results.map(({ address, outcome, smtpCode }) => ({ address, outcome, smtpCode }));

/** A port where nothing listens (listened on, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function using<T>(transport: Transport, use: (transport: Transport) => Promise<T>): Promise<T> {
  try {
    return await use(transport);
  } finally {
    await transport.close();
  }
}

function resetSinks() {
  for (const each of [sink, backupSink, plainSink, brokenTlsSink, authSink]) each.reset();
}

let domainSequence = 0;
/** A fresh recipient domain per test, so no resolver cache carries one test's zone into the next. */
const uniqueDomain = (label: string) => `${label}-${++domainSequence}.test`;

// ---- Classification

test('SMTP replies are classified in one place: 2xx delivered, 4xx deferred, 5xx bounced, none deferred', () => {
  assert.equal(classifySmtpReply(250), 'delivered');
  assert.equal(classifySmtpReply(451), 'deferred');
  assert.equal(classifySmtpReply(452), 'deferred');
  assert.equal(classifySmtpReply(550), 'bounced');
  assert.equal(classifySmtpReply(554), 'bounced');
  assert.equal(classifySmtpReply(undefined, Object.assign(new Error('refused'), { code: 'ESOCKET' })), 'deferred');
  // About the session, not the recipient: retried rather than bounced.
  assert.equal(classifySmtpReply(503), 'deferred');
  assert.equal(classifySmtpReply(535, { code: 'EAUTH', command: 'AUTH PLAIN' }), 'deferred');
  // A 2xx where an error was reported is not a delivery.
  assert.equal(classifySmtpReply(250, { code: 'EPROTOCOL' }), 'deferred');
});

// ---- Composition

test('compose: headers, alternatives, attachments, inline parts; Bcc only in the envelope', async () => {
  const message = outgoing({
    to: ['Ann <ann@one.test>', 'bob@one.test'],
    cc: ['carol@two.test'],
    replyTo: ['Support <help@sender.test>'],
    subject: 'Quarterly report — ünïcode',
    html: '<p>See the chart <img src="cid:chart-1"></p>',
    text: 'See the chart',
    headers: { 'X-Entity-Ref-ID': 'ref-42' },
    attachments: [
      { filename: 'report.csv', contentType: 'text/csv', contentId: undefined, content: Buffer.from('a,b\n1,2\n') },
      {
        filename: 'chart.png',
        contentType: 'image/png',
        contentId: 'chart-1',
        content: Buffer.from([137, 80, 78, 71]),
      },
    ],
    envelope: {
      from: `bounces@${SENDER_DOMAIN}`,
      to: ['ann@one.test', 'bob@one.test', 'carol@two.test', 'hidden@three.test'],
    },
  });
  const raw = await composeMessage(message);
  const text = raw.toString('latin1');
  assert.doesNotMatch(text, /^bcc:/im);
  assert.doesNotMatch(text, /hidden@three\.test/);
  assert.doesNotMatch(text, /(?<!\r)\n/, 'every line ends in CRLF');

  const parsed = await simpleParser(raw, { keepCidLinks: true });
  assert.equal(parsed.messageId, message.messageId);
  assert.equal(parsed.subject, message.subject);
  assert.deepEqual(
    (Array.isArray(parsed.to) ? parsed.to : [parsed.to!]).flatMap((to) => to.value.map((v) => v.address)),
    ['ann@one.test', 'bob@one.test'],
  );
  assert.equal(parsed.cc && !Array.isArray(parsed.cc) ? parsed.cc.text : undefined, 'carol@two.test');
  assert.equal(parsed.bcc, undefined);
  assert.equal(parsed.replyTo?.value[0]?.address, 'help@sender.test');
  assert.equal(parsed.from?.value[0]?.address, `news@${SENDER_DOMAIN}`);
  assert.equal(parsed.headers.get('x-entity-ref-id'), 'ref-42');
  assert.ok(parsed.date instanceof Date && Math.abs(parsed.date.getTime() - Date.now()) < 60_000);
  assert.equal(parsed.text?.trim(), 'See the chart');
  assert.equal(parsed.html, '<p>See the chart <img src="cid:chart-1"></p>');
  assert.equal((parsed.headers.get('content-type') as { value: string }).value, 'multipart/mixed');
  assert.match(text, /Content-Type: multipart\/alternative;/);
  assert.match(text, /Content-Type: multipart\/related;/);

  const png = parsed.attachments.find((attachment) => attachment.filename === 'chart.png');
  const csv = parsed.attachments.find((attachment) => attachment.filename === 'report.csv');
  assert.equal(png!.filename, 'chart.png');
  assert.equal(png!.contentType, 'image/png');
  assert.equal(png!.cid, 'chart-1');
  assert.equal(png!.related, true);
  assert.deepEqual([...png!.content], [137, 80, 78, 71]);
  assert.equal(csv!.filename, 'report.csv');
  assert.equal(csv!.contentType, 'text/csv');
  assert.equal(csv!.contentDisposition, 'attachment');
  assert.equal(csv!.content.toString(), 'a,b\n1,2\n');
});

test('compose: html alone is a single text/html part; html and text alone are multipart/alternative', async () => {
  const htmlOnly = await simpleParser(await composeMessage(outgoing({ text: undefined })));
  assert.equal((htmlOnly.headers.get('content-type') as { value: string }).value, 'text/html');
  const both = await simpleParser(await composeMessage(outgoing()));
  assert.equal((both.headers.get('content-type') as { value: string }).value, 'multipart/alternative');
  assert.equal(both.attachments.length, 0);
});

test('compose: DKIM-signed with the domain key; a changed body no longer verifies', async () => {
  const raw = await composeMessage(outgoing({ headers: { 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } }));
  assert.match(raw.toString(), new RegExp(`^DKIM-Signature: .*d=${SENDER_DOMAIN};[^]*s=${SELECTOR};`, 'm'));
  assert.match(raw.toString(), /h=[^;]*list-unsubscribe-post/i);
  assert.equal(await dkimResult(raw), 'pass');
  const tampered = raw.toString().replace('<p>Hello</p>', '<p>Hello, changed</p>');
  assert.notEqual(tampered, raw.toString());
  assert.notEqual(await dkimResult(tampered), 'pass');
  assert.equal(await dkimResult(tampered), 'neutral'); // mailauth's verdict for a body hash mismatch
});

test('compose threads: the same message as on the event loop, signed and verifiable, attachments intact', async () => {
  const composer = createComposer(2);
  try {
    const message = outgoing({
      attachments: [
        {
          filename: 'a.bin',
          contentType: 'application/octet-stream',
          contentId: undefined,
          content: Buffer.from([0, 1, 2, 255]),
        },
      ],
    });
    const [threaded, inline] = await Promise.all([composer.compose(message), composeMessage(message)]);
    assert.ok(Buffer.isBuffer(threaded));
    assert.equal(await dkimResult(threaded), 'pass');
    const [a, b] = await Promise.all([simpleParser(threaded), simpleParser(inline)]);
    for (const field of ['subject', 'messageId', 'html', 'text'] as const) assert.deepEqual(a[field], b[field]);
    assert.deepEqual(a.attachments[0]!.content, Buffer.from([0, 1, 2, 255]));
    // Many at once, spread over both threads, each answered with its own message.
    const many = await Promise.all(
      Array.from({ length: 20 }, (_, i) => composer.compose(outgoing({ subject: `Message ${i}` }))),
    );
    for (const [i, raw] of many.entries()) assert.equal((await simpleParser(raw)).subject, `Message ${i}`);
  } finally {
    await composer.close();
  }
});

test('compose threads: a message a thread cannot be handed fails alone; a thread that stops is replaced', async () => {
  const composer = createComposer(1);
  try {
    // A value that cannot be copied to another thread (a function where a header's text belongs).
    const bad = outgoing({ headers: { 'X-Odd': (() => 'x') as unknown as string } });
    const [failed, fine] = await Promise.allSettled([composer.compose(bad), composer.compose(outgoing())]);
    assert.equal(failed.status, 'rejected');
    assert.equal(fine.status, 'fulfilled');
    // The thread stops while it holds a message: that message fails, and the next one is composed.
    const threads = (composer as unknown as { threads: Array<{ worker: { terminate(): Promise<number> } }> }).threads;
    const held = composer.compose(outgoing());
    await threads[0]!.worker.terminate();
    await assert.rejects(held, /compose thread stopped/);
    assert.equal(await dkimResult(await composer.compose(outgoing())), 'pass');
  } finally {
    await composer.close();
  }
});

// ---- Transport choice

test('createTransport: capture on PGlite, mx on PostgreSQL, or as MAILROOM_TRANSPORT says', async () => {
  assert.equal(transportFor(configWith()).name, 'capture');
  assert.equal(transportFor(configWith({ DATABASE_URL: 'postgres://u@127.0.0.1:5432/db' })).name, 'mx');
  const relay = transportFor(configWith({ MAILROOM_TRANSPORT: 'smtp', MAILROOM_SMTP_URL: sink.url }));
  assert.equal(relay.name, 'smtp');
  await relay.close();
  assert.throws(
    () => transportFor(configWith({ MAILROOM_TRANSPORT: 'smtp' })),
    (error: unknown) => error instanceof ConfigError && error.variable === 'MAILROOM_SMTP_URL',
  );
});

// ---- Capture

test('capture: stores a parseable, signed .eml and reads every recipient as delivered', async () => {
  const message = outgoing({
    to: ['ann@one.test'],
    envelope: { from: 'b@sender.test', to: ['ann@one.test', 'x@y.test'] },
  });
  const results = await using(transportFor(configWith({ MAILROOM_TRANSPORT: 'capture' })), (t) => t.send(message));
  assert.deepEqual(results, [
    { address: 'ann@one.test', outcome: 'delivered', smtpCode: undefined, response: 'captured' },
    { address: 'x@y.test', outcome: 'delivered', smtpCode: undefined, response: 'captured' },
  ]);
  assert.deepEqual(await readdir(join(dataDir, 'captured')), [`${message.emailId}.eml`]); // no temporary left
  const stored = await readCaptured(dataDir, message.emailId);
  assert.ok(stored);
  const parsed = await simpleParser(stored);
  assert.equal(parsed.messageId, message.messageId);
  assert.equal(await dkimResult(stored), 'pass');
  assert.equal(await readCaptured(dataDir, randomUUID()), undefined);
  assert.equal(await readCaptured(dataDir, '../captured/x'), undefined);
});

// ---- SMTP relay

const relayConfig = (url: string) => configWith({ MAILROOM_TRANSPORT: 'smtp', MAILROOM_SMTP_URL: url });
const relay = (url = sink.url) => transportFor(relayConfig(url), { relayTls: { rejectUnauthorized: false } });

test('relay: one transaction, outcome per recipient (accepted, deferred at RCPT, rejected at RCPT)', async () => {
  resetSinks();
  sink.replyToRecipient('later@one.test', { code: 451, message: 'Try again later' });
  sink.replyToRecipient('nobody@one.test', { code: 550, message: 'No such user' });
  const message = outgoing({
    to: ['ann@one.test', 'later@one.test'],
    envelope: { from: `bounces@${SENDER_DOMAIN}`, to: ['ann@one.test', 'later@one.test', 'nobody@one.test'] },
  });
  const results = await using(relay(), (t) => t.send(message));
  assert.deepEqual(outcomes(results), [
    { address: 'ann@one.test', outcome: 'delivered', smtpCode: 250 },
    { address: 'later@one.test', outcome: 'deferred', smtpCode: 451 },
    { address: 'nobody@one.test', outcome: 'bounced', smtpCode: 550 },
  ]);
  assert.match(results[1]!.response, /451 Try again later/);
  assert.match(results[2]!.response, /550 No such user/);
  assert.equal(sink.transactions.length, 1);
  const [received] = sink.transactions;
  assert.equal(received!.mailFrom, `bounces@${SENDER_DOMAIN}`);
  assert.deepEqual(received!.rcptTo, ['ann@one.test']);
  assert.equal(await dkimResult(received!.raw), 'pass', 'the signed message arrives unchanged');
  assert.equal((await received!.parse()).messageId, message.messageId);
});

test('relay: messages one after another share one kept connection', async () => {
  resetSinks();
  const results = await using(relay(), async (t) => {
    const all = [];
    for (let i = 0; i < 5; i++) all.push(...(await t.send(outgoing())));
    return all;
  });
  assert.deepEqual(
    results.map((r) => r.outcome),
    ['delivered', 'delivered', 'delivered', 'delivered', 'delivered'],
  );
  assert.equal(sink.transactions.length, 5);
  assert.equal(sink.connections, 1, 'one connection carried all five');
});

test('relay: a kept connection the relay dropped while idle is replaced; the next message is delivered', async () => {
  resetSinks();
  await using(relay(), async (t) => {
    assert.equal((await t.send(outgoing()))[0]!.outcome, 'delivered');
    // Closed on both ends: the client has seen the drop (its pool no longer holds the connection).
    await sink.dropConnections();
    const [second] = await t.send(outgoing());
    assert.equal(second!.outcome, 'delivered', second!.response);
  });
  assert.equal(sink.transactions.length, 2);
  assert.equal(sink.connections, 2);
});

test('relay: every recipient refused at RCPT still gets its own outcome', async () => {
  resetSinks();
  sink.replyToRecipient('full@one.test', { code: 452, message: 'Mailbox full' });
  sink.replyToRecipient('gone@one.test', { code: 550, message: 'Gone' });
  const to = ['full@one.test', 'gone@one.test'];
  const results = await using(relay(), (t) => t.send(outgoing({ to })));
  assert.deepEqual(outcomes(results), [
    { address: 'full@one.test', outcome: 'deferred', smtpCode: 452 },
    { address: 'gone@one.test', outcome: 'bounced', smtpCode: 550 },
  ]);
  assert.equal(sink.transactions.length, 0);
});

test('relay: a 554 spam refusal at the end of DATA fails every recipient (not a bounce), a 451 defers every recipient', async () => {
  resetSinks();
  const to = ['ann@one.test', 'bob@two.test'];
  await using(relay(), async (t) => {
    sink.failData({ code: 554, message: 'Message rejected as spam' });
    const rejected = await t.send(outgoing({ to }));
    assert.deepEqual(outcomes(rejected), [
      { address: 'ann@one.test', outcome: 'failed', smtpCode: 554 },
      { address: 'bob@two.test', outcome: 'failed', smtpCode: 554 },
    ]);
    assert.match(rejected[0]!.response, /554 Message rejected as spam/);

    sink.failData({ code: 451, message: 'Local error in processing' });
    const deferred = await t.send(outgoing({ to }));
    assert.deepEqual(outcomes(deferred), [
      { address: 'ann@one.test', outcome: 'deferred', smtpCode: 451 },
      { address: 'bob@two.test', outcome: 'deferred', smtpCode: 451 },
    ]);
  });
  assert.equal(sink.transactions.length, 0);
});

test('relay: after a refused message the next waits for RSET to be answered, however late (the session stays in step)', async () => {
  // A hand-written server: smtp-server answers RSET at once, and the mix-up needs a late answer. It
  // offers PIPELINING, refuses every message at the end of DATA, and answers RSET after 300 ms.
  const lines: string[] = [];
  const server = createServer((socket) => {
    let buffered = '';
    let inData = false;
    socket.write('220 slow-reset.test ESMTP\r\n');
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      let end: number;
      while ((end = buffered.indexOf('\r\n')) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            socket.write('554 5.7.1 Message rejected as spam\r\n');
          }
          continue;
        }
        lines.push(line);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') socket.write('250-slow-reset.test\r\n250 PIPELINING\r\n');
        else if (verb === 'DATA') {
          inData = true;
          socket.write('354 go ahead\r\n');
        } else if (verb === 'RSET') setTimeout(() => socket.write('250 2.0.0 Reset\r\n'), 300);
        else if (verb === 'QUIT') socket.end('221 Bye\r\n');
        else socket.write('250 OK\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  try {
    const to = ['ann@one.test'];
    await using(relay(`smtp://127.0.0.1:${port}`), async (t) => {
      for (let round = 0; round < 3; round += 1) {
        const results = await t.send(outgoing({ to }));
        assert.deepEqual(outcomes(results), [{ address: 'ann@one.test', outcome: 'failed', smtpCode: 554 }]);
      }
    });
    // One connection carried the three messages, each refused and reset before the next began.
    assert.equal(lines.filter((line) => /^EHLO/i.test(line)).length, 1);
    const verbs = lines.filter((line) => /^(MAIL|RSET)/i.test(line)).map((line) => line.slice(0, 4).toUpperCase());
    assert.deepEqual(verbs, ['MAIL', 'RSET', 'MAIL', 'RSET', 'MAIL', 'RSET']);
  } finally {
    server.close();
  }
});

test('relay: a server that is not listening defers every recipient, without a code', async () => {
  const to = ['ann@one.test', 'bob@two.test'];
  const results = await using(relay(`smtp://127.0.0.1:${await closedPort()}`), (t) => t.send(outgoing({ to })));
  assert.deepEqual(outcomes(results), [
    { address: 'ann@one.test', outcome: 'deferred', smtpCode: undefined },
    { address: 'bob@two.test', outcome: 'deferred', smtpCode: undefined },
  ]);
  assert.match(results[0]!.response, /Could not connect to the mail server \(ECONNREFUSED\)/);
  assert.doesNotMatch(results[0]!.response, /127\.0\.0\.1/, 'no internal address in what customers see');
});

test('relay: STARTTLS is used when offered, EHLO gives MAILROOM_HELO_NAME; plain when not offered', async () => {
  resetSinks();
  await using(relay(), async (t) => {
    const [first, second] = await Promise.all([t.send(outgoing()), t.send(outgoing())]);
    assert.equal(first![0]!.outcome, 'delivered');
    assert.equal(second![0]!.outcome, 'delivered');
  });
  assert.equal(sink.transactions.length, 2);
  assert.ok(sink.transactions.every((received) => received.secure));
  assert.equal(sink.transactions[0]!.clientHostname, 'out.mailroom.test');

  const results = await using(relay(plainSink.url), (t) => t.send(outgoing()));
  assert.equal(results[0]!.outcome, 'delivered');
  assert.equal(plainSink.transactions[0]!.secure, false);
});

test('relay: the certificate is checked unless told otherwise; a failed check defers, nothing goes in the clear', async () => {
  resetSinks();
  const strict = transportFor(relayConfig(sink.url)); // the built-in test certificate is self-signed
  const results = await using(strict, (t) => t.send(outgoing()));
  assert.deepEqual(outcomes(results), [{ address: 'ann@one.test', outcome: 'deferred', smtpCode: undefined }]);
  assert.match(
    results[0]!.response,
    /^TLS negotiation with the mail server failed \((CERT_HAS_EXPIRED|DEPTH_ZERO_SELF_SIGNED_CERT)\)$/,
  );
  assert.equal(sink.transactions.length, 0);
});

test('relay: logs in with the credentials of MAILROOM_SMTP_URL; refused credentials defer, not bounce', async () => {
  resetSinks();
  const withCredentials = (password: string) => `smtp://relay:${password}@${authSink.host}:${authSink.port}`;
  const delivered = await using(relay(withCredentials('secret')), (t) => t.send(outgoing()));
  assert.equal(delivered[0]!.outcome, 'delivered');
  assert.equal(authSink.transactions.length, 1);

  const refused = await using(relay(withCredentials('wrong')), (t) => t.send(outgoing()));
  assert.deepEqual(outcomes(refused), [{ address: 'ann@one.test', outcome: 'deferred', smtpCode: 535 }]);
  assert.match(refused[0]!.response, /535 5\.7\.8 Authentication credentials invalid/);
  assert.equal(authSink.transactions.length, 1);
});

// ---- MX

// The sinks listen on loopback, which the mx transport refuses unless the operator allows it.
const mx = (env: Record<string, string> = {}) =>
  transportFor(configWith({ MAILROOM_TRANSPORT: 'mx', MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8', ...env }));

test('mx: the most preferred MX host is used, whatever order DNS lists them in', async () => {
  resetSinks();
  const domain = uniqueDomain('preferred');
  dns.zone.set(domain, {
    mx: [
      { priority: 20, exchange: `backup.${domain}` },
      { priority: 10, exchange: `primary.${domain}` },
    ],
  });
  dns.zone.set(`primary.${domain}`, { a: ['127.0.0.1'] });
  dns.zone.set(`backup.${domain}`, { a: ['127.0.0.3'] });
  const to = [`ann@${domain}`];
  const results = await using(mx(), (t) => t.send(outgoing({ to })));
  assert.deepEqual(outcomes(results), [{ address: `ann@${domain}`, outcome: 'delivered', smtpCode: 250 }]);
  assert.equal(sink.transactions.length, 1);
  assert.equal(backupSink.transactions.length, 0);
  assert.equal(sink.transactions[0]!.secure, true, 'STARTTLS with a self-signed certificate');
  assert.equal(sink.transactions[0]!.clientHostname, 'out.mailroom.test');
  assert.equal(await dkimResult(sink.transactions[0]!.raw), 'pass');
});

test('mx: when the first MX host does not answer, the next one is used', async () => {
  resetSinks();
  const domain = uniqueDomain('failover');
  dns.zone.set(domain, {
    mx: [
      { priority: 10, exchange: `down.${domain}` },
      { priority: 20, exchange: `up.${domain}` },
    ],
  });
  dns.zone.set(`down.${domain}`, { a: [DEAD_HOST] });
  dns.zone.set(`up.${domain}`, { a: ['127.0.0.3'] });
  const results = await using(mx(), (t) => t.send(outgoing({ to: [`ann@${domain}`] })));
  assert.equal(results[0]!.outcome, 'delivered');
  assert.equal(backupSink.transactions.length, 1);
});

test('mx: a refusal inside the transaction stands; the message is not tried at the next host', async () => {
  resetSinks();
  const domain = uniqueDomain('refusal');
  dns.zone.set(domain, {
    mx: [
      { priority: 10, exchange: `primary.${domain}` },
      { priority: 20, exchange: `backup.${domain}` },
    ],
  });
  dns.zone.set(`primary.${domain}`, { a: ['127.0.0.1'] });
  dns.zone.set(`backup.${domain}`, { a: ['127.0.0.3'] });
  sink.replyToRecipient(`gone@${domain}`, { code: 550, message: 'No such user' });
  sink.replyToRecipient(`busy@${domain}`, { code: 451, message: 'Greylisted' });
  const to = [`ann@${domain}`, `gone@${domain}`, `busy@${domain}`];
  const results = await using(mx(), (t) => t.send(outgoing({ to })));
  assert.deepEqual(outcomes(results), [
    { address: `ann@${domain}`, outcome: 'delivered', smtpCode: 250 },
    { address: `gone@${domain}`, outcome: 'bounced', smtpCode: 550 },
    { address: `busy@${domain}`, outcome: 'deferred', smtpCode: 451 },
  ]);
  assert.equal(backupSink.connections, 0);
  assert.deepEqual(sink.transactions[0]!.rcptTo, [`ann@${domain}`]);
});

test('mx: a domain without MX gets mail at its own address (implicit MX)', async () => {
  resetSinks();
  const domain = uniqueDomain('implicit');
  dns.zone.set(domain, { a: ['127.0.0.1'] });
  const results = await using(mx(), (t) => t.send(outgoing({ to: [`ann@${domain}`] })));
  assert.equal(results[0]!.outcome, 'delivered');
  assert.deepEqual(sink.transactions[0]!.rcptTo, [`ann@${domain}`]);
});

test('mx: a null MX, a domain that does not exist, or one with no mail host bounces without connecting', async () => {
  resetSinks();
  const nullMx = uniqueDomain('null-mx');
  dns.zone.set(nullMx, { mx: [{ priority: 0, exchange: '.' }], a: ['127.0.0.1'] });
  const missing = uniqueDomain('nxdomain'); // not in the zone
  const noHost = uniqueDomain('no-host');
  dns.zone.set(noHost, { txt: [['v=spf1 -all']] });
  const to = [`ann@${nullMx}`, `bob@${missing}`, `carol@${noHost}`];
  const results = await using(mx(), (t) => t.send(outgoing({ to })));
  assert.deepEqual(outcomes(results), [
    { address: `ann@${nullMx}`, outcome: 'bounced', smtpCode: undefined },
    { address: `bob@${missing}`, outcome: 'bounced', smtpCode: undefined },
    { address: `carol@${noHost}`, outcome: 'bounced', smtpCode: undefined },
  ]);
  assert.match(results[0]!.response, /null MX/);
  assert.match(results[1]!.response, /NXDOMAIN/);
  assert.match(results[2]!.response, /no MX and no address/);
  assert.equal(sink.connections, 0);
});

test('mx: a DNS server that does not answer, or answers SERVFAIL, defers', async () => {
  const silent = uniqueDomain('silent');
  const failing = uniqueDomain('servfail');
  dns.zone.set(silent, 'silent');
  dns.zone.set(failing, 'servfail');
  const started = Date.now();
  const results = await using(mx(), (t) => t.send(outgoing({ to: [`ann@${silent}`, `bob@${failing}`] })));
  assert.deepEqual(outcomes(results), [
    { address: `ann@${silent}`, outcome: 'deferred', smtpCode: undefined },
    { address: `bob@${failing}`, outcome: 'deferred', smtpCode: undefined },
  ]);
  assert.match(results[0]!.response, /ETIMEOUT/);
  assert.match(results[1]!.response, /ESERVFAIL/);
  assert.ok(Date.now() - started < 2000, 'bounded by MAILROOM_DNS_TIMEOUT_MS');
});

test('mx: when no host answers, every recipient of the domain is deferred', async () => {
  resetSinks();
  const domain = uniqueDomain('all-down');
  dns.zone.set(domain, { mx: [{ priority: 10, exchange: `down.${domain}` }] });
  dns.zone.set(`down.${domain}`, { a: [DEAD_HOST] });
  const to = [`ann@${domain}`, `bob@${domain}`];
  const results = await using(mx(), (t) => t.send(outgoing({ to })));
  assert.deepEqual(outcomes(results), [
    { address: `ann@${domain}`, outcome: 'deferred', smtpCode: undefined },
    { address: `bob@${domain}`, outcome: 'deferred', smtpCode: undefined },
  ]);
  assert.match(results[0]!.response, new RegExp(`down\\.${domain.replace('.', '\\.')} \\[${DEAD_HOST}\\]`));
});

test('mx: a server slower than MAILROOM_SMTP_TIMEOUT_MS defers', async () => {
  resetSinks();
  const domain = uniqueDomain('slow');
  dns.zone.set(domain, { a: ['127.0.0.1'] });
  sink.slow('greeting', 1500);
  const started = Date.now();
  const results = await using(mx({ MAILROOM_SMTP_TIMEOUT_MS: '300' }), (t) =>
    t.send(outgoing({ to: [`ann@${domain}`] })),
  );
  assert.equal(results[0]!.outcome, 'deferred');
  assert.match(results[0]!.response, /Timed out/);
  assert.ok(Date.now() - started < 1500);
  assert.equal(sink.transactions.length, 0);
});

test('mx: two recipient domains, two transactions, each with its own recipients', async () => {
  resetSinks();
  const first = uniqueDomain('first');
  const second = uniqueDomain('second');
  dns.zone.set(first, { mx: [{ priority: 10, exchange: `mx.${first}` }] });
  dns.zone.set(`mx.${first}`, { a: ['127.0.0.1'] });
  dns.zone.set(second, { mx: [{ priority: 10, exchange: `mx.${second}` }] });
  dns.zone.set(`mx.${second}`, { a: ['127.0.0.3'] });
  const to = [`ann@${first}`, `bob@${second}`, `carol@${first}`];
  const message = outgoing({ to: [`ann@${first}`], envelope: { from: `bounces@${SENDER_DOMAIN}`, to } });
  const results = await using(mx(), (t) => t.send(message));
  assert.deepEqual(
    outcomes(results),
    to.map((address) => ({ address, outcome: 'delivered', smtpCode: 250 })),
  );
  assert.deepEqual(
    sink.transactions.map((received) => received.rcptTo),
    [[`ann@${first}`, `carol@${first}`]],
  );
  assert.deepEqual(
    backupSink.transactions.map((received) => received.rcptTo),
    [[`bob@${second}`]],
  );
  // bob was never in To: the copy he receives does not name him.
  const delivered = await backupSink.transactions[0]!.parse();
  assert.equal(delivered.bcc, undefined);
  assert.doesNotMatch(backupSink.transactions[0]!.raw.toString(), /bob@/);
});

test('mx: a server without STARTTLS gets the message in plain text', async () => {
  const domain = uniqueDomain('plain');
  dns.zone.set(domain, { a: ['127.0.0.1'] });
  resetSinks();
  const results = await using(mx({ MAILROOM_MX_PORT: String(plainSink.port) }), (t) =>
    t.send(outgoing({ to: [`ann@${domain}`] })),
  );
  assert.equal(results[0]!.outcome, 'delivered');
  assert.equal(plainSink.transactions[0]!.secure, false);
});

test('mx: when the TLS handshake fails, the same host is tried again without STARTTLS', async () => {
  resetSinks();
  const domain = uniqueDomain('broken-tls');
  dns.zone.set(domain, { mx: [{ priority: 10, exchange: `mx.${domain}` }] });
  dns.zone.set(`mx.${domain}`, { a: ['127.0.0.1'] });
  const results = await using(mx({ MAILROOM_MX_PORT: String(brokenTlsSink.port) }), (t) =>
    t.send(outgoing({ to: [`ann@${domain}`] })),
  );
  assert.equal(results[0]!.outcome, 'delivered');
  assert.equal(brokenTlsSink.connections, 2);
  assert.equal(brokenTlsSink.transactions[0]!.secure, false);
});

test('relay: when the TLS handshake fails, nothing is sent in the clear', async () => {
  resetSinks();
  const results = await using(relay(brokenTlsSink.url), (t) => t.send(outgoing()));
  assert.equal(results[0]!.outcome, 'deferred');
  assert.match(results[0]!.response, /^TLS negotiation with the mail server failed/);
  assert.equal(brokenTlsSink.transactions.length, 0);
});

// ---- The sending domain's tls 'enforced' (Resend's option): never in the clear, on either transport

const ENFORCED_REASON = /^4\.7\.5 Not delivered: the sending domain sender\.test requires TLS \(tls: enforced\)/;

test('mx, tls enforced: no STARTTLS or a failed handshake defers with the reason; nothing is sent in the clear', async () => {
  resetSinks();
  const domain = uniqueDomain('enforced-plain');
  dns.zone.set(domain, { mx: [{ priority: 10, exchange: `mx.${domain}` }] });
  dns.zone.set(`mx.${domain}`, { a: ['127.0.0.1'] });
  const enforced = () => outgoing({ to: [`ann@${domain}`], tls: 'enforced' });
  // A connection kept from an opportunistic message, in the clear, does not carry the enforced one.
  const [clear, refused] = await using(mx({ MAILROOM_MX_PORT: String(plainSink.port) }), async (t) => [
    await t.send(outgoing({ to: [`ann@${domain}`] })),
    await t.send(enforced()),
  ]);
  assert.equal(clear![0]!.outcome, 'delivered');
  assert.deepEqual(outcomes(refused!), [{ address: `ann@${domain}`, outcome: 'deferred', smtpCode: undefined }]);
  assert.match(refused![0]!.response, ENFORCED_REASON);
  assert.match(refused![0]!.response, new RegExp(`mx\\.${domain.replaceAll('.', '\\.')} \\[127\\.0\\.0\\.1\\]: `));
  assert.equal(plainSink.transactions.length, 1, 'only the opportunistic message reached DATA');

  const broken = await using(mx({ MAILROOM_MX_PORT: String(brokenTlsSink.port) }), (t) => t.send(enforced()));
  assert.equal(broken[0]!.outcome, 'deferred');
  assert.match(broken[0]!.response, ENFORCED_REASON);
  assert.equal(brokenTlsSink.connections, 1, 'not tried again without STARTTLS');
  assert.equal(brokenTlsSink.transactions.length, 0);
});

test('mx, tls enforced: delivered over STARTTLS, the certificate not checked (self-signed)', async () => {
  resetSinks();
  const domain = uniqueDomain('enforced-tls');
  dns.zone.set(domain, { a: ['127.0.0.1'] });
  const results = await using(mx(), (t) => t.send(outgoing({ to: [`ann@${domain}`], tls: 'enforced' })));
  assert.deepEqual(outcomes(results), [{ address: `ann@${domain}`, outcome: 'delivered', smtpCode: 250 }]);
  assert.equal(sink.transactions[0]!.secure, true);
});

test('relay, tls enforced: STARTTLS required of the relay; a relay without it defers, one with it delivers', async () => {
  resetSinks();
  const [clear, refused] = await using(relay(plainSink.url), async (t) => [
    await t.send(outgoing()),
    await t.send(outgoing({ tls: 'enforced' })),
  ]);
  assert.equal(clear![0]!.outcome, 'delivered');
  assert.deepEqual(outcomes(refused!), [{ address: 'ann@one.test', outcome: 'deferred', smtpCode: undefined }]);
  assert.match(refused![0]!.response, ENFORCED_REASON);
  assert.match(refused![0]!.response, new RegExp(`relay 127\\.0\\.0\\.1:${plainSink.port}: `));
  assert.equal(plainSink.transactions.length, 1, 'only the opportunistic message reached DATA');

  const results = await using(relay(), (t) => t.send(outgoing({ tls: 'enforced' })));
  assert.equal(results[0]!.outcome, 'delivered');
  assert.equal(sink.transactions[0]!.secure, true);
});

test('mx: a domain whose mail servers resolve only to loopback or private addresses bounces; nothing is connected to', async () => {
  resetSinks();
  const domain = uniqueDomain('inside');
  dns.zone.set(domain, { mx: [{ priority: 10, exchange: `mx.${domain}` }] });
  dns.zone.set(`mx.${domain}`, { a: ['127.0.0.1', '10.0.0.7'] });
  const before = sink.connections;
  const results = await using(mx({ MAILROOM_MX_ALLOW_CIDRS: '' }), (t) => t.send(outgoing({ to: [`ann@${domain}`] })));
  assert.deepEqual(outcomes(results), [{ address: `ann@${domain}`, outcome: 'bounced', smtpCode: undefined }]);
  assert.match(
    results[0]!.response,
    /^5\.4\.4 .*\[127\.0\.0\.1\]: a loopback address.*\[10\.0\.0\.7\]: a private address/,
  );
  assert.equal(sink.connections, before, 'no connection was made');
  // The operator's relay is not checked: it is the operator's own choice of host.
  const relayed = await using(
    transportFor(configWith({ MAILROOM_TRANSPORT: 'smtp', MAILROOM_SMTP_URL: plainSink.url })),
    (t) => t.send(outgoing({ to: [`ann@${domain}`] })),
  );
  assert.equal(relayed[0]!.outcome, 'delivered');
});
