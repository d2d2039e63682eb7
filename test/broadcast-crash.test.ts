// A broadcast survives its process being killed: a real server fans a broadcast to 20,000 contacts out
// and delivers the copies to a loopback SMTP sink, and is killed with SIGKILL several times, during the
// fan-out and during delivery, and started again. In the end every contact has received its copy, and
// exactly one, except for copies the sink had already accepted when the process died before recording
// the delivery: those are sent again after the restart (at least once, as for any email), and the test
// counts them and bounds them by what can be in flight at once.
//
// It runs in the PostgreSQL pass only: what it tests is where the transactions of the fan-out and of
// delivery end when a process dies, the same SQL on both databases, and only on PostgreSQL can the test
// watch the fan-out from outside while the server runs, to kill it mid-way (the embedded database has one
// user at a time; there the fan-out's 40 batches are done before the sink has seen its first copies).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../src/platform/config.ts';
import { openDatabase } from '../src/platform/db/open.ts';
import type { Database } from '../src/platform/db/database.ts';
import { sendBroadcast } from '../src/broadcasts/send-broadcast.ts';
import { databaseForProcesses, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startServerProcess, type ServerProcess } from './helpers/server-process.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

const CONTACTS = 20_000;
/** Copies one process hands to the sink at once: the most a kill can catch accepted but not recorded. */
const CONCURRENCY = 20;
/**
 * Where each kill lands: twice during the fan-out (once it has made copies since the start, with
 * recipients still pending), then twice during delivery (when the sink has received this many copies).
 */
const KILL_AT: Array<'fan-out' | number> = ['fan-out', 'fan-out', 10_000, 15_000];

let sink: SmtpSink;
let env: Record<string, string>;
let cleanup: () => Promise<void>;
let organizationId: string;

before(async () => {
  if (!onPostgres) return;
  sink = await startSmtpSink({ starttls: false });
  ({ env, cleanup } = await databaseForProcesses('broadcast-crash'));
  Object.assign(env, {
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    // A dead process's jobs (the fan-out's and the deliveries') come back after 5 s.
    MAILROOM_JOB_LEASE_SECONDS: '5',
    MAILROOM_WORKER_CONCURRENCY: String(CONCURRENCY),
    MAILROOM_SMTP_TIMEOUT_MS: '3000',
  });
  const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
  const org = await cli('org', 'create', '--name', 'Broadcast crash');
  organizationId = String(org.id);
  await cli('domain', 'add', '--org', organizationId, 'news.example');
  await cli('domain', 'verify', '--org', organizationId, 'news.example', '--trust');
});
after(async () => {
  if (!onPostgres) return;
  await sink.close();
  await cleanup();
});

/**
 * The database the server uses, opened by this process while no server runs (the embedded database has
 * one user at a time).
 */
async function withDatabase<T>(fn: (db: Database) => Promise<T>): Promise<T> {
  const db = await openDatabase(loadConfig({ MAILROOM_LOG_LEVEL: 'silent', ...env }));
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

test('killed with SIGKILL during fan-out and delivery, a broadcast still reaches every contact once', async () => {
  if (!onPostgres) return; // watched from outside while it runs: the PostgreSQL pass runs this (above)
  const broadcastId = await withDatabase(async (db) => {
    const { rows } = await db.query<{ id: string }>(
      `INSERT INTO segments (organization_id, name) VALUES ($1, 'Everyone') RETURNING id`,
      [organizationId],
    );
    const segmentId = rows[0]!.id;
    await db.query(
      `WITH made AS (
         INSERT INTO contacts (organization_id, email, first_name)
         SELECT $1, 'reader' || i || '@example.com', 'Reader ' || i FROM generate_series(1, $2::int) AS i
         RETURNING id)
       INSERT INTO contact_segments (contact_id, segment_id) SELECT id, $3 FROM made`,
      [organizationId, CONTACTS, segmentId],
    );
    const { rows: made } = await db.query<{ id: string }>(
      `INSERT INTO broadcasts (organization_id, name, segment_id, "from", subject, html, text)
       VALUES ($1, 'Crash news', $2, 'News <news@news.example>', 'News', '<p>Hello</p>', 'Hello') RETURNING id`,
      [organizationId, segmentId],
    );
    await sendBroadcast(db, organizationId, made[0]!.id, undefined);
    return made[0]!.id;
  });

  const seen = () => sink.transactions.length;
  const progress: string[] = [];
  let server: ServerProcess | undefined;
  try {
    const watcher = await openDatabase(loadConfig({ MAILROOM_LOG_LEVEL: 'silent', ...env }));
    const fanOutState = async () => {
      const { rows } = await watcher.query<{ copies: number; pending: number }>(
        `SELECT (SELECT count(*)::int FROM emails WHERE broadcast_id = $1) AS copies,
                (SELECT count(*)::int FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'pending') AS pending`,
        [broadcastId],
      );
      return rows[0]!;
    };
    for (const at of KILL_AT) {
      const copiesBefore = (await fanOutState()).copies;
      server = await startServerProcess(env);
      if (at === 'fan-out') {
        // A batch (500) made by this process, and more to make.
        await waitFor(
          async () => {
            const state = await fanOutState();
            return state.copies >= copiesBefore + 500 && state.pending > 0;
          },
          90_000,
          10,
        );
      } else {
        await waitFor(() => seen() >= at, 90_000, 20);
      }
      server.child.kill('SIGKILL');
      await server.exited;
      server = undefined;
      // Where the kill landed, read with the process dead.
      const state = await withDatabase(async (db) => {
        const { rows } = await db.query<{ pending: number; copies: number; undelivered: number }>(
          `SELECT (SELECT count(*)::int FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'pending') AS pending,
                  (SELECT count(*)::int FROM emails WHERE broadcast_id = $1) AS copies,
                  (SELECT count(*)::int FROM email_recipients r JOIN emails e ON e.id = r.email_id
                    WHERE e.broadcast_id = $1 AND r.status = 'pending') AS undelivered`,
          [broadcastId],
        );
        return rows[0]!;
      });
      progress.push(
        `kill at ${seen()} received: ${state.copies} copies made, ${state.pending} recipients pending, ` +
          `${state.undelivered} copies undelivered`,
      );
    }
    await watcher.close();
    console.log(progress.join('\n'));
    server = await startServerProcess(env);
    const unique = () => new Set(sink.transactions.flatMap((tx) => tx.rcptTo)).size;
    await waitFor(() => unique() >= CONTACTS, 150_000, 100);
    // The broadcast reads sent once its fan-out job next looks and finds every copy gone (it looks every
    // 2 s while copies are on their way): wait for that, then stop cleanly.
    const watcherAtEnd = await openDatabase(loadConfig({ MAILROOM_LOG_LEVEL: 'silent', ...env }));
    try {
      await waitFor(
        async () => {
          const { rows } = await watcherAtEnd.query<{ status: string }>('SELECT status FROM broadcasts WHERE id = $1', [
            broadcastId,
          ]);
          return rows[0]!.status === 'sent';
        },
        90_000,
        100,
      );
    } finally {
      await watcherAtEnd.close();
    }
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0);
    server = undefined;
  } finally {
    server?.child.kill('SIGKILL');
  }

  // The kills landed where they were meant to: the first two during the fan-out (recipients still
  // pending), and every one with copies made but not yet delivered.
  for (const line of progress.slice(0, 2)) assert.match(line, / [1-9][0-9]* recipients pending/, line);
  assert.ok(
    progress.every((line) => !/ 0 copies undelivered/.test(line)),
    progress.join('\n'),
  );

  const received = sink.transactions.flatMap((tx) => tx.rcptTo);
  const expected = Array.from({ length: CONTACTS }, (_, i) => `reader${i + 1}@example.com`);
  const counts = new Map<string, number>();
  for (const address of received) counts.set(address, (counts.get(address) ?? 0) + 1);
  assert.deepEqual(
    expected.filter((address) => !counts.has(address)),
    [],
    'no contact is missing',
  );
  assert.equal(counts.size, CONTACTS, 'nothing was sent to anyone outside the audience');
  const duplicates = [...counts].filter(([, n]) => n > 1);
  const extra = received.length - CONTACTS;
  console.log(
    `${extra} duplicate copies after ${KILL_AT.length} kills: ${duplicates.map(([a, n]) => `${a}×${n}`).join(', ')}`,
  );
  assert.ok(
    extra <= KILL_AT.length * CONCURRENCY,
    `${extra} duplicates; at most ${KILL_AT.length} kills × ${CONCURRENCY} copies in flight expected`,
  );

  // And Mailroom's own record: one copy per contact, each delivered, the broadcast sent.
  await withDatabase(async (db) => {
    const { rows } = await db.query<{ status: string; copies: number; queued: number; delivered: number }>(
      `SELECT (SELECT status FROM broadcasts WHERE id = $1) AS status,
              (SELECT count(DISTINCT "to")::int FROM emails WHERE broadcast_id = $1) AS copies,
              (SELECT count(*)::int FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'queued') AS queued,
              (SELECT count(*)::int FROM email_recipients r JOIN emails e ON e.id = r.email_id
                WHERE e.broadcast_id = $1 AND r.status = 'delivered') AS delivered`,
      [broadcastId],
    );
    assert.deepEqual(rows[0], { status: 'sent', copies: CONTACTS, queued: CONTACTS, delivered: CONTACTS });
    const { rows: total } = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM emails WHERE broadcast_id = $1',
      [broadcastId],
    );
    assert.equal(total[0]!.n, CONTACTS, 'exactly one email per contact');
  });
});
