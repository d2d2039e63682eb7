// Receiving mail at the inbound listener, every peer real and on loopback: messages delivered over SMTP
// (nodemailer and swaks as clients) to addresses at a receiving domain are stored raw and as read, with
// their attachments, the sender's authentication checked against records on a loopback DNS server, and
// the email.received event queued once; what is refused is refused at RCPT TO or at the end of DATA,
// never accepted and bounced later, and nothing half stored.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTransport as nodemailerTransport } from 'nodemailer';
import type { Database } from '../src/platform/db/database.ts';
import { startInboundServer, type InboundServer } from '../src/inbound/inbound-server.ts';
import { createAuthenticator } from '../src/receiving/authentication.ts';
import { receiveMessage, type ReceiveDeps } from '../src/receiving/receive-message.ts';
import { loadTlsCertificate } from '../src/submission/tls-certificate.ts';
import { createSpamChecker } from '../src/receiving/spam-check.ts';
import { loadConfig } from '../src/platform/config.ts';
import { startRspamd } from './helpers/rspamd.ts';
import { pruneAll } from '../src/retention/prune.ts';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { openSmtp } from './helpers/raw-smtp.ts';

const SENDER = 'sender.example.net';
const SELECTOR = 'mail';
const keys = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  publicKeyEncoding: { type: 'spki', format: 'der' },
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
});

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization; // its domain does not receive mail
let domainId: string;
let deps: ReceiveDeps;
let dns: DnsServer;
let dataDir: string;
let inbound: InboundServer;
const quiet = { error: () => {}, warn: () => {}, info: () => {} };

before(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-receiving-'));
  dns = await startDnsServer();
  // The sender's domain: SPF allows this machine, DKIM publishes the key messages are signed with.
  dns.zone.set(SENDER, { txt: [['v=spf1 ip4:127.0.0.1 -all']] });
  // Longer than one character-string: published in 255-octet chunks, as DNS carries it.
  const dkimRecord = `v=DKIM1; k=rsa; p=${keys.publicKey.toString('base64')}`;
  dns.zone.set(`${SELECTOR}._domainkey.${SENDER}`, { txt: [dkimRecord.match(/.{1,255}/g)!] });
  dns.zone.set(`_dmarc.${SENDER}`, { txt: [['v=DMARC1; p=reject']] });
  // A domain whose SPF allows only another address.
  dns.zone.set('elsewhere.example.net', { txt: [['v=spf1 ip4:192.0.2.1 -all']] });
  t = await buildTestApp({
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_DATA_DIR: dataDir,
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_DNS_TIMEOUT_MS: '1000',
  });
  org = await createTestOrganization(t.db, t.config, 'receiving');
  other = await createTestOrganization(t.db, t.config, 'sendonly');
  await observeWebhookEvents(t.app, org);
  const { rows } = await t.db.query<{ id: string }>(
    'UPDATE domains SET receiving = true WHERE organization_id = $1 RETURNING id',
    [org.id],
  );
  domainId = rows[0]!.id;
  deps = { db: t.db, signer: t.app.signer, log: quiet as never };
  inbound = await startInboundServer({
    db: t.db,
    signer: t.app.signer,
    host: '127.0.0.1',
    port: 0,
    log: quiet,
    maxMessageBytes: t.config.inboundMaxBytes,
    tls: await loadTlsCertificate(t.config),
    authenticate: createAuthenticator(t.config),
  });
});
after(async () => {
  await inbound.close();
  await t.close();
  await dns.close();
  await rm(dataDir, { recursive: true, force: true });
});

let counter = 0;
/** A plain message, different each call. */
async function plainMessage(to: string, extra: Record<string, unknown> = {}): Promise<Buffer> {
  const built = nodemailerTransport({ streamTransport: true, buffer: true });
  const info = await built.sendMail({
    from: 'Ann Sender <ann@sender.example.net>',
    to,
    subject: `Hello ${++counter}`,
    text: `Hi there ${counter}`,
    ...extra,
  });
  return info.message as Buffer;
}

/** What the listener hands over for `raw` sent to `to` at the receiving organization, without SMTP. */
const handedOver = (raw: Buffer, to: string) => ({
  raw,
  mailFrom: 'ann@sender.example.net',
  recipients: [{ address: to, organizationId: org.id, domainId }],
  clientAddress: '192.0.2.1',
  helo: 'mx.sender.example.net',
  tls: false,
});

const stored = (id: string) =>
  t.db.query<Record<string, unknown>>('SELECT * FROM received_emails WHERE id = $1', [id]).then(({ rows }) => rows[0]!);

test('receiveMessage stores a plain message for its organization and queues email.received once', async () => {
  const to = `support@${org.domain}`;
  const raw = await plainMessage(to);
  const input = handedOver(raw, to);
  const { ids } = await receiveMessage(deps, input);
  assert.equal(ids.length, 1);
  const row = await stored(ids[0]!);
  assert.equal(row.organization_id, org.id);
  assert.equal(row.from_address, '"Ann Sender" <ann@sender.example.net>');
  assert.deepEqual(row.to_addresses, [to]);
  assert.deepEqual(row.received_for, [to]);
  assert.equal(row.mail_from, 'ann@sender.example.net');
  assert.match(row.subject as string, /^Hello \d+$/);
  assert.match(row.text as string, /^Hi there \d+/);
  assert.equal(row.size_bytes, raw.length);
  assert.equal(row.client_address, '192.0.2.1');
  assert.equal(row.helo, 'mx.sender.example.net');
  assert.equal((row.headers as Record<string, string>).subject, row.subject);
  const rawRow = await t.db.query<{ content: Buffer }>(
    'SELECT content FROM received_email_raw WHERE received_email_id = $1',
    [ids[0]],
  );
  assert.ok(Buffer.from(rawRow.rows[0]!.content).equals(raw));

  // Handed over again: the same row, nothing new fired.
  const again = await receiveMessage(deps, input);
  assert.deepEqual(again.ids, ids);
  const events = await queuedEvents(t.db, org.id, 'email.received', { email_id: ids[0]! });
  assert.equal(events.length, 1);
  assert.deepEqual(events[0]!.data.received_for, [to]);
  assert.equal(events[0]!.data.subject, row.subject);
  assert.equal(events[0]!.data.message_id, row.message_id);
  assert.equal('text' in events[0]!.data, false, 'metadata only');
});

const CRLF = '\r\n';

/** Delivers over SMTP as an MTA would: STARTTLS when offered (the certificate is self-signed). */
async function deliver(
  raw: Buffer | string,
  envelope: { from: string; to: string[] },
  options: { ignoreTLS?: boolean; port?: number } = {},
): Promise<string> {
  const client = nodemailerTransport({
    host: '127.0.0.1',
    port: options.port ?? inbound.port,
    secure: false,
    ignoreTLS: options.ignoreTLS ?? false,
    requireTLS: !(options.ignoreTLS ?? false),
    name: 'mx.sender.example.net',
    tls: { rejectUnauthorized: false },
  });
  try {
    return (await client.sendMail({ envelope, raw })).response;
  } finally {
    client.close();
  }
}

const rowsWithSubject = async (subject: string) =>
  (
    await t.db.query<Record<string, unknown>>('SELECT * FROM received_emails WHERE subject = $1 ORDER BY created_at', [
      subject,
    ])
  ).rows;

test('a message with an attachment and an inline image is stored with both, under TLS, and announced', async () => {
  const to = `help@${org.domain}`;
  const subject = `Receipt ${Date.now()}`;
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
  const raw = await plainMessage(to, {
    subject,
    cc: `cc@${org.domain}`,
    replyTo: 'Replies <replies@sender.example.net>',
    html: '<p>See <img src="cid:logo@sender"></p>',
    attachments: [
      { filename: 'invoice.pdf', content: Buffer.from('%PDF-1.4 invoice'), contentType: 'application/pdf' },
      { filename: 'logo.png', content: png, contentType: 'image/png', cid: 'logo@sender' },
    ],
    headers: { 'X-Ticket': 'one', 'X-Multi': ['a', 'b'] },
  });
  const response = await deliver(raw, { from: `ann@${SENDER}`, to: [to, `cc@${org.domain}`] });
  assert.match(response, /^250 /);

  const [row, ...rest] = await rowsWithSubject(subject);
  assert.ok(row);
  assert.equal(rest.length, 0);
  assert.equal(row.tls, true, 'STARTTLS was offered and used');
  assert.equal(row.client_address, '127.0.0.1');
  assert.equal(row.helo, 'mx.sender.example.net');
  assert.deepEqual(row.received_for, [to, `cc@${org.domain}`]);
  assert.deepEqual(row.cc_addresses, [`cc@${org.domain}`]);
  assert.deepEqual(row.reply_to_addresses, ['replies@sender.example.net']);
  assert.equal(row.html, '<p>See <img src="cid:logo@sender"></p>', 'cid: links kept as written');
  const headers = row.headers as Record<string, string>;
  assert.equal(headers['x-ticket'], 'one');
  assert.equal(headers['x-multi'], 'a, b');
  assert.match(headers['message-id']!, /^<.+>$/);

  const { rows: attachments } = await t.db.query<Record<string, unknown>>(
    `SELECT id, filename, content_type, content_disposition, content_id, size_bytes, content
       FROM received_attachments WHERE received_email_id = $1 ORDER BY position`,
    [row.id],
  );
  assert.deepEqual(
    attachments.map(({ filename, content_type, content_disposition, content_id, size_bytes }) => ({
      filename,
      content_type,
      content_disposition,
      content_id,
      size_bytes,
    })),
    [
      {
        filename: 'logo.png',
        content_type: 'image/png',
        content_disposition: 'inline',
        content_id: 'logo@sender',
        size_bytes: png.length,
      },
      {
        filename: 'invoice.pdf',
        content_type: 'application/pdf',
        content_disposition: 'attachment',
        content_id: null,
        size_bytes: 16,
      },
    ],
  );
  // In the order of the message's parts: the html's inline image belongs to its body.
  assert.ok(Buffer.from(attachments[0]!.content as Uint8Array).equals(png));

  const [event, ...more] = await queuedEvents(t.db, org.id, 'email.received', { email_id: row.id as string });
  assert.ok(event);
  assert.equal(more.length, 0);
  assert.deepEqual(Object.keys(event.data).sort(), [
    'attachments',
    'bcc',
    'cc',
    'created_at',
    'email_id',
    'from',
    'message_id',
    'received_for',
    'subject',
    'to',
  ]);
  assert.equal(event.data.from, row.from_address);
  assert.deepEqual(event.data.to, [to]);
  assert.deepEqual(event.data.attachments, [
    {
      id: attachments[0]!.id,
      filename: 'logo.png',
      content_type: 'image/png',
      content_disposition: 'inline',
      content_id: 'logo@sender',
    },
    {
      id: attachments[1]!.id,
      filename: 'invoice.pdf',
      content_type: 'application/pdf',
      content_disposition: 'attachment',
      content_id: null,
    },
  ]);
});

test('swaks, as an MTA would: STARTTLS, an attachment, the envelope kept apart from the headers', async () => {
  const subject = `Swaks ${Date.now()}`;
  const to = `desk@${org.domain}`;
  const { stdout } = await promisify(execFile)('swaks', [
    ...['--server', `127.0.0.1:${inbound.port}`, '--helo', 'relay.sender.example.net', '--tls'],
    ...['--from', `bounces@${SENDER}`, '--to', to, '--header', `Subject: ${subject}`],
    ...['--header', `To: Desk <someone-else@${org.domain}>`, '--body', 'Hello from swaks'],
    ...['--attach-type', 'text/csv', '--attach-name', 'rows.csv', '--attach', '@/dev/null'],
  ]);
  assert.match(stdout, /^<~ +250 /m);
  const [row] = await rowsWithSubject(subject);
  assert.ok(row);
  assert.equal(row.tls, true);
  assert.equal(row.helo, 'relay.sender.example.net');
  assert.equal(row.mail_from, `bounces@${SENDER}`);
  assert.deepEqual(row.received_for, [to], 'the envelope recipient');
  assert.deepEqual(row.to_addresses, [`someone-else@${org.domain}`], 'the To header, as written');
  assert.match(row.text as string, /Hello from swaks/);
  const { rows } = await t.db.query<{ filename: string; content_type: string }>(
    'SELECT filename, content_type FROM received_attachments WHERE received_email_id = $1',
    [row.id],
  );
  assert.deepEqual(rows, [{ filename: 'rows.csv', content_type: 'text/csv' }]);
});

test('an address at a domain that does not receive mail is refused at RCPT TO with 550; nothing is stored', async () => {
  const subject = `Nobody ${Date.now()}`;
  const raw = await plainMessage(`someone@${other.domain}`, { subject });
  await assert.rejects(deliver(raw, { from: `ann@${SENDER}`, to: [`someone@${other.domain}`] }), {
    responseCode: 550,
  });
  await assert.rejects(deliver(raw, { from: `ann@${SENDER}`, to: ['someone@nowhere.example'] }), {
    responseCode: 550,
  });
  assert.deepEqual(await rowsWithSubject(subject), []);
});

test('a message over MAILROOM_INBOUND_MAX_BYTES is refused with 552 while it arrives; nothing is stored', async () => {
  assert.equal(t.config.inboundMaxBytes, 41_943_040, 'the default: 40 MiB');
  const session = await openSmtp(inbound.port);
  await session.reply();
  assert.match(await session.command('EHLO client.example.net'), /SIZE 41943040/);
  assert.match(await session.command('EHLO client.example.net'), /STARTTLS/);
  assert.match(await session.command('MAIL FROM:<> SIZE=50000000'), /^552 /);
  session.end();

  const subject = `Huge ${Date.now()}`;
  const line = `${'x'.repeat(998)}${CRLF}`;
  const huge = `Subject: ${subject}${CRLF}To: big@${org.domain}${CRLF}${CRLF}${line.repeat(Math.ceil((41 * 1024 * 1024) / line.length))}`;
  await assert.rejects(deliver(huge, { from: `ann@${SENDER}`, to: [`big@${org.domain}`] }, { ignoreTLS: true }), {
    responseCode: 552,
  });
  assert.deepEqual(await rowsWithSubject(subject), []);
});

/** A message DKIM-signed by the sender's domain (its key is on the DNS server). */
async function signedMessage(to: string, subject: string, from = `ann@${SENDER}`): Promise<Buffer> {
  const built = nodemailerTransport({ streamTransport: true, buffer: true });
  const info = await built.sendMail({
    from,
    to,
    subject,
    text: 'The amount due is 10 EUR.',
    dkim: { domainName: SENDER, keySelector: SELECTOR, privateKey: keys.privateKey },
  });
  return info.message as Buffer;
}

const authentication = async (subject: string) =>
  (await rowsWithSubject(subject))[0]?.authentication as {
    spf: { result: string; domain: string };
    dkim: Array<{ result: string; domain: string; selector: string }>;
    dmarc: { result: string; domain: string; policy: string } | null;
    arc: { result: string };
  };

test('sender authentication: DKIM, SPF and DMARC pass for a signed message from an allowed address', async () => {
  const subject = `Signed ${Date.now()}`;
  const to = `billing@${org.domain}`;
  assert.match(await deliver(await signedMessage(to, subject), { from: `ann@${SENDER}`, to: [to] }), /^250 /);
  const auth = await authentication(subject);
  assert.deepEqual(auth, {
    spf: { result: 'pass', domain: SENDER },
    dkim: [{ result: 'pass', domain: SENDER, selector: SELECTOR }],
    dmarc: { result: 'pass', domain: SENDER, policy: 'reject' },
    arc: { result: 'none' },
  });
});

test('DNS answers are reused for 30 seconds, then looked up again', async () => {
  let now = 1_000_000;
  const check = createAuthenticator(t.config, { clock: () => now });
  const domain = 'cached.example.net';
  dns.zone.set(domain, { txt: [['v=spf1 ip4:127.0.0.1 -all']] });
  const raw = await plainMessage(`x@${org.domain}`, { from: `ann@${domain}` });
  const sender = { clientAddress: '127.0.0.1', helo: 'mx.example.net', mailFrom: `ann@${domain}` };
  assert.equal((await check(raw, sender)).spf.result, 'pass');
  dns.zone.set(domain, { txt: [['v=spf1 -all']] });
  now += 29_000;
  assert.equal((await check(raw, sender)).spf.result, 'pass', 'the answer of 29 s ago');
  now += 2_000;
  assert.equal((await check(raw, sender)).spf.result, 'fail', 'looked up again');
});

test('a DKIM signature over a body altered after signing is recorded as dkim fail; SPF fails for an address not allowed', async () => {
  const subject = `Altered ${Date.now()}`;
  const to = `billing@${org.domain}`;
  const signed = (await signedMessage(to, subject)).toString('utf8');
  const altered = signed.replace('10 EUR', '10000 EUR');
  assert.notEqual(altered, signed);
  // MAIL FROM at a domain whose SPF allows only 192.0.2.1.
  assert.match(await deliver(altered, { from: 'ann@elsewhere.example.net', to: [to] }), /^250 /);
  const auth = await authentication(subject);
  assert.deepEqual(auth.dkim, [{ result: 'fail', domain: SENDER, selector: SELECTOR }]);
  assert.deepEqual(auth.spf, { result: 'fail', domain: 'elsewhere.example.net' });
  assert.equal(auth.dmarc?.result, 'fail', 'neither aligned SPF nor DKIM passes');
});

test('whatever the bytes, a message is stored (250) and readable, never refused with a server error', async () => {
  const to = `odd@${org.domain}`;
  const tag = Date.now();
  const odd = [
    `Subject: nul ${tag} \u0000 in it\r\nX-Nul: a\u0000b\r\n\r\nbody \u0000 with NUL\r\n`,
    `Subject: no body ${tag}\r\n`,
    `Subject: =?utf-8?B?${Buffer.from(`encoded ${tag} ✓`).toString('base64')}?=\r\nFrom: =?bogus?Q?x?= <>\r\nTo: undisclosed-recipients:;\r\n\r\nhi\r\n`,
    `Subject: broken multipart ${tag}\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\nContent-Type: image/png; name="x.png"\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64\r\n`,
    Buffer.concat([
      Buffer.from(`Subject: binary ${tag}\r\n\r\n`),
      Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)),
    ]),
  ];
  for (const raw of odd) {
    assert.match(await deliver(raw, { from: '', to: [to] }, { ignoreTLS: true }), /^250 /);
  }
  const { rows } = await t.db.query<{ subject: string; headers: Record<string, string>; text: string | null }>(
    `SELECT subject, headers, text FROM received_emails WHERE organization_id = $1 AND subject LIKE '%' || $2 || '%'`,
    [org.id, String(tag)],
  );
  assert.equal(rows.length, odd.length);
  const nul = rows.find((row) => row.subject.startsWith('nul'))!;
  assert.equal(nul.subject, `nul ${tag}  in it`);
  assert.equal(nul.headers['x-nul'], 'ab');
  assert.ok(rows.some((row) => row.subject === `encoded ${tag} ✓`));
});

test('a connection dropped in the middle of DATA stores nothing, and the listener goes on', async () => {
  const subject = `Dropped ${Date.now()}`;
  const to = `drop@${org.domain}`;
  const raw = (await plainMessage(to, { subject })).toString('utf8');
  const session = await openSmtp(inbound.port);
  await session.reply();
  await session.command('EHLO client.example.net');
  assert.match(await session.command(`MAIL FROM:<ann@${SENDER}>`), /^250 /);
  assert.match(await session.command(`RCPT TO:<${to}>`), /^250 /);
  assert.match(await session.command('DATA'), /^354 /);
  session.write(raw.slice(0, Math.floor(raw.length / 2)));
  session.end();
  assert.deepEqual(await rowsWithSubject(subject), []);
  assert.match(await deliver(raw, { from: `ann@${SENDER}`, to: [to] }), /^250 /);
  assert.equal((await rowsWithSubject(subject)).length, 1);
});

test('the same message delivered twice is stored once and email.received is queued once', async () => {
  const subject = `Twice ${Date.now()}`;
  const to = `twice@${org.domain}`;
  const raw = await plainMessage(to, { subject });
  assert.match(await deliver(raw, { from: `ann@${SENDER}`, to: [to] }), /^250 /);
  assert.match(await deliver(raw, { from: `ann@${SENDER}`, to: [to] }, { ignoreTLS: true }), /^250 /);
  const rows = await rowsWithSubject(subject);
  assert.equal(rows.length, 1);
  const { rows: deliveries } = await t.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_deliveries
      WHERE organization_id = $1 AND event_type = 'email.received' AND payload -> 'data' ->> 'email_id' = $2`,
    [org.id, rows[0]!.id],
  );
  assert.equal(deliveries[0]!.n, 1);
});

test('a database failure while storing answers 451, and at RCPT TO too; nothing is stored', async () => {
  const subject = `Retry ${Date.now()}`;
  const to = `retry@${org.domain}`;
  const raw = await plainMessage(to, { subject });
  const failingTransactions: Database = {
    ...t.db,
    kind: t.db.kind,
    query: <Row>(text: string, params?: readonly unknown[]) => t.db.query<Row>(text, params),
    transaction: async () => {
      throw new Error('the database is unreachable');
    },
    listen: (channel, onNotify) => t.db.listen(channel, onNotify),
    close: async () => {},
  };
  const failingQueries: Database = {
    ...failingTransactions,
    query: async () => {
      throw new Error('the database is unreachable');
    },
  };
  for (const db of [failingTransactions, failingQueries]) {
    const server = await startInboundServer({ db, signer: t.app.signer, host: '127.0.0.1', port: 0, log: quiet });
    try {
      await assert.rejects(deliver(raw, { from: `ann@${SENDER}`, to: [to] }, { ignoreTLS: true, port: server.port }), {
        responseCode: 451,
      });
    } finally {
      await server.close();
    }
  }
  assert.deepEqual(await rowsWithSubject(subject), []);
  // The sender's retry, once the database is back.
  assert.match(await deliver(raw, { from: `ann@${SENDER}`, to: [to] }), /^250 /);
  assert.equal((await rowsWithSubject(subject)).length, 1);
});

test('on PGlite sessions that finish together share a commit (on PostgreSQL each has its own); a copy the database refuses fails only its own session', async () => {
  const to = `group@${org.domain}`;
  const input = (raw: Buffer) => handedOver(raw, to);
  // The database as receiving sees it, with each transaction's copies counted, and the first transaction
  // held back until released: the sessions that finish meanwhile queue for the next one.
  const transactions: Array<{ copies: number; failed: boolean }> = [];
  let release = () => {};
  let held: Promise<void> | undefined;
  let entered = () => {};
  const gated: Database = {
    ...t.db,
    kind: t.db.kind,
    query: <Row>(text: string, params?: readonly unknown[]) => t.db.query<Row>(text, params),
    listen: (channel, onNotify) => t.db.listen(channel, onNotify),
    transaction: async (fn, settings) => {
      entered();
      await held;
      let copies = 0;
      try {
        const result = await t.db.transaction(
          (tx) =>
            fn({
              query: <Row>(text: string, params?: readonly unknown[]) => {
                if (text.includes('INSERT INTO received_emails')) copies += 1;
                return tx.query<Row>(text, params);
              },
              exec: (script: string) => tx.exec(script),
            }),
          settings,
        );
        transactions.push({ copies, failed: false });
        return result;
      } catch (error) {
        transactions.push({ copies, failed: true });
        throw error;
      }
    },
    close: async () => {},
  };
  const gatedDeps = { ...deps, db: gated };
  /** Holds the next transactions back; resolves once the first of them has been asked for. */
  const hold = () => {
    held = new Promise<void>((resolve) => (release = resolve));
    return new Promise<void>((resolve) => (entered = resolve));
  };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 1500));

  const prefix = `Together ${Date.now()}`;
  const raws = await Promise.all(Array.from({ length: 10 }, (_, i) => plainMessage(to, { subject: `${prefix} ${i}` })));
  const firstAskedFor = hold();
  const sessions = raws.map((raw) => receiveMessage(gatedDeps, input(raw)));
  await firstAskedFor;
  await settle();
  release();
  const results = await Promise.all(sessions);
  assert.equal(new Set(results.map((r) => r.ids[0])).size, 10);
  assert.equal(
    (await t.db.query(`SELECT 1 FROM received_emails WHERE subject LIKE $1`, [`${prefix} %`])).rows.length,
    10,
  );
  assert.equal(
    transactions.reduce((sum, tx) => sum + tx.copies, 0),
    10,
  );
  if (t.db.kind === 'pglite') {
    // The copies that were there when the first transaction was asked for, then all that came while it
    // was held: two transactions for ten sessions.
    assert.ok(transactions.length <= 2, JSON.stringify(transactions));
  } else {
    assert.ok(
      transactions.every((tx) => tx.copies === 1),
      JSON.stringify(transactions),
    );
  }

  // The database refuses one copy (a trigger stands for any refusal): the others are stored all the same.
  await t.db.query(`CREATE FUNCTION refuse_one_copy() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.subject LIKE 'Refused %' THEN RAISE EXCEPTION 'refused for the test'; END IF;
      RETURN NEW;
    END $$`);
  await t.db.query(
    'CREATE TRIGGER refuse_one_copy BEFORE INSERT ON received_emails FOR EACH ROW EXECUTE FUNCTION refuse_one_copy()',
  );
  try {
    transactions.length = 0;
    const refused = `Refused ${Date.now()}`;
    const kept = `Kept ${Date.now()}`;
    const messages = [
      await plainMessage(to, { subject: kept }),
      await plainMessage(to, { subject: `${kept} too` }),
      await plainMessage(to, { subject: refused }),
    ];
    const firstAskedFor = hold();
    const first = receiveMessage(gatedDeps, input(messages[0]!));
    await firstAskedFor;
    const others = messages.slice(1).map((raw) => receiveMessage(gatedDeps, input(raw)));
    await settle();
    release();
    const outcomes = await Promise.allSettled([first, ...others]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['fulfilled', 'fulfilled', 'rejected'],
    );
    assert.equal((await rowsWithSubject(kept)).length, 1);
    assert.equal((await rowsWithSubject(`${kept} too`)).length, 1);
    assert.deepEqual(await rowsWithSubject(refused), []);
    if (t.db.kind === 'pglite') {
      // The group of the two that came meanwhile failed whole at its second copy, then each was tried alone.
      assert.deepEqual(transactions, [
        { copies: 1, failed: false },
        { copies: 2, failed: true },
        { copies: 1, failed: false },
        { copies: 1, failed: true },
      ]);
    }
  } finally {
    await t.db.query('DROP TRIGGER refuse_one_copy ON received_emails');
    await t.db.query('DROP FUNCTION refuse_one_copy()');
  }
});

test('a transaction with recipients at two organizations is stored once for each, with its own recipients', async () => {
  const third = await createTestOrganization(t.db, t.config, 'receiving');
  await t.db.query('UPDATE domains SET receiving = true WHERE organization_id = $1', [third.id]);
  const subject = `Two organizations ${Date.now()}`;
  const recipients = [`a@${org.domain}`, `b@${third.domain}`];
  const raw = await plainMessage(recipients.join(', '), { subject });
  assert.match(await deliver(raw, { from: `ann@${SENDER}`, to: recipients }), /^250 /);
  const rows = await rowsWithSubject(subject);
  assert.deepEqual(
    rows.map((row) => [row.organization_id, row.received_for]).sort(),
    [
      [org.id, [recipients[0]]],
      [third.id, [recipients[1]]],
    ].sort(),
  );
});

test("a route's webhook endpoint gets the same email.received event as the subscribers", async () => {
  const endpoint = await t.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: { authorization: `Bearer ${org.fullKey}` },
    payload: { endpoint: 'http://127.0.0.1:9/route-hook', events: ['email.sent'] },
  });
  assert.equal(endpoint.statusCode, 201, endpoint.body);
  const endpointId = endpoint.json().id as string;
  const to = `routed@${org.domain}`;
  await t.db.query(
    `INSERT INTO inbound_routes (organization_id, recipient_kind, recipient_pattern, actions)
     VALUES ($1, 'exact', $2, $3::jsonb)`,
    [org.id, to, JSON.stringify([{ type: 'store' }, { type: 'webhook', endpoint_id: endpointId }])],
  );
  const subject = `Routed ${Date.now()}`;
  assert.match(await deliver(await plainMessage(to, { subject }), { from: `ann@${SENDER}`, to: [to] }), /^250 /);
  const [row] = await rowsWithSubject(subject);
  assert.ok(row);
  const { rows } = await t.db.query<{ endpoint_id: string; payload: { id: string; data: Record<string, unknown> } }>(
    `SELECT endpoint_id, payload FROM webhook_deliveries
      WHERE organization_id = $1 AND event_type = 'email.received' AND payload -> 'data' ->> 'email_id' = $2`,
    [org.id, row.id],
  );
  assert.equal(rows.length, 2, 'the subscriber and the route endpoint');
  assert.equal(rows[0]!.payload.id, rows[1]!.payload.id, 'one event');
  assert.ok(rows.some((delivery) => delivery.endpoint_id === endpointId));
  assert.deepEqual(rows[0]!.payload.data, rows[1]!.payload.data);
  assert.match(rows[0]!.payload.data.created_at as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
});

test('a message the spam filter quarantines is stored, but neither announced nor forwarded', async () => {
  const rspamd = await startRspamd();
  const spamCheck = createSpamChecker(loadConfig({ MAILROOM_RSPAMD_URL: rspamd.url }), quiet);
  const server = await startInboundServer({
    db: t.db,
    signer: t.app.signer,
    host: '127.0.0.1',
    port: 0,
    log: quiet,
    spamCheck,
  });
  try {
    const to = `sales@${org.domain}`;
    await t.db.query(
      `INSERT INTO inbound_routes (organization_id, recipient_kind, recipient_pattern, actions)
       VALUES ($1, 'exact', $2, $3::jsonb)`,
      [org.id, to, JSON.stringify([{ type: 'forward', to: ['desk@elsewhere.example.net'] }])],
    );
    /** The message's email.received deliveries and forwarded copies. */
    const consequences = async (id: string, subject: string) =>
      (
        await t.db.query<{ events: number; copies: number }>(
          `SELECT (SELECT count(*)::int FROM webhook_deliveries
                    WHERE event_type = 'email.received' AND payload -> 'data' ->> 'email_id' = $1) AS events,
                  (SELECT count(*)::int FROM emails WHERE organization_id = $2 AND subject = $3) AS copies`,
          [id, org.id, subject],
        )
      ).rows[0];
    const send = async (subject: string, text: string) => {
      const raw = await plainMessage(to, { subject, text });
      const options = { ignoreTLS: true, port: server.port };
      assert.match(await deliver(raw, { from: `ann@${SENDER}`, to: [to] }, options), /^250 /);
      const [row] = await rowsWithSubject(subject);
      assert.ok(row);
      return row;
    };
    // The route at work on an ordinary message: announced and forwarded.
    const hamSubject = `Ordinary ${Date.now()}`;
    const ham = await send(hamSubject, 'Could you send me a quote for 40 chairs?');
    assert.equal(ham.quarantined, false);
    assert.deepEqual(await consequences(ham.id as string, hamSubject), { events: 1, copies: 1 });

    const gtube = 'XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X';
    const spamSubject = `Quarantined ${Date.now()}`;
    const spam = await send(spamSubject, `Buy now\n\n${gtube}\n`);
    assert.equal(spam.spam_verdict, 'spam');
    assert.equal(spam.quarantined, true);
    assert.deepEqual(await consequences(spam.id as string, spamSubject), { events: 0, copies: 0 });
  } finally {
    await server.close();
    await rspamd.stop();
  }
});

test('after MAILROOM_RETENTION_DAYS a received message goes whole: row, raw message and attachments', async () => {
  const to = `keep@${org.domain}`;
  const attachments = [{ filename: 'a.txt', content: 'attached' }];
  const [old, recent] = [
    await plainMessage(to, { subject: `Old ${Date.now()}`, attachments }),
    await plainMessage(to, { subject: `Recent ${Date.now()}`, attachments }),
  ];
  const recipients = [{ address: to, organizationId: org.id, domainId }];
  const received = async (raw: Buffer) =>
    (
      await receiveMessage(deps, {
        raw,
        mailFrom: '',
        recipients,
        clientAddress: '192.0.2.1',
        helo: 'mx.example.net',
        tls: false,
      })
    ).ids[0]!;
  const [oldId, recentId] = [await received(old), await received(recent)];
  const left = async (id: string) =>
    (
      await t.db.query<{ rows: number; raw: number; attachments: number }>(
        `SELECT (SELECT count(*)::int FROM received_emails WHERE id = $1) AS rows,
                (SELECT count(*)::int FROM received_email_raw WHERE received_email_id = $1) AS raw,
                (SELECT count(*)::int FROM received_attachments WHERE received_email_id = $1) AS attachments`,
        [id],
      )
    ).rows[0];
  const options = { retentionDays: 30, metadataRetentionDays: 90, dataDir };
  // The clock moved: the first arrived 31 days ago, the other 29.
  await t.db.query(`UPDATE received_emails SET created_at = created_at - make_interval(days => 31) WHERE id = $1`, [
    oldId,
  ]);
  await t.db.query(`UPDATE received_emails SET created_at = created_at - make_interval(days => 29) WHERE id = $1`, [
    recentId,
  ]);
  const counts = await pruneAll(t.db, options);
  assert.ok(counts.receivedEmails >= 1);
  assert.deepEqual(await left(oldId), { rows: 0, raw: 0, attachments: 0 });
  assert.deepEqual(await left(recentId), { rows: 1, raw: 1, attachments: 1 });
  // Two more days: the other goes too.
  await t.db.query(`UPDATE received_emails SET created_at = created_at - make_interval(days => 2) WHERE id = $1`, [
    recentId,
  ]);
  await pruneAll(t.db, options);
  assert.deepEqual(await left(recentId), { rows: 0, raw: 0, attachments: 0 });
  // The same message arriving again after it was pruned is new again.
  assert.notEqual(await received(old), oldId);
});

test('the same bytes taken for other recipients in another transaction are stored for those; the same transaction again is not', async () => {
  const [first, second] = [`split-a@${org.domain}`, `split-b@${org.domain}`];
  const raw = await plainMessage(`${first}, ${second}`);
  const taken = (address: string) => ({
    raw,
    mailFrom: 'ann@sender.example.net',
    recipients: [{ address, organizationId: org.id, domainId }],
    clientAddress: '192.0.2.1',
    helo: 'mx.sender.example.net',
    tls: false,
  });
  // A sender splitting its recipients into two transactions (or retrying later the one refused a while).
  const a = await receiveMessage(deps, taken(first));
  const b = await receiveMessage(deps, taken(second));
  assert.notDeepEqual(a.ids, b.ids);
  assert.deepEqual((await stored(a.ids[0]!)).received_for, [first]);
  assert.deepEqual((await stored(b.ids[0]!)).received_for, [second]);
  // The first transaction handed over again (our 250 lost on the way): the same row, nothing new.
  assert.deepEqual((await receiveMessage(deps, taken(first))).ids, a.ids);
  for (const id of [...a.ids, ...b.ids]) {
    assert.equal((await queuedEvents(t.db, org.id, 'email.received', { email_id: id })).length, 1);
  }
});

test('what no database text can hold (a lone surrogate from an encoded word, NUL in the envelope) and a bad Content-Type are stored, not retried for ever', async () => {
  const to = `odd@${org.domain}`;
  const raw = Buffer.from(
    [
      'From: =?UTF-16BE?B?2AA=?= <ann@sender.example.net>',
      `To: ${to}`,
      'Subject: =?UTF-7?Q?+2AA-?= lone',
      'Message-ID: <lone-surrogate@sender.example.net>',
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b"',
      '',
      '--b',
      'Content-Type: text/plain',
      '',
      'See attached.',
      '--b',
      'Content-Type: application/x\u0001y',
      'Content-Disposition: attachment; filename="odd.bin"',
      '',
      'data',
      '--b--',
      '',
    ].join(CRLF),
    'latin1',
  );
  const { ids } = await receiveMessage(deps, {
    raw,
    mailFrom: 'ann\0@sender.example.net',
    recipients: [{ address: to, organizationId: org.id, domainId }],
    clientAddress: '192.0.2.1',
    helo: 'mx\0.sender.example.net',
    tls: false,
  });
  const row = await stored(ids[0]!);
  assert.match(row.subject as string, /lone$/);
  assert.equal(row.subject, (row.subject as string).toWellFormed());
  assert.equal(row.helo, 'mx.sender.example.net');
  assert.equal(row.mail_from, 'ann@sender.example.net');
  const { rows } = await t.db.query<{ content_type: string }>(
    'SELECT content_type FROM received_attachments WHERE received_email_id = $1',
    [ids[0]],
  );
  assert.deepEqual(
    rows.map((attachment) => attachment.content_type),
    ['application/octet-stream'],
  );
});

test('a recipient address longer than any mailbox has is refused at RCPT TO; a message the parser cannot read is refused for good (554), not retried', async () => {
  const session = await openSmtp(inbound.port);
  await session.reply();
  await session.command('EHLO client.example.net');
  await session.command('MAIL FROM:<ann@sender.example.net>');
  // Refused by the SMTP layer before any route's pattern would see it.
  const longDomain = `${`${'x'.repeat(60)}.`.repeat(4)}${org.domain}`;
  assert.match(await session.command(`RCPT TO:<a@${longDomain}>`), /^5\d\d /);
  assert.match(await session.command(`RCPT TO:<parts@${org.domain}>`), /^250 /);
  assert.match(await session.command('DATA'), /^354 /);
  // Over 1,000 MIME parts: no mail client sends that, and mailparser gives up on it.
  const parts = Array.from({ length: 1100 }, (_, n) => `--b${CRLF}Content-Type: text/plain${CRLF}${CRLF}part ${n}`);
  const subject = `Parts ${Date.now()}`;
  session.write(
    [
      `Subject: ${subject}`,
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b"',
      '',
      ...parts,
      '--b--',
      '.',
      '',
    ].join(CRLF),
  );
  assert.match(await session.reply(), /^554 5\.6\.0 /);
  session.end();
  assert.deepEqual(await rowsWithSubject(subject), []);
});
