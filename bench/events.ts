// Events benchmark (issue 40): POST /events/send accepted per second beside POST /emails on the same server
// in the same run, then the time from an event to its run's first message at a steady 500 events a second.
//
//   node bench/events.ts                                                          # embedded PGlite
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/events.ts  # PostgreSQL, fresh databases
//
// Both parts run `mailroom serve` in a child process on a fresh database (a new PostgreSQL database, or a
// PGlite directory of its own), with one organization, a published template and one enabled automation:
// trigger `bench.signup` → send_email → delay 1 minute → send_email.
//
// 1. Acceptance, `--role api` (no worker runs: only acceptance is measured; the events' jobs and the
//    messages' delivery jobs are left queued). autocannon with CONNECTIONS (50) connections sends, round by
//    round, ROUNDS (4) rounds of EVENTS / ROUNDS requests to each route, alternated (the side that goes first
//    changes every round): POST /emails with the accept benchmarks' message (bench/accept-message.ts), and
//    POST /events/send with the event for a contact of its own (the address numbered per request, so each
//    event names a distinct contact). Both sides go through the same per-request hook, so the client does
//    the same work for each. WARMUP (2000) untimed requests to each route first. Each side's rate is its
//    2xx answers over its own time; the ratio events / emails is held to the target (≥ 0.8). The server
//    is then stopped and the database counted: every event accepted must be stored with its job.
// 2. Latency, `--role all` (API and workers in one process, MAILROOM_TRANSPORT=capture), on another fresh
//    database: events sent open loop at RATE (500) a second for SECONDS (20), after WARMUP_SECONDS (2) at
//    the same rate that are not counted: each request leaves at its time whether or not earlier ones were
//    answered. Once the first send step of every counted event's run is done (polled through GET
//    /automations/:id/step-counts), the server is stopped and, for each counted event, the time from its
//    `received_events.received_at` to the `created_at` of the first email of its run (automation_runs by
//    event_id, emails by their automation_run_id tag) is read: p50, p95, p99, max, against the target
//    (p99 ≤ 1 s). Both times are the database's now() of the statement (or transaction) that stored the row.
//
// PROFILE_DIR writes a CPU profile of each server there (--cpu-prof); ONLY=accept or ONLY=latency runs one
// part; CONNECTIONS, EVENTS, ROUNDS, WARMUP, RATE, SECONDS, WARMUP_SECONDS can be set.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { Pool } from 'undici';
import { loadConfig } from '../src/platform/config.ts';
import type { Database } from '../src/platform/db/database.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { openPGliteDirectory } from '../src/platform/db/pglite.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { createTestOrganization, type TestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { logTail, startServerProcess, type ServerProcess } from '../test/helpers/server-process.ts';
import { acceptMessage } from './accept-message.ts';
import { stopChild } from './postfix.ts';
import { type Teardown, withTeardown } from './teardown.ts';

const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const EVENTS = Number(process.env.EVENTS ?? 100_000);
const ROUNDS = Number(process.env.ROUNDS ?? 4);
const WARMUP = Number(process.env.WARMUP ?? 2000);
const RATE = Number(process.env.RATE ?? 500);
const SECONDS = Number(process.env.SECONDS ?? 20);
const WARMUP_SECONDS = Number(process.env.WARMUP_SECONDS ?? 2);
const ONLY = process.env.ONLY;
const TARGET_RATIO = 0.8;
const TARGET_P99_MS = 1000;
const EVENT_NAME = 'bench.signup';
/** Part 2 fails when no further first message is queued for this long. */
const STALL_MS = 60_000;
const onPostgres = Boolean(process.env.DATABASE_URL);

const now = () => performance.timeOrigin + performance.now();
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * p) - 1)]!;
const ms = (value: number) => `${value.toFixed(0)} ms`;

/** The server of the part running: its log is shown when the part fails. */
let current: ServerProcess | undefined;

interface Setup {
  server: ServerProcess;
  org: TestOrganization;
  automationId: string;
  /** Opens the database here; only once the server has stopped (PGlite: one process at a time). */
  open(): Promise<Database>;
}

/** A fresh database of the kind in use, migrated, with one organization: `mailroom serve --role ROLE` on it. */
async function start(teardown: Teardown, label: string, role: 'api' | 'all'): Promise<Setup> {
  // The data directory: PGlite's database, and the capture transport's files on either kind.
  const dir = await teardown.own(
    () => mkdtemp(path.join(tmpdir(), `mailroom-events-${label}-`)),
    (made) => rm(made, { recursive: true, force: true }),
  );
  let env: Record<string, string> = { MAILROOM_DATA_DIR: dir };
  let open = () => openPGliteDirectory(dir);
  if (onPostgres) {
    const created = await teardown.own(createPostgresDatabase, (made) => made.drop());
    env = { ...env, DATABASE_URL: created.url };
    open = async () => openPostgres(created.url, 2);
  }
  const db = await open();
  let org: TestOrganization;
  try {
    await migrate(db);
    org = await createTestOrganization(db, loadConfig({ ...env, MAILROOM_LOG_LEVEL: 'silent' }), 'events');
    await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [org.id]);
  } finally {
    await db.close();
  }
  const profile = process.env.PROFILE_DIR ? `--cpu-prof --cpu-prof-dir=${process.env.PROFILE_DIR}` : '';
  const server = await teardown.own(
    () =>
      startServerProcess(
        {
          ...env,
          MAILROOM_TRANSPORT: 'capture',
          ...(profile ? { NODE_OPTIONS: profile } : {}),
        },
        ['--role', role],
      ),
    (made) => stopChild(made.child),
  );
  current = server;
  const automationId = await createAutomation(server, org);
  return { server, org, automationId, open };
}

async function call(server: ServerProcess, token: string, method: string, url: string, body?: unknown) {
  const res = await fetch(`${server.base}${url}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url} answered ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** A published template and the two-step automation the events start: send, delay 1 minute, send. */
async function createAutomation(server: ServerProcess, org: TestOrganization): Promise<string> {
  const template = await call(server, org.fullKey, 'POST', '/templates', {
    name: 'welcome',
    from: `Shop <shop@${org.domain}>`,
    subject: 'Welcome, {{{NAME}}}',
    html: '<p>Hi {{{NAME}}}, thanks for signing up to the {{{PLAN}}} plan.</p>',
    variables: [
      { key: 'NAME', type: 'string', fallback_value: 'there' },
      { key: 'PLAN', type: 'string', fallback_value: 'free' },
    ],
  });
  await call(server, org.fullKey, 'POST', `/templates/${String(template.id)}/publish`);
  const send = (key: string) => ({
    key,
    type: 'send_email',
    config: { template: { id: template.id, variables: { PLAN: { var: 'event.plan' } } } },
  });
  const automation = await call(server, org.fullKey, 'POST', '/automations', {
    name: 'Welcome series',
    status: 'enabled',
    steps: [
      { key: 'start', type: 'trigger', config: { event_name: EVENT_NAME } },
      send('welcome'),
      { key: 'pause', type: 'delay', config: { duration: '1 minute' } },
      send('follow_up'),
    ],
    connections: [
      { from: 'start', to: 'welcome' },
      { from: 'welcome', to: 'pause' },
      { from: 'pause', to: 'follow_up' },
    ],
  });
  return String(automation.id);
}

let contactNumber = 0;
/** The body of the next event: a new contact's address every time. */
const nextEvent = (prefix: string) =>
  JSON.stringify({ event: EVENT_NAME, email: `${prefix}${contactNumber++}@example.com`, payload: { plan: 'pro' } });

interface Side {
  name: string;
  path: string;
  body: () => string;
}

interface Measured {
  ok: number;
  seconds: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/**
 * `amount` requests to one route from CONNECTIONS clients, each body made by the same per-request hook.
 * Timed from the start to the last answer: autocannon itself notices the end only at its next sample
 * tick (`sampleInt`, made short here), so its own duration is rounded up.
 */
async function drive(setup: Setup, side: Side, amount: number): Promise<Measured> {
  const started = now();
  let lastAnswer = started;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: setup.server.base,
        connections: CONNECTIONS,
        amount,
        sampleInt: 20,
        headers: { authorization: `Bearer ${setup.org.sendingKey}`, 'content-type': 'application/json' },
        requests: [{ method: 'POST', path: side.path, setupRequest: (request) => ({ ...request, body: side.body() }) }],
      },
      (error, done) => (error ? reject(error) : resolve(done)),
    );
    instance.on('response', () => (lastAnswer = now()));
  });
  return {
    ok: result['2xx'],
    seconds: (lastAnswer - started) / 1000,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function durability(): Promise<string> {
  if (!onPostgres) return 'PGlite (embedded, on disk)';
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  const show = async (name: string) => (await client.query(`SHOW ${name}`)).rows[0][name] as string;
  const line = `PostgreSQL synchronous_commit=${await show('synchronous_commit')} fsync=${await show('fsync')}`;
  await client.end();
  return line;
}

async function acceptance(teardown: Teardown, database: string) {
  const setup = await start(teardown, 'accept', 'api');
  const from = `Shop <shop@${setup.org.domain}>`;
  const emailBody = acceptMessage(from);
  const emails: Side = { name: 'POST /emails', path: '/emails', body: () => emailBody };
  const events: Side = { name: 'POST /events/send', path: '/events/send', body: () => nextEvent('a') };
  const perRound = Math.ceil(EVENTS / ROUNDS);

  await drive(setup, emails, WARMUP);
  await drive(setup, events, WARMUP);
  console.log(
    `${database}; server --role api (no workers: acceptance only); ${CONNECTIONS} connections; ` +
      `${ROUNDS} rounds of ${perRound} requests to each route, alternated (after ${WARMUP} untimed each)`,
  );
  const totals = new Map<Side, Measured[]>([
    [emails, []],
    [events, []],
  ]);
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 === 1 ? [emails, events] : [events, emails];
    for (const side of order) totals.get(side)!.push(await drive(setup, side, perRound));
    const [e, v] = [totals.get(emails)!.at(-1)!, totals.get(events)!.at(-1)!];
    console.log(
      `  round ${round} (${order[0]!.name} first): emails ${(e.ok / e.seconds).toFixed(0)}/s (p99 ${e.p99} ms)   ` +
        `events ${(v.ok / v.seconds).toFixed(0)}/s (p99 ${v.p99} ms)   ratio ${(v.ok / v.seconds / (e.ok / e.seconds)).toFixed(3)}`,
    );
  }
  const rates = new Map<Side, number>();
  for (const side of [emails, events]) {
    const runs = totals.get(side)!;
    const ok = runs.reduce((sum, r) => sum + r.ok, 0);
    const seconds = runs.reduce((sum, r) => sum + r.seconds, 0);
    rates.set(side, ok / seconds);
    console.log(
      `${side.name.padEnd(18)} ${(ok / seconds).toFixed(0).padStart(6)} accepted/s   (${ok} in ${seconds.toFixed(2)} s; ` +
        `p50 ${Math.max(...runs.map((r) => r.p50))} ms, p99 ${Math.max(...runs.map((r) => r.p99))} ms, worst round; ` +
        `non-2xx ${runs.reduce((sum, r) => sum + r.non2xx, 0)}, errors ${runs.reduce((sum, r) => sum + r.errors, 0)})`,
    );
  }
  const ratio = rates.get(events)! / rates.get(emails)!;
  console.log(`ratio (events / emails): ${ratio.toFixed(3)}   (target ≥ ${TARGET_RATIO})`);

  await stopChild(setup.server.child);
  const db = await setup.open();
  try {
    const { rows } = await db.query<{ events: number; jobs: number }>(
      `SELECT (SELECT count(*)::int FROM received_events) AS events,
              (SELECT count(*)::int FROM jobs WHERE queue = 'automation-event') AS jobs`,
    );
    const accepted = WARMUP + totals.get(events)!.reduce((sum, r) => sum + r.ok, 0);
    console.log(
      `  stored: ${rows[0]!.events} events with ${rows[0]!.jobs} automation-event jobs (${accepted} accepted)`,
    );
    if (rows[0]!.events !== accepted || rows[0]!.jobs !== accepted) throw new Error('an accepted event is missing');
  } finally {
    await db.close();
  }
}

/** First-step counts of the automation, through the API. */
async function firstStep(setup: Setup) {
  const counts = await call(setup.server, setup.org.fullKey, 'GET', `/automations/${setup.automationId}/step-counts`);
  const welcome = (counts.data as Array<Record<string, number | string>>).find((step) => step.key === 'welcome')!;
  return {
    entered: Number(welcome.entered),
    done: Number(welcome.completed) + Number(welcome.failed) + Number(welcome.skipped),
  };
}

async function latency(teardown: Teardown, database: string) {
  const setup = await start(teardown, 'latency', 'all');
  const pool = new Pool(setup.server.base, { connections: 256 });
  const total = Math.round(RATE * (WARMUP_SECONDS + SECONDS));
  const warmup = Math.round(RATE * WARMUP_SECONDS);
  const counted: string[] = [];
  /** When each counted event's request was due to leave (wall clock, ms), by event id. */
  const dueAt = new Map<string, number>();
  const answers: number[] = [];
  let refused = 0;
  let lastRefusal = '';
  let inFlight = 0;
  let maxInFlight = 0;

  const sendOne = async (i: number, due: number) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      const res = await pool.request({
        method: 'POST',
        path: '/events/send',
        headers: { authorization: `Bearer ${setup.org.sendingKey}`, 'content-type': 'application/json' },
        body: nextEvent('l'),
      });
      const text = await res.body.text();
      if (res.statusCode !== 202) {
        refused++;
        lastRefusal = `${res.statusCode} ${text}`;
        return;
      }
      if (i >= warmup) {
        const { id } = JSON.parse(text) as { id: string };
        counted.push(id);
        dueAt.set(id, due);
        answers.push(now() - due);
      }
    } catch (error) {
      refused++;
      lastRefusal = String(error);
    } finally {
      inFlight--;
    }
  };

  // Open loop: every few milliseconds, the requests whose time has come leave, answered or not.
  const sending: Promise<void>[] = [];
  const begin = now();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((now() - begin) / 1000) * RATE) + 1);
    while (sent < due) {
      sending.push(sendOne(sent, begin + (sent * 1000) / RATE));
      sent++;
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const sendSeconds = (now() - begin) / 1000;
  await Promise.all(sending);
  const lastAnswered = now();
  await pool.close();
  if (refused > 0) throw new Error(`${refused} events not accepted; the last: ${lastRefusal}`);

  // Until every run's first step is done (or nothing moves for a minute).
  let progress = { done: 0, at: now() };
  for (;;) {
    const { done } = await firstStep(setup);
    if (done >= total) break;
    if (done > progress.done) progress = { done, at: now() };
    if (now() - progress.at > STALL_MS) {
      throw new Error(`${done} of ${total} first steps done, none in the last ${STALL_MS / 1000} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  const drained = (now() - lastAnswered) / 1000;
  await stopChild(setup.server.child);

  const db = await setup.open();
  let delays: number[];
  let fromRequest: number[];
  let started: number[];
  try {
    const { rows } = await db.query<{ id: string; ms: number; queued: number; started_ms: number }>(
      `WITH counted AS (SELECT unnest($1::uuid[]) AS id),
            firsts AS (
              SELECT (t.tag ->> 'value')::uuid AS run_id, min(e.created_at) AS queued_at
                FROM emails e CROSS JOIN LATERAL jsonb_array_elements(e.tags) AS t(tag)
               WHERE e.organization_id = $2 AND t.tag ->> 'name' = 'automation_run_id'
               GROUP BY 1)
       SELECT c.id, extract(epoch FROM f.queued_at - ev.received_at)::float8 * 1000 AS ms,
              extract(epoch FROM f.queued_at)::float8 * 1000 AS queued,
              extract(epoch FROM ev.processed_at - ev.received_at)::float8 * 1000 AS started_ms
         FROM counted c
         JOIN received_events ev ON ev.id = c.id
         JOIN automation_runs r ON r.event_id = ev.id
         JOIN firsts f ON f.run_id = r.id`,
      [counted, setup.org.id],
    );
    delays = rows.map((row) => Number(row.ms)).sort((a, b) => a - b);
    fromRequest = rows.map((row) => Number(row.queued) - dueAt.get(row.id)!).sort((a, b) => a - b);
    started = rows.map((row) => Number(row.started_ms)).sort((a, b) => a - b);
  } finally {
    await db.close();
  }
  answers.sort((a, b) => a - b);

  console.log(
    `\n${database}; server --role all (API and workers, capture transport); automation: send → delay 1 minute → send`,
  );
  console.log(
    `${counted.length} events counted, sent open loop at ${RATE}/s for ${SECONDS} s after ${WARMUP_SECONDS} s not counted ` +
      `(sent at ${(total / sendSeconds).toFixed(0)}/s, all answered in ${((lastAnswered - begin) / 1000).toFixed(1)} s; answers p50 ${ms(pct(answers, 0.5))}, p99 ${ms(pct(answers, 0.99))}; ` +
      `at most ${maxInFlight} in flight; every first message queued ${drained.toFixed(2)} s after the last answer)`,
  );
  if (delays.length !== counted.length) {
    throw new Error(`${delays.length} of ${counted.length} counted events have a first message`);
  }
  console.log(
    `event stored → first message     p50 ${ms(pct(delays, 0.5))}   p95 ${ms(pct(delays, 0.95))}   ` +
      `p99 ${ms(pct(delays, 0.99))}   max ${ms(delays.at(-1)!)}`,
  );
  console.log(
    `request due → first message      p50 ${ms(pct(fromRequest, 0.5))}   p95 ${ms(pct(fromRequest, 0.95))}   ` +
      `p99 ${ms(pct(fromRequest, 0.99))}   max ${ms(fromRequest.at(-1)!)}   (the wait for the event's acceptance included)`,
  );
  console.log(
    `of which event stored → its run started (the event's job done): p50 ${ms(pct(started, 0.5))}   ` +
      `p99 ${ms(pct(started, 0.99))}`,
  );
  console.log(`p99 ${ms(pct(delays, 0.99))} (target ≤ ${ms(TARGET_P99_MS)} at ${RATE} events/s)`);
}

await withTeardown(async (teardown) => {
  const database = await durability();
  try {
    if (ONLY !== 'latency') await acceptance(teardown, database);
    if (ONLY !== 'accept') await latency(teardown, database);
  } catch (error) {
    if (current) console.error(`the server's log (without its info lines):\n${logTail(current, 3000)}`);
    throw error;
  }
});
