// Submission benchmark: messages per second accepted through SMTP submission (STARTTLS, AUTH with an
// API key) beside the same messages through POST /emails, on PostgreSQL with durable commits. Both
// answer only once the message, its recipients, timeline entry and delivery job are committed (the SMTP
// 250 names the email's id). Target: submission at least 0.8 of the API's rate.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/submission.ts
//
// MESSAGES (default 3000, each way) and CONNECTIONS (default 10) may be set; IMPLICIT_TLS=1 also
// measures the implicit-TLS listener (465-style).
//
// The server side (Mailroom's API and both submission listeners, no delivery worker, on one fresh
// database, organization limits raised) runs in a child process, this same file with the argument
// `serve`; the clients run in this process, on the same 2 cores as the server and PostgreSQL. Clients:
// - a lean SMTP client (as undici is for HTTP): STARTTLS and AUTH once per connection, then per message
//   the envelope pipelined in one write and a MIME message composed once by nodemailer; measured over
//   STARTTLS, and without TLS (loopback may authenticate in the clear), the like-for-like beside plain HTTP;
// - nodemailer's pooled transport, composing every message as an application would;
// - undici for POST /emails.
// Each sends WARMUP (200) messages, untimed, over the connections it then reuses, then MESSAGES in a
// closed loop of CONNECTIONS in flight, timed from the first send to the last reply. (Not autocannon:
// with `amount` it only notices it is done on its next one-second tick, so short runs are rounded up.)
// Every message is counted in the database afterwards.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import net from 'node:net';
import tls from 'node:tls';
import nodemailer, { type Transporter } from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import pg from 'pg';
import { Pool } from 'undici';

const MESSAGES = Number(process.env.MESSAGES ?? 3000);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 10);
const WARMUP = Number(process.env.WARMUP ?? 200);
const IMPLICIT_TLS = process.env.IMPLICIT_TLS === '1';
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

interface Target {
  api: string;
  smtp: number;
  smtps: number;
  token: string;
  from: string;
  url: string;
}

if (process.argv[2] === 'serve') await serve();
else await run();

/** The child: prints one JSON line (a Target) once everything listens. */
async function serve() {
  const { loadConfig } = await import('../src/platform/config.ts');
  const { buildApp } = await import('../src/app.ts');
  const { openPostgres } = await import('../src/platform/db/postgres.ts');
  const { migrate } = await import('../src/platform/db/migrate.ts');
  const { loadTlsCertificate } = await import('../src/submission/tls-certificate.ts');
  const { startSubmissionServer } = await import('../src/submission/submission-server.ts');
  const { createTestOrganization } = await import('../test/helpers/app.ts');
  const { createPostgresDatabase } = await import('../test/helpers/database.ts');

  const created = await createPostgresDatabase();
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-bench-')); // the self-signed certificate
  const config = loadConfig({
    DATABASE_URL: created.url,
    MAILROOM_DATA_DIR: dataDir,
    MAILROOM_LOG_LEVEL: 'silent',
    MAILROOM_DB_POOL_SIZE: '20',
  });
  const db = openPostgres(created.url, config.dbPoolSize);
  await migrate(db);
  const org = await createTestOrganization(db, config, 'bench');
  await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [org.id]);

  const app = await buildApp({ db, config, logger: false });
  const api = await app.listen({ port: 0, host: '127.0.0.1' });
  const tls = await loadTlsCertificate(config);
  const listen = (implicitTls: boolean) =>
    startSubmissionServer({ db, config, host: '127.0.0.1', port: 0, implicitTls, tls, log: app.log });
  const [smtp, smtps] = [await listen(false), await listen(true)];
  const target: Target = {
    api,
    smtp: smtp.port,
    smtps: smtps.port,
    token: org.sendingKey,
    from: `Bench <bench@${org.domain}>`,
    url: created.url,
  };
  process.stdout.write(`${JSON.stringify(target)}\n`);

  // Closed on SIGTERM, or when the benchmark process goes away (its end of stdin closes).
  const shutdown = async () => {
    await smtp.close();
    await smtps.close();
    await app.close();
    await db.close();
    await created.drop();
    await rm(dataDir, { recursive: true, force: true });
    process.exit(0);
  };
  process.once('SIGTERM', shutdown);
  process.stdin.once('close', shutdown).resume();
}

async function run() {
  const settings = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await settings.connect();
  const synchronousCommit = (await settings.query('SHOW synchronous_commit')).rows[0].synchronous_commit;
  await settings.end();

  const server = spawn(process.execPath, [new URL(import.meta.url).pathname, 'serve'], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: process.env,
  });
  const line = await new Promise<string>((resolve) => createInterface({ input: server.stdout! }).once('line', resolve));
  const target = JSON.parse(line) as Target;

  // The same message both ways: bench/accept.ts's body.
  const message = {
    from: target.from,
    to: ['alice@example.com', 'Bob <bob@example.com>'],
    subject: 'Your receipt',
    html: '<p>Thanks for your order.</p>',
    text: 'Thanks for your order.',
  };

  /** Sends `count` messages, CONNECTIONS at a time, each as soon as one is answered; seconds and failures. */
  async function closedLoop(count: number, send: () => Promise<boolean>) {
    let next = 0;
    let failed = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        while (next++ < count) if (!(await send().catch(() => false))) failed++;
      }),
    );
    return { seconds: (performance.now() - started) / 1000, failed };
  }

  async function measure(name: string, what: string, send: () => Promise<boolean>) {
    await closedLoop(WARMUP, send); // opens (and for SMTP secures and authenticates) every connection
    const { seconds, failed } = await closedLoop(MESSAGES, send);
    return { name, perSecond: (MESSAGES - failed) / seconds, seconds, failed, what };
  }

  const transports: Transporter[] = [];
  const smtpSend = (port: number, implicitTls: boolean) => {
    const transport = nodemailer.createTransport({
      pool: true,
      maxConnections: CONNECTIONS,
      maxMessages: Infinity,
      host: '127.0.0.1',
      port,
      secure: implicitTls,
      requireTLS: !implicitTls,
      tls: { rejectUnauthorized: false },
      auth: { user: 'mailroom', pass: target.token },
    });
    transports.push(transport);
    const mail = { ...message, headers: { 'X-Tags': 'category=receipt' } };
    return async () => Boolean((await transport.sendMail(mail)).response?.startsWith('250 '));
  };

  // A lean client, as undici is for HTTP: one connection per closed-loop slot, STARTTLS and AUTH once,
  // then per message the envelope pipelined in one write (MAIL, RCPT, RCPT, DATA), the prebuilt MIME
  // after the 354, and the 250 awaited. The MIME is composed once by nodemailer, as a library would.
  const raw = await new Promise<Buffer>((resolve, reject) =>
    new MailComposer({ ...message, headers: { 'X-Tags': 'category=receipt' } })
      .compile()
      .build((error, built) => (error ? reject(error) : resolve(built))),
  ).then((built) => Buffer.from(built.toString('latin1').replace(/\r\n\./g, '\r\n..'), 'latin1')); // dot-stuffed
  const leanSend = async (port: number, startTls: boolean) => {
    const sessions = await Promise.all(
      Array.from({ length: CONNECTIONS }, () => leanSession(port, target.token, startTls)),
    );
    const idle = [...sessions];
    return async () => {
      const session = idle.pop()!;
      try {
        return await session.send(target.from, ['alice@example.com', 'bob@example.com'], raw);
      } finally {
        idle.push(session);
      }
    };
  };

  const http = new Pool(target.api, { connections: CONNECTIONS });
  const body = JSON.stringify({ ...message, tags: [{ name: 'category', value: 'receipt' }] });
  const apiSend = async () => {
    const response = await http.request({
      path: '/emails',
      method: 'POST',
      headers: { authorization: `Bearer ${target.token}`, 'content-type': 'application/json' },
      body,
    });
    await response.body.dump();
    return response.statusCode >= 200 && response.statusCode < 300;
  };

  const results = [await measure('SMTP submission (STARTTLS)', 'errors', await leanSend(target.smtp, true))];
  // Loopback may authenticate without TLS: the like-for-like beside plain HTTP.
  const plain = await measure('  … without TLS (loopback)', 'errors', await leanSend(target.smtp, false));
  const withNodemailer = await measure('  … with nodemailer as client', 'errors', smtpSend(target.smtp, false));
  if (IMPLICIT_TLS)
    results.push(await measure('SMTP submission (implicit TLS)', 'errors', smtpSend(target.smtps, true)));
  const api = await measure('POST /emails', 'non-2xx', apiSend);
  results.push(api);
  await http.close();
  for (const transport of transports) transport.close();

  const check = new pg.Client({ connectionString: target.url });
  await check.connect();
  const stored = (await check.query<{ n: number }>('SELECT count(*)::int AS n FROM emails')).rows[0]!.n;
  await check.end();
  const expected = (results.length + 2) * (WARMUP + MESSAGES);

  console.log(
    `PostgreSQL synchronous_commit=${synchronousCommit}; ${MESSAGES} messages each, ${CONNECTIONS} connections`,
  );
  for (const r of [results[0]!, plain, withNodemailer, ...results.slice(1)]) {
    console.log(
      `${r.name.padEnd(31)} ${r.perSecond.toFixed(0).padStart(6)} accepted/s  (${r.seconds.toFixed(2)} s; ${r.what} ${r.failed})`,
    );
  }
  const apiRate = api.perSecond;
  console.log(`ratio (submission / API): ${(results[0]!.perSecond / apiRate).toFixed(2)}`);
  console.log(`ratio (submission without TLS / API): ${(plain.perSecond / apiRate).toFixed(2)}`);
  console.log(`ratio (nodemailer's submission / API): ${(withNodemailer.perSecond / apiRate).toFixed(2)}`);
  if (IMPLICIT_TLS) console.log(`ratio (implicit TLS / API): ${(results[1]!.perSecond / apiRate).toFixed(2)}`);
  console.log(
    `emails stored: ${stored} of ${expected} sent (warm-up included)${stored === expected ? '' : '  MISMATCH'}`,
  );

  server.kill('SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  if (stored !== expected || [...results, plain, withNodemailer].some((r) => r.failed > 0)) process.exitCode = 1;
}

/** One SMTP session on loopback, secured with STARTTLS (unless not asked) and authenticated; one message at a time. */
async function leanSession(port: number, key: string, startTls: boolean) {
  let socket: net.Socket | tls.TLSSocket = net.connect(port, '127.0.0.1');
  let buffer = '';
  let waiting: { count: number; lines: string[]; done: (lines: string[]) => void } | undefined;
  const onData = (chunk: Buffer) => {
    buffer += chunk.toString('latin1');
    let end;
    while ((end = buffer.indexOf('\r\n')) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!/^\d{3} /.test(line) || !waiting) continue; // only a reply's last line answers
      waiting.lines.push(line);
      if (waiting.lines.length === waiting.count) {
        const { done, lines } = waiting;
        waiting = undefined;
        done(lines);
      }
    }
  };
  const replies = (count: number) =>
    new Promise<string[]>((done) => {
      waiting = { count, lines: [], done };
    });
  socket.on('data', onData);
  const say = async (text: string | Buffer, count = 1) => {
    const answer = replies(count);
    socket.write(text);
    return answer;
  };
  await replies(1); // greeting
  await say('EHLO bench.example\r\n');
  if (startTls) {
    await say('STARTTLS\r\n');
    socket.off('data', onData);
    socket = tls.connect({ socket, rejectUnauthorized: false });
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    socket.on('data', onData);
    await say('EHLO bench.example\r\n');
  }
  const [auth] = await say(`AUTH PLAIN ${Buffer.from(`\0mailroom\0${key}`).toString('base64')}\r\n`);
  if (!auth!.startsWith('235')) throw new Error(`AUTH: ${auth}`);
  return {
    async send(from: string, to: string[], raw: Buffer): Promise<boolean> {
      const address = /<([^>]+)>/.exec(from)?.[1] ?? from;
      const envelope = [`MAIL FROM:<${address}>`, ...to.map((rcpt) => `RCPT TO:<${rcpt}>`), 'DATA'];
      const answers = await say(`${envelope.join('\r\n')}\r\n`, envelope.length);
      if (!answers.at(-1)!.startsWith('354')) return false;
      const [done] = await say(Buffer.concat([raw, Buffer.from('\r\n.\r\n')]));
      return done!.startsWith('250 ');
    },
  };
}
