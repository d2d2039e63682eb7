// Delivery race: Mailroom against Postfix, both relaying to the same loopback sink (Postfix's smtp-sink).
// Mailroom: a fresh PostgreSQL database, `mailroom serve` with MAILROOM_TRANSPORT=smtp to the sink, the
// messages sent through POST /emails/batch, as bench/delivery.ts does. Postfix: a throw-away instance in a
// temporary directory (its own main.cf, master.cf, queue and data directories, smtpd on a free loopback
// port, relayhost the sink), fed by smtp-source. Each side is timed from its first message until the sink
// has counted every one.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/delivery-vs-postfix.ts
//
// Runs as root: it installs Debian's postfix package when its programs are missing, and starts Postfix.
// MESSAGES (default 2000), CONCURRENCY (Mailroom's worker concurrency and smtp-source's sessions, default
// 50: Mailroom's own default),
// SIZE (smtp-source's body in bytes, default 1500: a Mailroom message of this benchmark, signed and tracked,
// is about 1,500 bytes at the sink, headers included).
import pg from 'pg';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { startServerProcess, type ServerProcess } from '../test/helpers/server-process.ts';
import { ensurePostfix, feedPostfix, postfixVersion, startPostfix, startSmtpSink, stopChild } from './postfix.ts';
import { type Teardown, withTeardown } from './teardown.ts';
import { submitReceipts } from './submit-receipts.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 2000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 50);
const SIZE = Number(process.env.SIZE ?? 1500);
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

type Sink = Awaited<ReturnType<typeof startSmtpSink>>;

async function raceMailroom(teardown: Teardown, sink: Sink) {
  const created = await teardown.own(createPostgresDatabase, (made) => made.drop());
  const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_LOG_LEVEL: 'silent' });
  const db = openPostgres(created.url, 4);
  await migrate(db);
  const org = await createTestOrganization(db, config, 'pbench');
  await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [org.id]);
  await db.close();
  const server: ServerProcess = await teardown.own(
    () =>
      startServerProcess({
        DATABASE_URL: created.url,
        MAILROOM_TRANSPORT: 'smtp',
        MAILROOM_SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
        MAILROOM_WORKER_CONCURRENCY: String(CONCURRENCY),
        // A CPU profile of the server, for where the time goes: PROFILE_DIR=/tmp/prof.
        ...(process.env.PROFILE_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.PROFILE_DIR}` } : {}),
      }),
    (started) => stopChild(started.child),
  );
  const before = sink.count();
  const started = performance.now();
  await submitReceipts(server.base, org, MESSAGES, (i) => `c${i}@example.com`);
  const acceptedAt = performance.now();
  await sink.until(before + MESSAGES);
  const seconds = (performance.now() - started) / 1000;
  const counted = await settled(sink, before, 'Mailroom');
  // Out of Postfix's way (both steps are idempotent: the teardown repeats them harmlessly).
  await stopChild(server.child);
  await created.drop();
  return { seconds, acceptedAfter: (acceptedAt - started) / 1000, counted };
}

async function racePostfix(teardown: Teardown, sink: Sink, smtpdPort: number) {
  const before = sink.count();
  const started = performance.now();
  await feedPostfix(teardown, smtpdPort, { sessions: CONCURRENCY, messages: MESSAGES, size: SIZE });
  const acceptedAt = performance.now();
  await sink.until(before + MESSAGES);
  const seconds = (performance.now() - started) / 1000;
  return { seconds, acceptedAfter: (acceptedAt - started) / 1000, counted: await settled(sink, before, 'Postfix') };
}

/** The sink's count a second after a race: exactly the race's messages, none lost or doubled. */
async function settled(sink: Sink, before: number, label: string) {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const counted = sink.count() - before;
  if (counted !== MESSAGES) throw new Error(`${label}: the sink counted ${counted} messages, expected ${MESSAGES}`);
  return counted;
}

await withTeardown(async (teardown) => {
  await ensurePostfix();
  const settings = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await settings.connect();
  const show = async (name: string) => (await settings.query(`SHOW ${name}`)).rows[0][name] as string;
  const durability = `synchronous_commit=${await show('synchronous_commit')} fsync=${await show('fsync')}`;
  await settings.end();
  const version = postfixVersion();

  const sink = await startSmtpSink(teardown);
  const postfix = await startPostfix(teardown, sink.port);

  const mailroom = await raceMailroom(teardown, sink);
  const relay = await racePostfix(teardown, sink, postfix.port);

  const mailroomRate = MESSAGES / mailroom.seconds;
  const postfixRate = MESSAGES / relay.seconds;
  console.log(
    `${MESSAGES} messages, one recipient each, concurrency ${CONCURRENCY}, both relaying to smtp-sink on loopback`,
  );
  console.log(`  Mailroom: PostgreSQL ${durability}; messages composed and DKIM-signed`);
  console.log(
    `  Postfix ${version}: queue files fsynced before each 250 (Postfix's own rule); smtp-source bodies of ${SIZE} bytes, not signed`,
  );
  console.log(
    `Mailroom end to end      ${mailroomRate.toFixed(0).padStart(6)} delivered/s  (${mailroom.seconds.toFixed(2)} s; all accepted after ${mailroom.acceptedAfter.toFixed(2)} s; sink counted ${mailroom.counted})`,
  );
  console.log(
    `Postfix relay            ${postfixRate.toFixed(0).padStart(6)} delivered/s  (${relay.seconds.toFixed(2)} s; all accepted after ${relay.acceptedAfter.toFixed(2)} s; sink counted ${relay.counted})`,
  );
  console.log(`ratio (Mailroom / Postfix): ${(mailroomRate / postfixRate).toFixed(3)}`);
});
