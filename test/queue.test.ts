// The job queue under several workers: each job runs once, a job added without a NOTIFY is still found
// by polling, and a claim whose lease ran out is taken over.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, type Job } from '../src/queue/worker.ts';
import { failedJobDelayMs } from '../src/queue/leases.ts';
import { enqueueJobs } from '../src/queue/jobs.ts';
import { startDelivery } from '../src/delivery/start-delivery.ts';
import { createTransport } from '../src/delivery/transports/index.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, sendBatch } from './helpers/emails.ts';
import { observeWebhookEvents } from './helpers/webhook-events.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { secondConnection } from './helpers/database.ts';
import { waitFor } from './helpers/wait.ts';

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;
const log = { error: () => {}, warn: () => {} };

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_WORKER_CONCURRENCY: '4',
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  org = await createTestOrganization(t.db, t.config, 'queue');
});
after(async () => {
  await t.close();
  await sink.close();
});

test('two workers on their own connections deliver 60 messages, each exactly once', async () => {
  const other = await secondConnection(t.db);
  const transports = [createTransport(t.config, t.db), createTransport(t.config, t.db)];
  const workers = [
    await startDelivery(t.db, t.config, transports[0]!, log),
    await startDelivery(other.db, t.config, transports[1]!, log),
  ];
  try {
    const entries = Array.from({ length: 60 }, (_, i) => message(org, { to: `w${i}@example.com` }));
    const res = await sendBatch(t.app, org.fullKey, entries);
    assert.equal(res.statusCode, 200);
    await waitFor(() => sink.transactions.length >= 60, 20_000);
    // Every job finished (deleted) and both workers stopped (a stop waits for the jobs running): nothing
    // more can be sent, so a double send would be in the count.
    await waitFor(
      async () => (await t.db.query("SELECT 1 FROM jobs WHERE queue = 'deliver-email'")).rowCount === 0,
      10_000,
    );
    for (const worker of workers.splice(0)) await worker.stop();
    const received = sink.transactions.flatMap((tx) => tx.rcptTo);
    assert.equal(received.length, 60);
    assert.equal(new Set(received).size, 60);
  } finally {
    for (const worker of workers) await worker.stop();
    for (const transport of transports) await transport.close();
    await other.close();
  }
});

test('a job added without any NOTIFY is found by polling; the lease of a worker that died is taken over', async () => {
  const ran: number[] = [];
  const handler = async (job: Job) => {
    ran.push(job.attempts);
    return { done: true as const };
  };
  // Written straight to the table (the statement carries no after-commit NOTIFY tag), as a worker that
  // then died left it: claimed once, its lease running out in a second, nobody renewing it.
  await t.db.query(
    `INSERT INTO jobs (queue, payload, attempts, locked_until, lease_id)
     VALUES ('deliver-email', '{"email_id": "none"}', 1, now() + interval '1 second', gen_random_uuid())`,
  );
  const worker = await startWorker(
    t.db,
    { 'deliver-email': handler },
    { concurrency: 1, leaseSeconds: 1, pollIntervalMs: 100, log },
  );
  await waitFor(() => ran.length >= 1, 5000);
  assert.deepEqual(ran, [2]);
  await waitFor(
    async () => (await t.db.query("SELECT 1 FROM jobs WHERE payload->>'email_id' = 'none'")).rowCount === 0,
  );
  await worker.stop();
});

test('a live worker renews the lease of a job that runs longer than it: nobody else takes the job', async () => {
  const ran: number[] = [];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const handler = async (job: Job) => {
    ran.push(job.attempts);
    await released;
    return { done: true as const };
  };
  await t.db.query(`INSERT INTO jobs (queue, payload) VALUES ('deliver-email', '{"email_id": "long"}')`);
  const options = { concurrency: 1, leaseSeconds: 1, pollIntervalMs: 100, log };
  const first = await startWorker(t.db, { 'deliver-email': handler }, options);
  await waitFor(() => ran.length === 1);
  const second = await startWorker(t.db, { 'deliver-email': handler }, options);
  // Three leases' worth: without renewal the second worker would have taken the job twice over. The
  // job's row shows it is still held, by the first claim.
  const { rows } = await t.db.query<{ locked_until: Date; attempts: number }>(
    "SELECT locked_until, attempts FROM jobs WHERE payload->>'email_id' = 'long'",
  );
  const heldUntil = rows[0]!.locked_until;
  await waitFor(async () => {
    const now = await t.db.query<{ locked_until: Date }>(
      "SELECT locked_until FROM jobs WHERE payload->>'email_id' = 'long'",
    );
    return now.rows[0]!.locked_until.getTime() >= heldUntil.getTime() + 2000;
  }, 10_000);
  assert.deepEqual(ran, [1]);
  assert.equal(rows[0]!.attempts, 1);
  release();
  await waitFor(
    async () => (await t.db.query("SELECT 1 FROM jobs WHERE payload->>'email_id' = 'long'")).rowCount === 0,
  );
  await Promise.all([first.stop(), second.stop()]);
  assert.deepEqual(ran, [1]);
});

test('every statement that queues a job wakes the workers of another process once it commits', async () => {
  // The worker polls once a minute: only the NOTIFY sent after each commit can make it run in time.
  // (On PostgreSQL the worker has a connection pool of its own, as another process would; on PGlite,
  // one process's database, it shares the handle and the test shows the NOTIFY path in one process.)
  const other = await secondConnection(t.db);
  const ran: string[] = [];
  const worker = await startWorker(
    other.db,
    {
      'deliver-webhook': async (job) => {
        ran.push(String(job.payload.delivery_id));
        return { done: true };
      },
    },
    { concurrency: 4, leaseSeconds: 30, pollIntervalMs: 60_000, log },
  );
  try {
    await observeWebhookEvents(t.app, org);
    // A change outside any transaction (a topic, its topic.created event) …
    const topic = await t.app.inject({
      method: 'POST',
      url: '/topics',
      headers: bearer(org.fullKey),
      payload: { name: 'Wake-up', default_subscription: 'opt_in' },
    });
    assert.equal(topic.statusCode, 201, topic.body);
    await waitFor(() => ran.length >= 1, 5000);
    // … and one inside a transaction (a send, its email.accepted event).
    const sent = await sendBatch(t.app, org.fullKey, [message(org, { to: 'wake@example.com' })]);
    assert.equal(sent.statusCode, 200);
    await waitFor(() => ran.length >= 2, 5000);
  } finally {
    await worker.stop();
    await other.close();
  }
});

test("organizations take turns: one's backlog of 400 does not hold up another's later job", async () => {
  // A backlog of one organization, all due, and then one job of another: claimed strictly oldest first,
  // the later job would run 401st. Shared out, it runs in the first claim.
  const backlog = Array.from({ length: 400 }, (_, i) => ({
    queue: 'deliver-email' as const,
    payload: { email_id: `burst-${i}` },
    shareKey: 'org-with-a-burst',
    runAt: new Date(Date.now() - 60_000 + i),
  }));
  await enqueueJobs(t.db, backlog);
  await enqueueJobs(t.db, [{ queue: 'deliver-email', payload: { email_id: 'reset' }, shareKey: 'another-org' }]);
  const ran: string[] = [];
  const worker = await startWorker(
    t.db,
    {
      'deliver-email': async (job) => {
        // Jobs queued by the tests before (a message sent to wake the workers) are not counted.
        const id = String(job.payload.email_id);
        if (id === 'reset' || id.startsWith('burst-')) ran.push(id);
        await new Promise((resolve) => setTimeout(resolve, 1));
        return { done: true };
      },
    },
    { concurrency: 8, leaseSeconds: 30, pollIntervalMs: 100, log },
  );
  try {
    await waitFor(() => ran.length >= 401, 20_000);
  } finally {
    await worker.stop();
  }
  assert.ok(ran.indexOf('reset') < 8, `the other organization's job ran ${ran.indexOf('reset') + 1}th`);
  // Within one organization, still oldest first.
  const burst = ran.filter((id) => id !== 'reset').map((id) => Number(id.slice('burst-'.length)));
  assert.deepEqual(burst.slice(0, 8), [0, 1, 2, 3, 4, 5, 6, 7]);
});

test('with more organizations due than a claim takes, each gets its turn in rotation', async () => {
  // 20 organizations with a backlog each, then one more with a single later job; the worker claims 4
  // at a time. Taking the keys whose jobs are oldest, the later one would wait for all 400; in rotation
  // its turn comes within the first round of 21 keys.
  const backlogs = Array.from({ length: 20 }, (_, org) =>
    Array.from({ length: 20 }, (_, i) => ({
      queue: 'deliver-email' as const,
      payload: { email_id: `rot-${org}-${i}` },
      shareKey: `rot-org-${String(org).padStart(2, '0')}`,
      runAt: new Date(Date.now() - 60_000 + i),
    })),
  ).flat();
  await enqueueJobs(t.db, backlogs);
  await enqueueJobs(t.db, [{ queue: 'deliver-email', payload: { email_id: 'rot-late' }, shareKey: 'rot-org-late' }]);
  const ran: string[] = [];
  const worker = await startWorker(
    t.db,
    {
      'deliver-email': async (job) => {
        const id = String(job.payload.email_id);
        if (id.startsWith('rot-')) ran.push(id);
        await new Promise((resolve) => setTimeout(resolve, 1));
        return { done: true };
      },
    },
    { concurrency: 4, leaseSeconds: 30, pollIntervalMs: 100, log },
  );
  try {
    await waitFor(() => ran.length >= 401, 30_000);
  } finally {
    await worker.stop();
  }
  assert.ok(ran.indexOf('rot-late') < 30, `the 21st organization's job ran ${ran.indexOf('rot-late') + 1}th`);
  // And the first round gave every organization one job before any got a second.
  const firstRound = new Set(ran.slice(0, 20).map((id) => id.split('-')[1]));
  assert.ok(firstRound.size >= 19, `${firstRound.size} organizations in the first 20 jobs`);
});

test("a job whose handler failed for the database's outage runs again a second later, however often it was claimed; other failures back off", () => {
  const outages: unknown[] = [
    new Error('timeout exceeded when trying to connect'), // pg-pool: no connection in time
    new Error('Query read timeout'), // an answer lost on the way
    Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
    Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
  ];
  for (const error of outages) {
    for (const attempts of [1, 4, 12]) assert.equal(failedJobDelayMs(error, attempts), 1000, String(error));
  }
  const bug = new TypeError("Cannot read properties of undefined (reading 'id')");
  assert.deepEqual(
    [1, 2, 3, 4, 9, 12].map((attempts) => failedJobDelayMs(bug, attempts)),
    [2000, 4000, 8000, 16_000, 300_000, 300_000],
  );
});
