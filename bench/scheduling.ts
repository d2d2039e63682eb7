// Scheduling benchmark: COUNT messages scheduled for the same second, all accepted before it comes, then
// delivered by `mailroom serve` to a loopback SMTP sink that notes when each one arrived. Prints how late
// they arrived (arrival − scheduled time: p50, p90, p99, max) beside the target, and how long it took
// for all of them to leave.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/scheduling.ts
//
// COUNT (default 10000), LEAD (seconds between the start and the scheduled second, default enough to
// accept COUNT messages at 500 a second, at least 5), CONCURRENCY (the worker's, default Mailroom's own).
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { withTeardown } from './teardown.ts';

const COUNT = Number(process.env.COUNT ?? 10_000);
const LEAD = Number(process.env.LEAD ?? Math.max(5, Math.ceil(COUNT / 500)));
const CONCURRENCY = process.env.CONCURRENCY;
const BATCHES_IN_FLIGHT = 4;
const TARGET_P99_MS = 1000;
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

const now = () => performance.timeOrigin + performance.now();

// The sink: accepts everything and notes, per message (recipient c<i>@example.com), when it arrived.
const arrivals = new Array<number | undefined>(COUNT);
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
      const at = now();
      for (const rcpt of session.envelope.rcptTo) {
        const i = Number(/^c(\d+)@/.exec(rcpt.address)?.[1]);
        if (arrivals[i] === undefined) received++;
        arrivals[i] = at;
      }
      onReceived?.();
      callback();
    });
  },
});
await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
const sinkPort = (sink.server.address() as { port: number }).port;

await withTeardown(async (teardown) => {
  await teardown.own(
    () => sink,
    () => sink.close(),
  );
  const created = await teardown.own(createPostgresDatabase, (made) => made.drop());
  const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_LOG_LEVEL: 'silent' });
  const db = openPostgres(created.url, 4);
  await migrate(db);
  const org = await createTestOrganization(db, config, 'sbench');
  await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [org.id]);
  await db.close();
  const server = await teardown.own(
    () =>
      startServerProcess({
        DATABASE_URL: created.url,
        MAILROOM_TRANSPORT: 'smtp',
        MAILROOM_SMTP_URL: `smtp://127.0.0.1:${sinkPort}`,
        ...(CONCURRENCY ? { MAILROOM_WORKER_CONCURRENCY: CONCURRENCY } : {}),
      }),
    async (started) => {
      started.child.kill('SIGTERM');
      await started.exited;
    },
  );

  // A whole second, LEAD seconds ahead: every message is scheduled for it.
  const scheduledAt = Math.ceil((Date.now() + LEAD * 1000) / 1000) * 1000;
  const scheduledIso = new Date(scheduledAt).toISOString();
  const acceptStart = now();
  let nextBatch = 0;
  await Promise.all(
    Array.from({ length: BATCHES_IN_FLIGHT }, async () => {
      for (let first = nextBatch; first < COUNT; first = nextBatch) {
        nextBatch += 100;
        const entries = [];
        for (let i = first; i < Math.min(COUNT, first + 100); i++) {
          entries.push({
            from: `Shop <shop@${org.domain}>`,
            to: `c${i}@example.com`,
            subject: `Your reminder #${i}`,
            html: `<p>Your appointment ${i} is tomorrow.</p>`,
            text: `Your appointment ${i} is tomorrow.`,
            scheduled_at: scheduledIso,
          });
        }
        const res = await fetch(`${server.base}/emails/batch`, {
          method: 'POST',
          headers: { authorization: `Bearer ${org.sendingKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(entries),
        });
        const answer = await res.text();
        if (res.status !== 200 || JSON.parse(answer).errors) throw new Error(`batch answered ${res.status}: ${answer}`);
      }
    }),
  );
  const acceptedAt = now();
  if (acceptedAt >= scheduledAt || received > 0) {
    throw new Error(
      `accepting took ${((acceptedAt - acceptStart) / 1000).toFixed(1)} s, past the scheduled second: raise LEAD (${LEAD} s)`,
    );
  }

  // Every message, or a minute without an arrival (one lost) after the scheduled second.
  let lastProgress = Math.max(now(), scheduledAt);
  await new Promise<void>((resolve, reject) => {
    const stalled = setInterval(() => {
      if (now() - lastProgress > 60_000) {
        clearInterval(stalled);
        reject(new Error(`${received} of ${COUNT} messages arrived, none in the last minute`));
      }
    }, 1000);
    onReceived = () => {
      lastProgress = now();
      if (received >= COUNT) {
        clearInterval(stalled);
        resolve();
      }
    };
  });
  const lateness = (arrivals as number[]).map((at) => at - scheduledAt).sort((a, b) => a - b);
  const pct = (p: number) => lateness[Math.min(lateness.length - 1, Math.ceil(lateness.length * p) - 1)]!;
  const ms = (value: number) => `${value.toFixed(0)} ms`;
  const firstArrival = lateness[0]!;
  const lastArrival = lateness.at(-1)!;

  console.log(
    `${COUNT} messages scheduled for one second (${scheduledIso}), one recipient each, worker concurrency ${CONCURRENCY ?? 'default'}, PostgreSQL, SMTP sink on loopback`,
  );
  console.log(
    `all accepted in ${((acceptedAt - acceptStart) / 1000).toFixed(2)} s, ${((scheduledAt - acceptedAt) / 1000).toFixed(2)} s before the scheduled second`,
  );
  console.log(
    `lateness (arrival − scheduled)  p50 ${ms(pct(0.5))}   p90 ${ms(pct(0.9))}   p99 ${ms(pct(0.99))}   max ${ms(lastArrival)}   (target p99 ≤ ${ms(TARGET_P99_MS)})`,
  );
  console.log(
    `first arrived ${ms(firstArrival)} after the scheduled second; all ${COUNT} left within ${(lastArrival / 1000).toFixed(2)} s (${(COUNT / ((lastArrival - firstArrival) / 1000 || 1)).toFixed(0)} delivered/s between first and last)`,
  );
});
