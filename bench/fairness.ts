// Fairness benchmark: does one organization's burst delay another organization's message? One
// `mailroom serve` (PostgreSQL, the smtp relay transport to a loopback SMTP sink) is given BURST
// (50,000) receipts from organization A; while A's backlog drains, organization B sends a password
// reset every PROBE_EVERY seconds. Each reset's latency (submitted → at the sink) races the same
// reset sent with the queue empty, in the same run (the baseline), and is set beside what taking the
// queue oldest first would cost it: the backlog ahead of it at A's delivery rate.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/fairness.ts
//
// BURST (50000), PROBES (5), PROBE_EVERY (10 s), CONCURRENCY (the worker's, 50: the default).
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { createTestOrganization, type TestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { submitReceipts } from './submit-receipts.ts';
import { Teardown } from './teardown.ts';

const BURST = Number(process.env.BURST ?? 50_000);
const PROBES = Number(process.env.PROBES ?? 5);
const PROBE_EVERY_S = Number(process.env.PROBE_EVERY ?? 10);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 50);
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}
const teardown = new Teardown();

// The sink: when each recipient arrived, and how many of the burst had arrived by then.
let burstArrived = 0;
const arrivals = new Map<string, { at: number; burstBefore: number }>();
const sink = await teardown.own(
  async () => {
    const server = new SMTPServer({
      authOptional: true,
      disableReverseLookup: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      onData(stream, session, callback) {
        stream.resume();
        stream.on('end', () => {
          for (const rcpt of session.envelope.rcptTo) {
            if (rcpt.address.startsWith('burst')) burstArrived += 1;
            else arrivals.set(rcpt.address, { at: performance.now(), burstBefore: burstArrived });
          }
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return server;
  },
  (server) => new Promise<void>((resolve) => server.close(() => resolve())),
);
const sinkPort = (sink.server.address() as { port: number }).port;

const created = await teardown.own(createPostgresDatabase, (database) => database.drop());
const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_LOG_LEVEL: 'silent' });
const db = openPostgres(created.url, 2);
await migrate(db);
const burster = await createTestOrganization(db, config, 'burst');
const other = await createTestOrganization(db, config, 'reset');
await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000');
const server = await teardown.own(
  () =>
    startServerProcess({
      DATABASE_URL: created.url,
      MAILROOM_TRANSPORT: 'smtp',
      MAILROOM_SMTP_URL: `smtp://127.0.0.1:${sinkPort}`,
      MAILROOM_WORKER_CONCURRENCY: String(CONCURRENCY),
    }),
  async (process) => {
    process.child.kill('SIGTERM');
    await process.exited;
  },
);

/** Sends B's reset to `to`; resolves with its latency (ms) and the burst delivered meanwhile. */
async function reset(org: TestOrganization, to: string) {
  const sent = performance.now();
  const burstAtSend = burstArrived;
  const res = await fetch(`${server.base}/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${org.sendingKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: `Acme <hello@${org.domain}>`, to, subject: 'Reset your password', text: 'Code 1234' }),
  });
  if (res.status !== 200) throw new Error(`the reset was refused: ${res.status} ${await res.text()}`);
  while (!arrivals.has(to)) await new Promise((resolve) => setTimeout(resolve, 2));
  const arrival = arrivals.get(to)!;
  return { ms: arrival.at - sent, burstMeanwhile: arrival.burstBefore - burstAtSend };
}

const pendingBurst = async () =>
  (
    await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM jobs WHERE queue = 'deliver-email' AND share_key = $1",
      [burster.id],
    )
  ).rows[0]!.n;

try {
  // The baseline: the reset with the queue empty (after one to warm the connections up).
  await reset(other, 'warm@example.com');
  const alone = [];
  for (let i = 0; i < PROBES; i++) alone.push((await reset(other, `alone${i}@example.com`)).ms);

  // The burst, accepted as fast as the API takes it, in waves of 2,000.
  const started = performance.now();
  for (let first = 0; first < BURST; first += 2000) {
    const count = Math.min(2000, BURST - first);
    await submitReceipts(server.base, burster, count, (i) => `burst${first + i}@example.com`);
  }
  const acceptedS = (performance.now() - started) / 1000;

  const during = [];
  for (let i = 0; i < PROBES; i++) {
    const backlog = await pendingBurst();
    if (backlog === 0) break;
    const rateNow = burstArrived / ((performance.now() - started) / 1000);
    const probe = await reset(other, `probe${i}@example.com`);
    during.push({ ...probe, backlog, oldestFirstMs: (backlog / rateNow) * 1000 });
    await new Promise((resolve) => setTimeout(resolve, PROBE_EVERY_S * 1000));
  }
  while (burstArrived < BURST) await new Promise((resolve) => setTimeout(resolve, 50));
  const drainS = (performance.now() - started) / 1000;

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const aloneMs = median(alone);
  console.log(
    `${BURST} receipts from organization A, then a password reset from organization B every ${PROBE_EVERY_S} s while A's backlog drains`,
  );
  console.log(
    `  mailroom serve, PostgreSQL, MAILROOM_TRANSPORT=smtp to a loopback sink, worker concurrency ${CONCURRENCY}`,
  );
  console.log(
    `A's burst: accepted in ${acceptedS.toFixed(1)} s, delivered in ${drainS.toFixed(1)} s (${(BURST / drainS).toFixed(0)}/s)`,
  );
  console.log(
    `B's reset alone (queue empty): median ${aloneMs.toFixed(0)} ms (${alone.map((ms) => ms.toFixed(0)).join(', ')})`,
  );
  for (const probe of during) {
    console.log(
      `B's reset behind ${String(probe.backlog).padStart(6)} of A's: ${probe.ms.toFixed(0).padStart(5)} ms (${(probe.ms / aloneMs).toFixed(1)}x alone), ` +
        `${probe.burstMeanwhile} of A's delivered meanwhile; oldest first it would wait about ${(probe.oldestFirstMs / 1000).toFixed(1)} s (the backlog at A's rate so far)`,
    );
  }
  if (during.length > 0) {
    const worst = Math.max(...during.map((probe) => probe.ms));
    console.log(
      `worst reset during the burst: ${worst.toFixed(0)} ms, ${(worst / aloneMs).toFixed(1)}x the reset alone`,
    );
  }
} finally {
  await db.close();
  await teardown.run();
}
