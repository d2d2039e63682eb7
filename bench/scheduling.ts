// Scheduling benchmark: COUNT messages scheduled for the same second, all accepted before it comes, then
// delivered by `mailroom serve` to a loopback SMTP sink that notes when each one arrived. Prints how late
// they arrived (arrival − scheduled time: p50, p90, p99, max) beside the target, and how long it took
// for all of them to leave. Then the same for Postfix, which has no scheduled sending of its own: COUNT
// messages put on its hold queue as it accepts them, and all released at one second (postsuper -H ALL,
// postqueue -f), relayed to the same sink: how fast this machine can empty a queue of COUNT messages.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/scheduling.ts
//
// COUNT (default 10000), LEAD (seconds between the start and the scheduled second, default enough to
// accept COUNT messages at 500 a second, at least 5), CONCURRENCY (the worker's, default Mailroom's own;
// smtp-source's sessions: 50), POSTFIX=0 to leave Postfix out. Runs as root when Postfix is raced (it is
// installed from Debian when missing).
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { ensurePostfix, feedPostfix, postfixVersion, startPostfix, stopChild } from './postfix.ts';
import { type Teardown, withTeardown } from './teardown.ts';

const COUNT = Number(process.env.COUNT ?? 10_000);
const LEAD = Number(process.env.LEAD ?? Math.max(5, Math.ceil(COUNT / 500)));
const CONCURRENCY = process.env.CONCURRENCY;
const RACE_POSTFIX = process.env.POSTFIX !== '0';
const POSTFIX_SESSIONS = 50;
const BATCHES_IN_FLIGHT = 4;
const TARGET_P99_MS = 1000;
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

const now = () => performance.timeOrigin + performance.now();

// The sink: accepts everything and notes when each message arrived. A Mailroom message names its number
// in its recipient (c<i>@example.com): each must arrive once.
let arrivals: number[] = [];
let seen = new Set<number>();
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
        const i = /^c(\d+)@/.exec(rcpt.address)?.[1];
        if (i !== undefined) {
          if (seen.has(Number(i))) throw new Error(`message ${i} arrived twice`);
          seen.add(Number(i));
        }
        arrivals.push(at);
      }
      onReceived?.();
      callback();
    });
  },
});
await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
const sinkPort = (sink.server.address() as { port: number }).port;

/** Resolves once COUNT messages have arrived since the last reset, or fails after a minute without one. */
function allArrived(since: number): Promise<void> {
  let lastProgress = Math.max(now(), since);
  return new Promise<void>((resolve, reject) => {
    const stalled = setInterval(() => {
      if (now() - lastProgress > 60_000) {
        clearInterval(stalled);
        reject(new Error(`${arrivals.length} of ${COUNT} messages arrived, none in the last minute`));
      }
    }, 1000);
    onReceived = () => {
      lastProgress = now();
      if (arrivals.length >= COUNT) {
        clearInterval(stalled);
        resolve();
      }
    };
    onReceived();
  });
}

function resetSink() {
  arrivals = [];
  seen = new Set();
}

/** Lateness of each arrival after the scheduled second, in order. */
interface Lateness {
  sorted: number[];
  scheduledIso: string;
  acceptSeconds: number;
  aheadSeconds: number;
}

async function raceMailroom(teardown: Teardown): Promise<Lateness> {
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
    (started) => stopChild(started.child),
  );

  // A whole second, LEAD seconds ahead: every message is scheduled for it.
  resetSink();
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
  if (acceptedAt >= scheduledAt || arrivals.length > 0) {
    throw new Error(
      `accepting took ${((acceptedAt - acceptStart) / 1000).toFixed(1)} s, past the scheduled second: raise LEAD (${LEAD} s)`,
    );
  }
  await allArrived(scheduledAt);
  // Out of Postfix's way (the teardown repeats both harmlessly).
  await stopChild(server.child);
  await created.drop();
  return {
    sorted: arrivals.map((at) => at - scheduledAt).sort((a, b) => a - b),
    scheduledIso,
    acceptSeconds: (acceptedAt - acceptStart) / 1000,
    aheadSeconds: (scheduledAt - acceptedAt) / 1000,
  };
}

async function racePostfix(teardown: Teardown): Promise<Lateness> {
  await ensurePostfix();
  const postfix = await startPostfix(teardown, sinkPort, { hold: true });
  resetSink();
  const acceptStart = now();
  await feedPostfix(teardown, postfix.port, { sessions: POSTFIX_SESSIONS, messages: COUNT, size: 200 });
  const acceptedAt = now();
  // Every message on hold (the cleanup daemon files each one before smtpd answers 250).
  const held = postfix.queued();
  if (held !== COUNT || arrivals.length > 0) {
    throw new Error(`Postfix holds ${held} messages, ${arrivals.length} arrived: expected ${COUNT} held, none sent`);
  }
  const scheduledAt = Math.ceil((Date.now() + 1000) / 1000) * 1000;
  await new Promise((resolve) => setTimeout(resolve, scheduledAt - Date.now()));
  postfix.release();
  await allArrived(scheduledAt);
  return {
    sorted: arrivals.map((at) => at - scheduledAt).sort((a, b) => a - b),
    scheduledIso: new Date(scheduledAt).toISOString(),
    acceptSeconds: (acceptedAt - acceptStart) / 1000,
    aheadSeconds: (scheduledAt - acceptedAt) / 1000,
  };
}

const ms = (value: number) => `${value.toFixed(0)} ms`;
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * p) - 1)]!;

function report(name: string, run: Lateness) {
  const { sorted } = run;
  const first = sorted[0]!;
  const last = sorted.at(-1)!;
  console.log(
    `${name.padEnd(9)} lateness  p50 ${ms(pct(sorted, 0.5))}   p90 ${ms(pct(sorted, 0.9))}   p99 ${ms(pct(sorted, 0.99))}   max ${ms(last)}   ` +
      `(first ${ms(first)}; ${(COUNT / ((last - first) / 1000 || 1)).toFixed(0)} delivered/s between first and last; ` +
      `all accepted in ${run.acceptSeconds.toFixed(2)} s, ${run.aheadSeconds.toFixed(2)} s ahead)`,
  );
}

await withTeardown(async (teardown) => {
  await teardown.own(
    () => sink,
    () => sink.close(),
  );
  const mailroom = await raceMailroom(teardown);
  const postfix = RACE_POSTFIX ? await racePostfix(teardown) : undefined;

  console.log(
    `${COUNT} messages due at one second, one recipient each, relayed to an SMTP sink on loopback (worker concurrency ${CONCURRENCY ?? 'default'}, PostgreSQL)`,
  );
  if (postfix) {
    console.log(
      `  Postfix ${postfixVersion()}: all ${COUNT} on its hold queue, released at the second (postsuper -H ALL; postqueue -f); smtp-source bodies of 200 bytes, not signed`,
    );
  }
  report('Mailroom', mailroom);
  if (postfix) report('Postfix', postfix);
  const p99 = pct(mailroom.sorted, 0.99);
  console.log(`Mailroom p99 ${ms(p99)} (target ≤ ${ms(TARGET_P99_MS)})`);
  if (postfix) console.log(`ratio (Postfix p99 / Mailroom p99): ${(pct(postfix.sorted, 0.99) / p99).toFixed(3)}`);
});
