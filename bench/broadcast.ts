// Broadcast lanes: a 100,000-contact broadcast to a loopback sink while a steady stream of transactional
// sends runs, against the same stream with no broadcast, in one run on one server.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx node bench/broadcast.ts
//
// Prints, in order:
// 1. the snapshot of the audience (broadcast_recipients written, each contact counted by reason), timed on
//    its own on a second broadcast to the same segment;
// 2. plain delivery of as many messages as the broadcast has contacts, as `delivery-vs-postfix` measures
//    it (receipts through POST /emails/batch, one recipient each) on the same server, and Postfix relaying
//    POSTFIX_MESSAGES to the same sink (for scale only: no target is set against it);
// 3. the transactional stream alone: accept → delivered p50/p99 (Mailroom's own timeline: the `accepted`
//    entry to the `delivered` entry, written when the sink's 250 arrived);
// 3b. the same stream while LOAD plain messages of another organization deliver as fast as they go: the
//    machine as busy as during the broadcast, with no broadcast (what is lost here is the busy machine's);
// 4. the broadcast with the same stream running: the broadcast's copies per second (send to the sink's
//    last copy) and the stream's p50/p99 again.
// Targets: the stream's p99 with the broadcast within 2× of idle; the broadcast's copies/s at least 0.8 of
// plain delivery's rate for the same number of messages; the snapshot of 100,000 under 10 s.
//
// Runs as root: it installs Debian's postfix package when its programs are missing (smtp-sink is the
// sink). CONTACTS (default 100000), STREAM_RATE (transactional sends a second, default 10),
// IDLE_SECONDS (the stream alone, default 30), CONCURRENCY (worker concurrency, default 50), MESSAGES
// (plain delivery's count, default CONTACTS), POSTFIX_MESSAGES (default 2000), LOAD (the plain load of
// step 3b, default 20000). STATEMENTS=1 prints where the database's time went in steps 2 and 4
// (bench/statements.ts).
import pg from 'pg';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { takeSnapshot } from '../src/broadcasts/snapshot.ts';
import { createTestOrganization, type TestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { ensurePostfix, feedPostfix, startPostfix, startSmtpSink, stopChild } from './postfix.ts';
import { withTeardown } from './teardown.ts';
import { submitReceipts } from './submit-receipts.ts';
import { printStatements, resetStatements } from './statements.ts';

const CONTACTS = Number(process.env.CONTACTS ?? 100_000);
const STREAM_RATE = Number(process.env.STREAM_RATE ?? 10);
const IDLE_SECONDS = Number(process.env.IDLE_SECONDS ?? 30);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 50);
// The same number as the broadcast's copies: a short burst delivers faster than a long run on a database
// that grows as it goes, so a burst of 2,000 against 100,000 copies compared unlike things.
const MESSAGES = Number(process.env.MESSAGES ?? CONTACTS);
const POSTFIX_MESSAGES = Number(process.env.POSTFIX_MESSAGES ?? 2000);
const LOAD = Number(process.env.LOAD ?? 20_000);
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

type Sink = Awaited<ReturnType<typeof startSmtpSink>>;

/** The contacts, all in one segment, written by SQL (not what is measured). */
async function seedAudience(db: pg.Client, organizationId: string): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    "INSERT INTO segments (organization_id, name) VALUES ($1, 'Everyone') RETURNING id",
    [organizationId],
  );
  const segmentId = rows[0]!.id;
  await db.query(
    `WITH made AS (
       INSERT INTO contacts (organization_id, email, first_name)
       SELECT $1, 'c' || i || '@example.com', CASE WHEN i % 3 = 0 THEN NULL ELSE 'Reader ' || i END
         FROM generate_series(1, $2::int) AS i
       RETURNING id)
     INSERT INTO contact_segments (contact_id, segment_id) SELECT id, $3 FROM made`,
    [organizationId, CONTACTS, segmentId],
  );
  return segmentId;
}

async function api(base: string, key: string, method: string, path: string, body?: unknown) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * Sends STREAM_RATE transactional messages a second (each a POST /emails, one recipient) until `until`
 * says stop; returns their ids.
 */
async function transactionalStream(base: string, org: TestOrganization, tag: string, until: () => boolean) {
  const ids: string[] = [];
  const sends: Promise<void>[] = [];
  const interval = 1000 / STREAM_RATE;
  let next = performance.now();
  for (let i = 0; !until(); i++) {
    sends.push(
      api(base, org.sendingKey, 'POST', '/emails', {
        from: `Shop <shop@${org.domain}>`,
        to: `${tag}${i}@tx.example`,
        subject: `Your code ${i}`,
        text: `Your sign-in code is ${100000 + i}.`,
      }).then((answer) => void ids.push(String(answer.id))),
    );
    next += interval;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
  }
  await Promise.all(sends);
  return ids;
}

/** Accept → delivered, in milliseconds, of each message, from the timeline; waits until all are delivered. */
async function latencies(db: pg.Client, ids: string[]): Promise<number[]> {
  for (;;) {
    const { rows } = await db.query<{ ms: number | null }>(
      `SELECT (extract(epoch FROM d.created_at - a.created_at) * 1000)::float8 AS ms
         FROM unnest($1::uuid[]) AS e(id)
         JOIN email_events a ON a.email_id = e.id AND a.type = 'accepted'
         LEFT JOIN email_events d ON d.email_id = e.id AND d.type = 'delivered'`,
      [ids],
    );
    if (rows.length === ids.length && rows.every((row) => row.ms !== null)) return rows.map((row) => row.ms!);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
function summary(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), n: sorted.length };
}

await withTeardown(async (teardown) => {
  await ensurePostfix();
  const sink: Sink = await startSmtpSink(teardown);
  const postfix = await startPostfix(teardown, sink.port);

  const created = await teardown.own(createPostgresDatabase, (made) => made.drop());
  const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_LOG_LEVEL: 'silent' });
  const setup = openPostgres(created.url, 4);
  await migrate(setup);
  const org = await createTestOrganization(setup, config, 'bbench');
  await setup.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [
    org.id,
  ]);
  await setup.close();
  const db = await teardown.own(
    async () => {
      const client = new pg.Client({ connectionString: created.url });
      await client.connect();
      return client;
    },
    (client) => client.end(),
  );

  // 1. The snapshot, on its own.
  let started = performance.now();
  const segmentId = await seedAudience(db, org.id);
  const seeded = (performance.now() - started) / 1000;
  const { rows: drafts } = await db.query<{ id: string }>(
    `INSERT INTO broadcasts (organization_id, name, segment_id, "from", subject, html, status)
     VALUES ($1, 'Snapshot timing', $2, $3, 'Timing', '<p>x</p>', 'draft') RETURNING id`,
    [org.id, segmentId, `News <news@${org.domain}>`],
  );
  const snapshotDb = openPostgres(created.url, 2);
  started = performance.now();
  const counts = await takeSnapshot(snapshotDb, drafts[0]!.id);
  const snapshotSeconds = (performance.now() - started) / 1000;
  await snapshotDb.close();
  await db.query('DELETE FROM broadcasts WHERE id = $1', [drafts[0]!.id]);
  console.log(
    `snapshot: ${CONTACTS} contacts in ${snapshotSeconds.toFixed(2)} s (${JSON.stringify(counts)}; seeding took ${seeded.toFixed(1)} s)`,
  );

  const server = await teardown.own(
    () =>
      startServerProcess({
        DATABASE_URL: created.url,
        MAILROOM_TRANSPORT: 'smtp',
        MAILROOM_SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
        MAILROOM_WORKER_CONCURRENCY: String(CONCURRENCY),
        MAILROOM_PUBLIC_URL: 'https://mail.example.com',
        // A CPU profile of the server, for where the time goes: PROFILE_DIR=/tmp/prof.
        ...(process.env.PROFILE_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.PROFILE_DIR}` } : {}),
      }),
    (made) => stopChild(made.child),
  );

  // 2. Plain delivery on this server of as many messages as the broadcast has copies, and Postfix relaying
  // POSTFIX_MESSAGES to the same sink.
  await resetStatements(db);
  let before = sink.count();
  started = performance.now();
  await submitReceipts(server.base, org, MESSAGES, (i) => `r${i}@example.org`);
  await sink.until(before + MESSAGES);
  const plainRate = MESSAGES / ((performance.now() - started) / 1000);
  await printStatements(db, 'plain delivery');
  before = sink.count();
  started = performance.now();
  await feedPostfix(teardown, postfix.port, { sessions: CONCURRENCY, messages: POSTFIX_MESSAGES, size: 1500 });
  await sink.until(before + POSTFIX_MESSAGES);
  const postfixRate = POSTFIX_MESSAGES / ((performance.now() - started) / 1000);

  // 3. The stream alone.
  const stopAt = performance.now() + IDLE_SECONDS * 1000;
  const idleIds = await transactionalStream(server.base, org, 'idle', () => performance.now() >= stopAt);
  const idle = summary(await latencies(db, idleIds));

  // 3b. The stream while the machine is as busy without a broadcast: LOAD plain messages of another
  // organization (its own lane, as a broadcast has), sent as fast as they go. What the stream loses here
  // is the cost of a busy machine, not of a broadcast.
  const other = await teardown.own(
    async () => {
      const made = openPostgres(created.url, 2);
      try {
        const loader = await createTestOrganization(made, config, 'bload');
        await made.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [
          loader.id,
        ]);
        return loader;
      } finally {
        await made.close();
      }
    },
    () => undefined,
  );
  let loadDone = false;
  before = sink.count();
  const loadStarted = performance.now();
  const loading = submitReceipts(server.base, other, LOAD, (i) => `l${i}@example.net`).then(() =>
    sink.until(before + LOAD).then(() => void (loadDone = true)),
  );
  const loadedIds = await transactionalStream(server.base, org, 'load', () => loadDone);
  await loading;
  const loadRate = LOAD / ((performance.now() - loadStarted) / 1000);
  const loaded = summary(await latencies(db, loadedIds));

  // 4. The broadcast, with the same stream running until its last copy is at the sink.
  let broadcastDone = false;
  await resetStatements(db);
  started = performance.now();
  const broadcast = await api(server.base, org.fullKey, 'POST', '/broadcasts', {
    name: 'November news',
    segment_id: segmentId,
    from: `News <news@${org.domain}>`,
    subject: 'What is new in November',
    html: '<p>Hello {{{FIRST_NAME|there}}},</p><p>Here is what changed.</p><p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p>',
    send: true,
  });
  const streaming = transactionalStream(server.base, org, 'busy', () => broadcastDone);
  // Done when the broadcast reads `sent`: every copy has left (a cheap read, once a second, so that the
  // watching costs the database nothing worth counting).
  for (;;) {
    const { rows } = await db.query<{ status: string }>('SELECT status FROM broadcasts WHERE id = $1', [broadcast.id]);
    if (rows[0]!.status === 'sent') break;
    if (rows[0]!.status !== 'queued') throw new Error(`the broadcast is ${rows[0]!.status}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  const broadcastSeconds = (performance.now() - started) / 1000;
  broadcastDone = true;
  const busyIds = await streaming;
  await printStatements(db, 'the broadcast');
  const busy = summary(await latencies(db, busyIds));
  const copyRate = CONTACTS / broadcastSeconds;
  const view = await api(server.base, org.fullKey, 'GET', `/broadcasts/${String(broadcast.id)}`);

  console.log(`${CONTACTS} contacts, worker concurrency ${CONCURRENCY}, smtp-sink on loopback, PostgreSQL`);
  console.log(`plain delivery (delivery-vs-postfix)  ${plainRate.toFixed(0).padStart(6)} delivered/s (${MESSAGES})`);
  console.log(
    `Postfix relay                          ${postfixRate.toFixed(0).padStart(6)} delivered/s (${POSTFIX_MESSAGES})`,
  );
  console.log(
    `broadcast                              ${copyRate.toFixed(0).padStart(6)} copies/s (${broadcastSeconds.toFixed(1)} s; status ${String(view.status)})`,
  );
  console.log(`  ratio to plain delivery: ${(copyRate / plainRate).toFixed(3)} (target ≥ 0.8)`);
  console.log(`  ratio to Postfix:        ${(copyRate / postfixRate).toFixed(3)}`);
  console.log(
    `transactional, idle       p50 ${idle.p50.toFixed(0)} ms  p99 ${idle.p99.toFixed(0)} ms  (${idle.n} sends at ${STREAM_RATE}/s)`,
  );
  console.log(
    `transactional, broadcast  p50 ${busy.p50.toFixed(0)} ms  p99 ${busy.p99.toFixed(0)} ms  (${busy.n} sends at ${STREAM_RATE}/s)`,
  );
  console.log(
    `transactional, plain load p50 ${loaded.p50.toFixed(0)} ms  p99 ${loaded.p99.toFixed(0)} ms  (${loaded.n} sends at ${STREAM_RATE}/s, while ${LOAD} plain messages of another organization went at ${loadRate.toFixed(0)}/s)`,
  );
  console.log(`  p99 ratio (broadcast / idle): ${(busy.p99 / idle.p99).toFixed(2)} (target ≤ 2)`);
  console.log(`  p99 ratio (broadcast / plain load): ${(busy.p99 / loaded.p99).toFixed(2)}`);
  console.log(`snapshot of ${CONTACTS}: ${snapshotSeconds.toFixed(2)} s (target < 10 s)`);
});
