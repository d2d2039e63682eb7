// Each step of an automation run runs exactly once, whatever crashes. An API process and a
// `serve --role worker` process share a fresh PostgreSQL database; 500 events start 500 runs of one
// automation whose graph has a step of every kind of boundary: a send_email (a job that sends through
// the accept path), a delay (a job due later), a condition and a contact_update (done in the
// transaction that enters them), a wait_for_event that ends by its event or by its timeout (a job).
// The events come at a steady pace, and the worker is killed with SIGKILL twice while the runs are
// between steps, and started again each time. Then "done" is sent for half of the contacts, once each one's run waits for it. In the end every
// run has completed along the path its graph gives for its contact, no step was entered twice, and every
// step's email exists once (emails are tagged with their run), none more.
//
// It runs in the PostgreSQL pass only: it needs several processes on one database, and the test watches
// the runs from outside while the worker runs, to kill it where the runs are spread over their steps.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { openPostgres } from '../src/platform/db/postgres.ts';
import type { Database } from '../src/platform/db/database.ts';
import { databaseForProcesses, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { logTail, startServerProcess, type ServerProcess } from './helpers/server-process.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

const RUNS = 500;
/** The automation's delay: long enough that the first kill lands before any run has left it. */
const DELAY = '6 seconds';
/**
 * The wait's timeout: long enough that "done", sent once the final worker runs and the run waits,
 * is processed well before it, even for the runs that began waiting before the second kill.
 */
const WAIT_TIMEOUT_MS = 20_000;
/** The least time a "done" is processed before its wait's timeout, for the test to know the branch taken. */
const DONE_MARGIN_MS = 2_000;
/** Copies one worker process delivers at once: the most a kill can catch handed to the sink but not recorded. */
const DELIVERY_CONCURRENCY = 8;
const KILLS = 2;
/** The events are sent by this many lanes, each pausing this long after each: about 50 a second. */
const EVENT_LANES = 10;
const EVENT_GAP_MS = 200;

const address = (i: number) => `contact${i}@example.com`;
/** Half the contacts take the condition's met branch (their event says group b), half the other. */
const groupOf = (i: number) => (i % 2 === 0 ? 'b' : 'a');
/** Half of each group are sent "done" while they wait; the others time out. */
const getsDone = (i: number) => Math.floor(i / 2) % 2 === 0;

/** The steps a run enters, in order, for contact `i`: each completed once. */
function expectedSteps(i: number): string[] {
  return [
    'start',
    'send_a',
    'pause',
    'is_b',
    groupOf(i) === 'b' ? 'send_b' : 'mark',
    'wait_done',
    getsDone(i) ? 'send_d' : 'send_c',
  ].map((key) => `${key}:completed`);
}

/** The subjects of the emails contact `i`'s run sends, one each, in order. */
function expectedSubjects(i: number): string[] {
  return ['A', ...(groupOf(i) === 'b' ? ['B'] : []), getsDone(i) ? 'D' : 'C'];
}

if (onPostgres) {
  let sink: SmtpSink;
  let env: Record<string, string>;
  let cleanup: () => Promise<void>;
  let organizationId: string;
  let fullKey: string;
  let sendingKey: string;

  before(async () => {
    sink = await startSmtpSink({ starttls: false });
    ({ env, cleanup } = await databaseForProcesses('automation-crash'));
    Object.assign(env, {
      MAILROOM_TRANSPORT: 'smtp',
      MAILROOM_SMTP_URL: sink.url,
      // A dead worker's jobs (events, steps, deliveries) come back after 5 s.
      MAILROOM_JOB_LEASE_SECONDS: '5',
      MAILROOM_WORKER_CONCURRENCY: String(DELIVERY_CONCURRENCY),
      MAILROOM_SMTP_TIMEOUT_MS: '3000',
    });
    const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
    // No rate limit in the way: a step refused by one waits 30 s before it is tried again.
    const org = await cli('org', 'create', '--name', 'Automation crash', '--rate-limit', '100000');
    organizationId = String(org.id);
    await cli('domain', 'add', '--org', organizationId, 'auto.example');
    await cli('domain', 'verify', '--org', organizationId, 'auto.example', '--trust');
    const key = async (permission: string) =>
      String(
        (await cli('key', 'create', '--org', organizationId, '--name', permission, '--permission', permission)).token,
      );
    fullKey = await key('full_access');
    sendingKey = await key('sending_access');
  });
  after(async () => {
    await sink?.close();
    await cleanup?.();
  });

  test('a worker killed twice while 500 runs are between steps: each run ends on its path, each step once', async () => {
    const api = await startServerProcess(env, ['--role', 'api']);
    let worker: ServerProcess | undefined;
    const watcher: Database = openPostgres(env.DATABASE_URL!, 3);
    const call = async (key: string, method: string, path: string, body?: unknown) => {
      const res = await fetch(`${api.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
    };
    const sendEvent = async (event: string, i: number, payload?: Record<string, unknown>) => {
      const res = await call(sendingKey, 'POST', '/events/send', {
        event,
        email: address(i),
        ...(payload ? { payload } : {}),
      });
      assert.equal(res.status, 202, JSON.stringify(res.body));
    };
    /** Runs `fn` for each of `items`, `lanes` at a time. */
    const inLanes = async <T>(items: T[], lanes: number, fn: (item: T) => Promise<void>) => {
      const queue = [...items];
      await Promise.all(
        Array.from({ length: lanes }, async () => {
          for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
        }),
      );
    };

    try {
      const template = await call(fullKey, 'POST', '/templates', {
        name: 'crash',
        from: 'Team <team@auto.example>',
        subject: 'Hello',
        html: '<p>Hello</p>',
        text: 'Hello',
      });
      assert.equal(template.status, 201, JSON.stringify(template.body));
      const published = await call(fullKey, 'POST', `/templates/${String(template.body.id)}/publish`);
      assert.equal(published.status, 200, JSON.stringify(published.body));
      const send = (key: string, subject: string) => ({
        key,
        type: 'send_email',
        config: { template: { id: template.body.id }, subject },
      });
      const created = await call(fullKey, 'POST', '/automations', {
        name: 'Crash path',
        status: 'enabled',
        steps: [
          { key: 'start', type: 'trigger', config: { event_name: 'user.signed_up' } },
          send('send_a', 'A'),
          { key: 'pause', type: 'delay', config: { duration: DELAY } },
          {
            key: 'is_b',
            type: 'condition',
            config: { type: 'rule', field: 'event.group', operator: 'eq', value: 'b' },
          },
          send('send_b', 'B'),
          { key: 'mark', type: 'contact_update', config: { first_name: 'Not B' } },
          {
            key: 'wait_done',
            type: 'wait_for_event',
            config: { event_name: 'user.done', timeout: `${WAIT_TIMEOUT_MS / 1000} seconds` },
          },
          send('send_c', 'C'),
          send('send_d', 'D'),
        ],
        connections: [
          { from: 'start', to: 'send_a' },
          { from: 'send_a', to: 'pause' },
          { from: 'pause', to: 'is_b' },
          { from: 'is_b', to: 'send_b', type: 'condition_met' },
          { from: 'is_b', to: 'mark', type: 'condition_not_met' },
          { from: 'send_b', to: 'wait_done' },
          { from: 'mark', to: 'wait_done' },
          { from: 'wait_done', to: 'send_d', type: 'event_received' },
          { from: 'wait_done', to: 'send_c', type: 'timeout' },
        ],
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const automationId = String(created.body.id);

      // Where the runs are: each run's last step entered, with its status, counted; and the events not
      // yet processed (runs not yet started).
      const positions = async () => {
        const { rows } = await watcher.query<{ at: string; n: number }>(
          `SELECT s.step_key || ':' || s.status AS at, count(*)::int AS n
             FROM automation_runs r
             JOIN LATERAL (SELECT step_key, status FROM automation_run_steps
                            WHERE run_id = r.id ORDER BY seq DESC LIMIT 1) s ON true
            WHERE r.automation_id = $1
            GROUP BY 1
           UNION ALL
           SELECT 'event unprocessed', count(*)::int FROM received_events
            WHERE organization_id = $2 AND name = 'user.signed_up' AND processed_at IS NULL`,
          [automationId, organizationId],
        );
        return new Map(rows.filter((row) => row.n > 0).map((row) => [row.at, row.n]));
      };
      const entered = async (key: string) => {
        const { rows } = await watcher.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM automation_run_steps WHERE automation_id = $1 AND step_key = $2',
          [automationId, key],
        );
        return rows[0]!.n;
      };
      const describe = (map: Map<string, number>) => [...map].map(([at, n]) => `${at} ${n}`).join(', ');

      // The events come at a steady pace (as an application sends them) while the first two workers run:
      // the engine takes them in many batches, so that each kill finds runs at every stage.
      const started = Date.now();
      const sending = inLanes(
        Array.from({ length: RUNS }, (_, i) => i),
        EVENT_LANES,
        async (i) => {
          await sendEvent('user.signed_up', i, { group: groupOf(i), n: i });
          await sleep(EVENT_GAP_MS);
        },
      );
      sending.catch(() => {}); // awaited below, after the kills

      // Kill 1: once some runs are in the delay, while others have not sent A (or not started).
      // Kill 2: once some runs wait for "done", while others are still in the delay or before it.
      const killWhen = [() => entered('pause'), () => entered('wait_done')];
      const atKills: Array<Map<string, number>> = [];
      for (const reached of killWhen) {
        worker = await startServerProcess(env, ['--role', 'worker']);
        const current = worker;
        const base = await reached();
        await waitFor(async () => (await reached()) >= base + 100 || current.child.exitCode !== null, 60_000, 10);
        assert.equal(current.child.exitCode, null, `the worker stopped by itself:\n${logTail(current, 3000)}`);
        current.child.kill('SIGKILL');
        await current.exited;
        worker = undefined;
        atKills.push(await positions()); // read with the worker dead: where the kill left the runs
      }
      const progress = atKills.map((at, n) => `kill ${n + 1}: ${describe(at)}`).join('\n');
      console.log(progress);
      // Each kill landed with runs on both sides of the boundary it was placed at.
      const count = (at: Map<string, number>, prefixes: string[]) =>
        [...at].filter(([key]) => prefixes.some((prefix) => key.startsWith(prefix))).reduce((n, [, k]) => n + k, 0);
      assert.ok(count(atKills[0]!, ['pause:']) > 0, progress);
      assert.ok(count(atKills[0]!, ['event unprocessed', 'start:', 'send_a:']) > 0, progress);
      assert.ok(count(atKills[1]!, ['wait_done:']) > 0, progress);
      assert.ok(count(atKills[1]!, ['event unprocessed', 'start:', 'send_a:', 'pause:', 'send_b:']) > 0, progress);
      await sending;

      worker = await startServerProcess(env, ['--role', 'worker']);

      // "done" for each chosen contact once its run waits for it (sent earlier, it would resume nothing).
      const owed = new Set(
        Array.from({ length: RUNS }, (_, i) => i)
          .filter(getsDone)
          .map((i) => address(i)),
      );
      const doneDeadline = Date.now() + 110_000;
      while (owed.size > 0) {
        const { rows } = await watcher.query<{ email: string }>(
          `SELECT r.contact_email AS email
             FROM automation_run_steps s JOIN automation_runs r ON r.id = s.run_id
            WHERE s.automation_id = $1 AND s.step_key = 'wait_done' AND s.status = 'waiting'`,
          [automationId],
        );
        const due = rows.filter((row) => owed.has(row.email));
        for (const row of due) owed.delete(row.email);
        await inLanes(due, 20, (row) => sendEvent('user.done', Number(/\d+/.exec(row.email)![0])));
        if (owed.size === 0) break;
        if (Date.now() > doneDeadline) {
          assert.fail(
            `${owed.size} runs never came to wait for "done": ${[...owed].slice(0, 10).join(', ')}…\n` +
              `${describe(await positions())}\n${logTail(worker, 3000)}`,
          );
        }
        await sleep(200);
      }

      // Every run ends; a bounded wait, then the runs still going with their steps.
      const unfinished = async () => {
        const { rows } = await watcher.query<{ email: string; steps: string }>(
          `SELECT r.contact_email AS email,
                  (SELECT string_agg(step_key || ':' || status, ' ' ORDER BY seq) FROM automation_run_steps
                    WHERE run_id = r.id) AS steps
             FROM automation_runs r WHERE r.automation_id = $1 AND r.status = 'running' ORDER BY r.contact_email`,
          [automationId],
        );
        return rows;
      };
      try {
        await waitFor(async () => (await unfinished()).length === 0, 120_000, 250);
      } catch {
        const stuck = await unfinished();
        assert.fail(
          `${stuck.length} runs still running:\n` +
            stuck
              .slice(0, 20)
              .map((row) => `  ${row.email}: ${row.steps}`)
              .join('\n') +
            `\n${logTail(worker, 3000)}`,
        );
      }
      console.log(`every run ended ${Math.round((Date.now() - started) / 1000)} s after the first event`);
      // Ended, each completed: none failed (a step's job spent its attempts) or was cancelled.
      const { rows: notCompleted } = await watcher.query<{ email: string; status: string; steps: string }>(
        `SELECT r.contact_email AS email, r.status,
                (SELECT string_agg(step_key || ':' || status || coalesce(' ' || (error->>'message'), ''), ' ' ORDER BY seq)
                   FROM automation_run_steps WHERE run_id = r.id) AS steps
           FROM automation_runs r WHERE r.automation_id = $1 AND r.status <> 'completed' ORDER BY r.contact_email`,
        [automationId],
      );
      assert.deepEqual(
        notCompleted.slice(0, 10).map((row) => `${row.email} ${row.status}: ${row.steps}`),
        [],
        `${notCompleted.length} runs not completed`,
      );
      // And every email is delivered (copies the workers had in flight may arrive twice: checked below).
      const expectedCopies = new Set(
        Array.from({ length: RUNS }, (_, i) => expectedSubjects(i).map((subject) => `${address(i)} ${subject}`)).flat(),
      );
      const copies = () =>
        sink.transactions.flatMap((tx) => {
          const subject = /^Subject: (.*)$/m.exec(tx.raw.toString('utf8'))?.[1]?.trim() ?? '';
          return tx.rcptTo.map((rcpt) => `${rcpt} ${subject}`);
        });
      await waitFor(() => new Set(copies()).size >= expectedCopies.size, 60_000, 250).catch(() => {
        const missing = [...expectedCopies].filter((copy) => !new Set(copies()).has(copy));
        assert.fail(`${missing.length} emails never delivered: ${missing.slice(0, 10).join(', ')}`);
      });
      // Nothing left to do: no automation job is left, and no job of any kind has failed. A wait resumed by
      // its event keeps its timeout job until the timeout, when the job finds the step done and does
      // nothing: the runs' paths, checked below, are read after those have run too.
      await waitFor(
        async () => {
          const { rows } = await watcher.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM jobs WHERE queue IN ('automation-event', 'automation-step')`,
          );
          return rows[0]!.n === 0;
        },
        WAIT_TIMEOUT_MS + 15_000,
        250,
      ).catch(async () => {
        const { rows } = await watcher.query(
          `SELECT queue, payload, attempts, failed_at, last_error FROM jobs
            WHERE queue IN ('automation-event', 'automation-step') LIMIT 10`,
        );
        assert.fail(`automation jobs left: ${JSON.stringify(rows)}`);
      });
      const failed = await watcher.query('SELECT queue, payload, last_error FROM jobs WHERE failed_at IS NOT NULL');
      assert.deepEqual(failed.rows, [], 'no job failed');

      worker.child.kill('SIGTERM');
      assert.equal(await worker.exited, 0, logTail(worker, 3000));
      worker = undefined;

      // Each "done" was processed well before its wait's timeout, so its run's branch is event_received
      // (a "done" processed after it would rightly be too late, and the test could not say which branch).
      const { rows: late } = await watcher.query<{ email: string; early_ms: number }>(
        `SELECT e.email, (extract(epoch FROM s.wake_at - e.processed_at) * 1000)::int AS early_ms
           FROM received_events e
           JOIN automation_runs r ON r.automation_id = $1 AND lower(r.contact_email) = lower(e.email)
           JOIN automation_run_steps s ON s.run_id = r.id AND s.step_key = 'wait_done'
          WHERE e.organization_id = $2 AND e.name = 'user.done'
            AND (e.processed_at IS NULL OR e.processed_at > s.wake_at - make_interval(secs => $3))`,
        [automationId, organizationId, DONE_MARGIN_MS / 1000],
      );
      assert.deepEqual(late, [], 'a "done" came too close to its timeout: the test cannot tell the branch');

      // Where the time went: the slowest run's steps, each with when it ended after the run started.
      const { rows: slowest } = await watcher.query<{ email: string; seconds: number; steps: string }>(
        `SELECT r.contact_email AS email, extract(epoch FROM r.completed_at - r.started_at)::int AS seconds,
                (SELECT string_agg(step_key || ' ' || extract(epoch FROM s.completed_at - r.started_at)::int || 's', ', '
                                   ORDER BY seq) FROM automation_run_steps s WHERE s.run_id = r.id) AS steps
           FROM automation_runs r WHERE r.automation_id = $1 ORDER BY r.completed_at - r.started_at DESC LIMIT 3`,
        [automationId],
      );
      console.log(`slowest runs:\n${slowest.map((row) => `  ${row.email} ${row.seconds}s: ${row.steps}`).join('\n')}`);

      // One run per contact, each completed, each along its path, no step entered twice.
      const { rows: runs } = await watcher.query<{ id: string; email: string; status: string; steps: string[] }>(
        `SELECT r.id, r.contact_email AS email, r.status,
                array(SELECT step_key || ':' || status FROM automation_run_steps WHERE run_id = r.id ORDER BY seq) AS steps
           FROM automation_runs r WHERE r.automation_id = $1`,
        [automationId],
      );
      assert.equal(runs.length, RUNS, 'one run per event');
      const runOf = new Map(runs.map((run) => [run.email, run]));
      assert.equal(runOf.size, RUNS, 'one run per contact');
      const wrong: string[] = [];
      for (let i = 0; i < RUNS; i++) {
        const run = runOf.get(address(i));
        if (!run) wrong.push(`${address(i)}: no run`);
        else if (run.status !== 'completed' || run.steps.join(' ') !== expectedSteps(i).join(' ')) {
          wrong.push(`${address(i)} (${run.status}): ${run.steps.join(' ')}; expected ${expectedSteps(i).join(' ')}`);
        }
      }
      assert.deepEqual(wrong.slice(0, 20), [], `${wrong.length} runs off their path`);
      const { rows: repeated } = await watcher.query<{ run_id: string; step_key: string; n: number }>(
        `SELECT run_id, step_key, count(*)::int AS n FROM automation_run_steps WHERE automation_id = $1
          GROUP BY run_id, step_key HAVING count(*) > 1`,
        [automationId],
      );
      assert.deepEqual(repeated, [], 'no step entered twice in a run');

      // Each step's email once per run, and no other email: every email of the organization is a step's.
      const { rows: emails } = await watcher.query<{ id: string; run_id: string | null; subject: string }>(
        `SELECT e.id, e.subject,
                (SELECT t->>'value' FROM jsonb_array_elements(coalesce(e.tags, '[]'::jsonb)) t
                  WHERE t->>'name' = 'automation_run_id') AS run_id
           FROM emails e WHERE e.organization_id = $1`,
        [organizationId],
      );
      const subjectsOfRun = new Map<string, string[]>();
      for (const email of emails) {
        const key = email.run_id ?? 'no run';
        subjectsOfRun.set(key, [...(subjectsOfRun.get(key) ?? []), email.subject]);
      }
      const wrongEmails: string[] = [];
      for (let i = 0; i < RUNS; i++) {
        const run = runOf.get(address(i))!;
        const got = (subjectsOfRun.get(run.id) ?? []).sort().join(',');
        const want = [...expectedSubjects(i)].sort().join(',');
        if (got !== want) wrongEmails.push(`${address(i)}: ${got || 'none'}; expected ${want}`);
      }
      assert.deepEqual(wrongEmails.slice(0, 20), [], `${wrongEmails.length} contacts with the wrong emails`);
      assert.equal(emails.length, expectedCopies.size, 'no email besides the steps’ own');
      // Each send step's row names the email its run got.
      const { rows: unmatched } = await watcher.query<{ run_id: string; step_key: string }>(
        `SELECT s.run_id, s.step_key FROM automation_run_steps s
          WHERE s.automation_id = $1 AND s.step_type = 'send_email'
            AND NOT EXISTS (SELECT 1 FROM emails e WHERE e.id::text = s.output->>'email_id'
                              AND e.tags @> jsonb_build_array(jsonb_build_object('name', 'automation_run_id', 'value', s.run_id::text)))`,
        [automationId],
      );
      assert.deepEqual(unmatched, [], 'each send step names its own email');

      // The contact_update ran for the not-met branch only; each event made one contact, no more.
      const { rows: contacts } = await watcher.query<{ email: string; first_name: string | null }>(
        'SELECT email, first_name FROM contacts WHERE organization_id = $1',
        [organizationId],
      );
      assert.equal(contacts.length, RUNS, 'one contact per address');
      const marked = contacts.filter((contact) => contact.first_name === 'Not B').map((contact) => contact.email);
      assert.deepEqual(
        marked.sort(),
        Array.from({ length: RUNS }, (_, i) => i)
          .filter((i) => groupOf(i) === 'a')
          .map(address)
          .sort(),
      );
      const { rows: pending } = await watcher.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM received_events WHERE organization_id = $1 AND processed_at IS NULL',
        [organizationId],
      );
      assert.equal(pending[0]!.n, 0, 'every event processed');

      // What reached the sink: every step's email, to no one else; a copy arrives twice only when a kill
      // caught it handed to the sink but not yet recorded as delivered (email delivery is at least once).
      const received = copies();
      const unexpected = received.filter((copy) => !expectedCopies.has(copy));
      assert.deepEqual(unexpected.slice(0, 10), [], 'nothing delivered that no step sent');
      const extra = received.length - expectedCopies.size;
      console.log(`${received.length} copies delivered for ${expectedCopies.size} emails: ${extra} redelivered`);
      assert.ok(extra <= KILLS * DELIVERY_CONCURRENCY, `${extra} copies delivered twice`);
    } finally {
      worker?.child.kill('SIGKILL');
      api.child.kill('SIGTERM');
      await api.exited;
      await watcher.close();
    }
  });
}
