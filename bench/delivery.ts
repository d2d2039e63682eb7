// Delivery benchmark: messages accepted through the API and delivered to a loopback SMTP sink, end to
// end (accept → queue → worker → compose + DKIM → SMTP relay), beside nodemailer sending the same
// messages straight to the same sink with the same pool (5 connections) and in-flight limit: the
// ceiling for one Node process.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/delivery.ts
//
// MESSAGES (default 2000) and CONCURRENCY (worker concurrency and nodemailer in-flight, default 10).
import { randomUUID, generateKeyPairSync } from 'node:crypto';
import { SMTPServer } from 'smtp-server';
import nodemailer from 'nodemailer';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { receipt, submitReceipts } from './submit-receipts.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 2000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 10);
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

// The sink: accepts everything, counts recipients, keeps nothing.
let received = 0;
let onReceived: (() => void) | undefined;
const sink = new SMTPServer({
  authOptional: true,
  disableReverseLookup: true,
  disabledCommands: ['STARTTLS'],
  logger: false,
  onData(stream, session, callback) {
    stream.on('data', () => {});
    stream.on('end', () => {
      received += session.envelope.rcptTo.length;
      onReceived?.();
      callback();
    });
  },
});
await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
const sinkPort = (sink.server.address() as { port: number }).port;
const until = (count: number) =>
  new Promise<void>((resolve) => {
    onReceived = () => received >= count && resolve();
    onReceived();
  });

// 1. Mailroom, end to end.
const created = await createPostgresDatabase();
const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_LOG_LEVEL: 'silent' });
const db = openPostgres(created.url, 4);
await migrate(db);
const org = await createTestOrganization(db, config, 'dbench');
await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [org.id]);
if (process.env.NO_TRACKING) await db.query('UPDATE organizations SET open_tracking = false, click_tracking = false');
await db.close();
const server = await startServerProcess({
  DATABASE_URL: created.url,
  MAILROOM_TRANSPORT: 'smtp',
  MAILROOM_SMTP_URL: `smtp://127.0.0.1:${sinkPort}`,
  MAILROOM_WORKER_CONCURRENCY: String(CONCURRENCY),
});
const started = performance.now();
await submitReceipts(server.base, org, MESSAGES, (i) => `c${i}@example.com`);
const acceptedAt = performance.now();
await until(MESSAGES);
const mailroomSeconds = (performance.now() - started) / 1000;
server.child.kill('SIGTERM');
await server.exited;
await created.drop();

// 2. nodemailer straight to the sink: compose + DKIM + SMTP, the same pool, the same concurrency.
received = 0;
const { privateKey } = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  publicKeyEncoding: { type: 'spki', format: 'pem' },
});
const direct = nodemailer.createTransport({
  pool: true,
  host: '127.0.0.1',
  port: sinkPort,
  secure: false,
  ignoreTLS: true,
});
const baselineStart = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (next < MESSAGES) {
      const i = next++;
      await direct.sendMail({
        from: `Shop <shop@${org.domain}>`,
        to: `c${i}@example.com`,
        messageId: `<${randomUUID()}@${org.domain}>`,
        dkim: { domainName: org.domain, keySelector: 'mailroom', privateKey },
        ...receipt(i),
      });
    }
  }),
);
const baselineSeconds = (performance.now() - baselineStart) / 1000;
direct.close();
sink.close();

const mailroomRate = MESSAGES / mailroomSeconds;
const baselineRate = MESSAGES / baselineSeconds;
console.log(`${MESSAGES} messages, one recipient each, concurrency ${CONCURRENCY}, PostgreSQL, SMTP sink on loopback`);
console.log(
  `Mailroom end to end        ${mailroomRate.toFixed(0).padStart(6)} delivered/s  (${mailroomSeconds.toFixed(2)} s; all accepted after ${((acceptedAt - started) / 1000).toFixed(2)} s)`,
);
console.log(
  `nodemailer straight to sink ${baselineRate.toFixed(0).padStart(5)} delivered/s  (${baselineSeconds.toFixed(2)} s)`,
);
console.log(`ratio (Mailroom / nodemailer): ${(mailroomRate / baselineRate).toFixed(3)}`);
