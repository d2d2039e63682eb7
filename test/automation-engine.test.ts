// The automation engine (src/automations): events start and resume runs, each step runs once, delays and
// waits are jobs due at their time by the engine's clock (a test clock here: 30 days pass in a moment),
// and every send_email step goes through the accept path. Automations and events are written the way
// their API writes them; the API itself is tested in test/automations.test.ts and test/events.test.ts.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { waitFor } from './helpers/wait.ts';
import { startAutomations } from '../src/automations/start-automations.ts';
import { processEvents } from '../src/automations/process-event.ts';
import { enqueueJob } from '../src/queue/jobs.ts';
import type { Worker } from '../src/queue/worker.ts';
import type { AutomationConnection, AutomationStep } from '../src/automations/automation-model.ts';

let t: TestApp;
let org: TestOrganization;
let worker: Worker;
/** What the engine's worker logged as warnings and errors (a failed job attempt is one). */
const logged: unknown[] = [];
const log = { error: (...args: unknown[]) => logged.push(args), warn: (...args: unknown[]) => logged.push(args) };
let templateId: string;
/** The engine's clock: the real time moved on by what the tests have advanced it. */
let offset = 0;
const clock = () => new Date(Date.now() + offset);
const DAY = 86_400_000;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'engine');
  const created = await t.app.inject({
    method: 'POST',
    url: '/templates',
    headers: bearer(org.fullKey),
    payload: {
      name: 'welcome',
      from: `Team <team@${org.domain}>`,
      subject: 'Hello {{{NAME}}}',
      html: '<p>Hi {{{NAME}}}, plan {{{PLAN}}}</p>',
      variables: [
        { key: 'NAME', type: 'string', fallback_value: 'there' },
        { key: 'PLAN', type: 'string', fallback_value: 'free' },
      ],
    },
  });
  assert.equal(created.statusCode, 201, created.body);
  templateId = created.json().id;
  const published = await t.app.inject({
    method: 'POST',
    url: `/templates/${templateId}/publish`,
    headers: bearer(org.fullKey),
  });
  assert.equal(published.statusCode, 200, published.body);
  worker = await startAutomations(t.db, t.config, log, { clock });
});
after(async () => {
  await worker.stop();
  await t.close();
});

/** Moves the engine's clock on, and has the worker look for the jobs now due. */
function advance(ms: number) {
  offset += ms;
  worker.poke();
}

const send = (key: string, extra: Record<string, unknown> = {}): AutomationStep => ({
  key,
  type: 'send_email',
  config: {
    template: { id: templateId, variables: { NAME: { var: 'contact.first_name' }, PLAN: { var: 'event.plan' } } },
    ...extra,
  },
});
const edge = (from: string, to: string, type: AutomationConnection['type'] = 'default'): AutomationConnection => ({
  from,
  to,
  type,
});

let automationCount = 0;
/** An enabled automation with this graph, stored as the API stores it (version 1). */
async function automation(
  steps: AutomationStep[],
  connections: AutomationConnection[],
  triggeredBy?: string,
): Promise<{ id: string; event: string }> {
  automationCount += 1;
  const event = triggeredBy ?? `test.event.${automationCount}`;
  const graph = steps.map((step) => (step.type === 'trigger' ? { ...step, config: { event_name: event } } : step));
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO automations (organization_id, name, status, version, trigger_event)
     VALUES ($1, $2, 'enabled', 1, $3) RETURNING id`,
    [org.id, `automation ${automationCount}`, event],
  );
  await t.db.query(
    'INSERT INTO automation_versions (automation_id, version, steps, connections) VALUES ($1, 1, $2::jsonb, $3::jsonb)',
    [rows[0]!.id, JSON.stringify(graph), JSON.stringify(connections)],
  );
  return { id: rows[0]!.id, event };
}

/** An event for a contact by address, queued as POST /events/send queues it. */
async function sendEvent(name: string, email: string, payload: Record<string, unknown> = {}): Promise<string> {
  return t.db.transaction(async (tx) => {
    const { rows } = await tx.query<{ id: string }>(
      'INSERT INTO received_events (organization_id, name, email, payload) VALUES ($1, $2, $3, $4::jsonb) RETURNING id',
      [org.id, name, email, JSON.stringify(payload)],
    );
    await enqueueJob(tx, { queue: 'automation-event', payload: { event_id: rows[0]!.id }, shareKey: org.id });
    return rows[0]!.id;
  });
}

async function runsOf(automationId: string) {
  const { rows } = await t.db.query<{ id: string; status: string; contact_id: string; contact_email: string }>(
    'SELECT id, status, contact_id, contact_email FROM automation_runs WHERE automation_id = $1 ORDER BY contact_email',
    [automationId],
  );
  return rows;
}

async function stepsOf(runId: string) {
  const { rows } = await t.db.query<{ step_key: string; status: string; output: Record<string, unknown> | null }>(
    'SELECT step_key, status, output FROM automation_run_steps WHERE run_id = $1 ORDER BY seq',
    [runId],
  );
  return rows.map((row) => `${row.step_key}:${row.status}`);
}

async function emailsOfRun(runId: string) {
  const { rows } = await t.db.query<{ id: string; subject: string }>(
    `SELECT id, subject FROM emails WHERE organization_id = $1 AND tags @> $2::jsonb ORDER BY created_at`,
    [org.id, JSON.stringify([{ name: 'automation_run_id', value: runId }])],
  );
  return rows;
}

async function oneRun(automationId: string, status?: string) {
  await waitFor(async () => {
    const runs = await runsOf(automationId);
    return runs.length === 1 && (status === undefined || runs[0]!.status === status);
  });
  return (await runsOf(automationId))[0]!;
}

test('a welcome series: the first message at once, the second 30 days later by the clock, each once', async () => {
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      send('welcome'),
      { key: 'wait', type: 'delay', config: { duration: '30 days' } },
      send('follow_up', { subject: 'A month in' }),
    ],
    [edge('start', 'welcome'), edge('welcome', 'wait'), edge('wait', 'follow_up')],
  );
  await sendEvent(event, 'new.person@example.com', { plan: 'pro' });
  const run = await oneRun(id);
  await waitFor(async () => (await stepsOf(run.id)).includes('wait:waiting'));
  assert.deepEqual(await stepsOf(run.id), ['start:completed', 'welcome:completed', 'wait:waiting']);
  // The contact did not exist: the event made it.
  const contact = await t.db.query('SELECT id FROM contacts WHERE organization_id = $1 AND email = $2', [
    org.id,
    'new.person@example.com',
  ]);
  assert.equal(contact.rows.length, 1);
  const first = await emailsOfRun(run.id);
  assert.equal(first.length, 1);
  assert.equal(first[0]!.subject, 'Hello there');

  advance(29 * DAY);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(await stepsOf(run.id), ['start:completed', 'welcome:completed', 'wait:waiting']);

  advance(DAY + 1000);
  await oneRun(id, 'completed');
  assert.deepEqual(await stepsOf(run.id), [
    'start:completed',
    'welcome:completed',
    'wait:completed',
    'follow_up:completed',
  ]);
  const both = await emailsOfRun(run.id);
  assert.deepEqual(
    both.map((email) => email.subject),
    ['Hello there', 'A month in'],
  );
});

test('a wait resumes on its event for that contact (filter met), or takes its timeout branch', async () => {
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      {
        key: 'paid',
        type: 'wait_for_event',
        config: {
          event_name: 'invoice.paid',
          timeout: '3 days',
          filter_rule: { type: 'rule', field: 'event.amount', operator: 'gt', value: 0 },
        },
      },
      send('thanks', { subject: 'Thanks' }),
      send('reminder', { subject: 'Reminder' }),
    ],
    [edge('start', 'paid'), edge('paid', 'thanks', 'event_received'), edge('paid', 'reminder', 'timeout')],
  );
  await sendEvent(event, 'payer@example.com');
  await sendEvent(event, 'late@example.com');
  await waitFor(async () => (await runsOf(id)).length === 2);
  const [late, payer] = await runsOf(id); // by address
  await waitFor(async () => (await stepsOf(late!.id)).includes('paid:waiting'));
  // Another contact's event, and one whose payload the filter refuses, resume nothing.
  await sendEvent('invoice.paid', 'someone.else@example.com', { amount: 10 });
  await sendEvent('invoice.paid', 'payer@example.com', { amount: 0 });
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(await stepsOf(payer!.id), ['start:completed', 'paid:waiting']);

  await sendEvent('invoice.paid', 'payer@example.com', { amount: 25 });
  await waitFor(async () => (await runsOf(id))[1]!.status === 'completed');
  assert.deepEqual(await stepsOf(payer!.id), ['start:completed', 'paid:completed', 'thanks:completed']);

  advance(3 * DAY + 1000);
  await waitFor(async () => (await runsOf(id))[0]!.status === 'completed');
  assert.deepEqual(await stepsOf(late!.id), ['start:completed', 'paid:completed', 'reminder:completed']);
  assert.deepEqual(
    (await emailsOfRun(late!.id)).map((email) => email.subject),
    ['Reminder'],
  );
});

test('a condition over the payload and the contact chooses the branch', async () => {
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      {
        key: 'is_pro',
        type: 'condition',
        config: {
          type: 'and',
          rules: [
            { type: 'rule', field: 'event.plan', operator: 'eq', value: 'pro' },
            { type: 'rule', field: 'contact.email', operator: 'ends_with', value: '@example.com' },
          ],
        },
      },
      send('pro', { subject: 'Pro' }),
      send('free', { subject: 'Free' }),
    ],
    [edge('start', 'is_pro'), edge('is_pro', 'pro', 'condition_met'), edge('is_pro', 'free', 'condition_not_met')],
  );
  await sendEvent(event, 'pro.user@example.com', { plan: 'pro' });
  const run = await oneRun(id, 'completed');
  assert.deepEqual(await stepsOf(run.id), ['start:completed', 'is_pro:completed', 'pro:completed']);
  await sendEvent(event, 'free.user@example.com', { plan: 'free' });
  await waitFor(async () => (await runsOf(id)).filter((r) => r.status === 'completed').length === 2);
  const second = (await runsOf(id)).find((r) => r.contact_email === 'free.user@example.com')!;
  assert.deepEqual(await stepsOf(second.id), ['start:completed', 'is_pro:completed', 'free:completed']);
});

test('contact steps change the contact in the step, and contact_delete ends the run', async () => {
  const segment = await t.app.inject({
    method: 'POST',
    url: '/segments',
    headers: bearer(org.fullKey),
    payload: { name: 'trial users' },
  });
  assert.equal(segment.statusCode, 201, segment.body);
  const segmentId = segment.json().id as string;
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      { key: 'name', type: 'contact_update', config: { first_name: { var: 'event.name' }, last_name: 'Lovelace' } },
      { key: 'join', type: 'add_to_segment', config: { segment_id: segmentId } },
      send('hello', { subject: 'Hello' }),
      { key: 'bye', type: 'contact_delete', config: {} },
    ],
    [edge('start', 'name'), edge('name', 'join'), edge('join', 'hello'), edge('hello', 'bye')],
  );
  await sendEvent(event, 'ada@example.com', { name: 'Ada' });
  const run = await oneRun(id, 'completed');
  assert.deepEqual(await stepsOf(run.id), [
    'start:completed',
    'name:completed',
    'join:completed',
    'hello:completed',
    'bye:completed',
  ]);
  const email = (await emailsOfRun(run.id))[0]!;
  const full = await t.app.inject({ method: 'GET', url: `/emails/${email.id}`, headers: bearer(org.fullKey) });
  assert.match(full.json().html, /Hi Ada/);
  const gone = await t.db.query('SELECT 1 FROM contacts WHERE id = $1', [run.contact_id]);
  assert.equal(gone.rows.length, 0);
});

test('deleting a contact cancels its running runs', async () => {
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      { key: 'wait', type: 'delay', config: { duration: '2 hours' } },
      send('later'),
    ],
    [edge('start', 'wait'), edge('wait', 'later')],
  );
  await sendEvent(event, 'leaving@example.com');
  const run = await oneRun(id);
  await waitFor(async () => (await stepsOf(run.id)).includes('wait:waiting'));
  const deleted = await t.app.inject({
    method: 'DELETE',
    url: '/contacts/leaving@example.com',
    headers: bearer(org.fullKey),
  });
  assert.equal(deleted.statusCode, 200, deleted.body);
  assert.equal((await runsOf(id))[0]!.status, 'cancelled');
  assert.deepEqual(await stepsOf(run.id), ['start:completed', 'wait:cancelled']);
  advance(3 * 3_600_000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal((await emailsOfRun(run.id)).length, 0);
});

test('an unsubscribed or suppressed contact is skipped at a send_email step, and the run goes on', async () => {
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      send('first'),
      { key: 'tag', type: 'contact_update', config: { properties: {} } },
    ],
    [edge('start', 'first'), edge('first', 'tag')],
  );
  const contact = await t.app.inject({
    method: 'POST',
    url: '/contacts',
    headers: bearer(org.fullKey),
    payload: { email: 'opted.out@example.com', unsubscribed: true },
  });
  assert.equal(contact.statusCode, 201, contact.body);
  const suppressed = await t.app.inject({
    method: 'POST',
    url: '/suppressions',
    headers: bearer(org.fullKey),
    payload: { email: 'bounced.before@example.com' },
  });
  assert.ok(suppressed.statusCode < 300, suppressed.body);
  await sendEvent(event, 'opted.out@example.com');
  await sendEvent(event, 'bounced.before@example.com');
  await waitFor(async () => (await runsOf(id)).filter((run) => run.status === 'completed').length === 2);
  for (const run of await runsOf(id)) {
    assert.deepEqual(await stepsOf(run.id), ['start:completed', 'first:skipped', 'tag:completed']);
    assert.equal((await emailsOfRun(run.id)).length, 0);
  }
  const { rows } = await t.db.query<{ output: { skipped: string } }>(
    `SELECT s.output FROM automation_run_steps s JOIN automation_runs r ON r.id = s.run_id
      WHERE r.automation_id = $1 AND s.step_key = 'first' ORDER BY r.contact_email`,
    [id],
  );
  assert.deepEqual(
    rows.map((row) => row.output.skipped),
    ['suppressed', 'unsubscribed'],
  );
});

test('a step job or an event job run twice does its work once', async () => {
  const { id, event } = await automation(
    [{ key: 'start', type: 'trigger', config: {} }, send('only')],
    [edge('start', 'only')],
  );
  const eventId = await sendEvent(event, 'twice@example.com');
  const run = await oneRun(id, 'completed');
  // As if the worker had died after the work and before the jobs were removed: the same jobs again.
  await t.db.transaction(async (tx) => {
    await enqueueJob(tx, { queue: 'automation-event', payload: { event_id: eventId }, shareKey: org.id });
    await enqueueJob(tx, { queue: 'automation-step', payload: { run_id: run.id, seq: '2' }, shareKey: org.id });
  });
  await waitFor(async () => {
    const { rows } = await t.db.query(`SELECT 1 FROM jobs WHERE queue LIKE 'automation-%'`);
    return rows.length === 0;
  });
  assert.equal((await runsOf(id)).length, 1);
  assert.equal((await emailsOfRun(run.id)).length, 1);
});

test('a send’s message and its step commit together: a transaction that fails after storing the message leaves neither, and the retry sends it once', async () => {
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      { key: 'wait', type: 'delay', config: { duration: '1 hour' } },
      send('after_failure'),
    ],
    [edge('start', 'wait'), edge('wait', 'after_failure')],
  );
  await sendEvent(event, 'failed.commit@example.com');
  const run = await oneRun(id);
  await waitFor(async () => (await stepsOf(run.id)).includes('wait:waiting'));
  // The send step's settling fails (as a lost connection or a crash at that moment would end the
  // transaction), after its message was written in the same transaction.
  await t.db.query(`CREATE FUNCTION fail_step_settle() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'settling refused by the test'; END $$`);
  await t.db.query(`CREATE TRIGGER fail_step_settle BEFORE UPDATE ON automation_run_steps FOR EACH ROW
    WHEN (NEW.run_id = '${run.id}' AND NEW.seq = 3) EXECUTE FUNCTION fail_step_settle()`);
  try {
    logged.length = 0;
    advance(3_600_000 + 1000);
    await waitFor(async () => {
      const { rows } = await t.db.query<{ failed_runs: number }>(
        `SELECT failed_runs FROM jobs WHERE queue = 'automation-step' AND payload ->> 'run_id' = $1`,
        [run.id],
      );
      return (rows[0]?.failed_runs ?? 0) >= 1;
    }, 15_000);
    assert.equal((await emailsOfRun(run.id)).length, 0, 'the message was rolled back with its step');
    assert.ok((await stepsOf(run.id)).includes('after_failure:pending'));
  } finally {
    await t.db.query('DROP TRIGGER fail_step_settle ON automation_run_steps');
    await t.db.query('DROP FUNCTION fail_step_settle()');
  }
  // The job's next run (a failed run backs off 2 s) sends the message once.
  await waitFor(async () => (await runsOf(id))[0]?.status === 'completed', 15_000, 100);
  assert.equal((await emailsOfRun(run.id)).length, 1);
  assert.ok(logged.length >= 1, 'the failed attempt was logged');
});

test('a run keeps the version of the graph it started with', async () => {
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      { key: 'wait', type: 'delay', config: { duration: '1 hour' } },
      send('v1', { subject: 'Version 1' }),
    ],
    [edge('start', 'wait'), edge('wait', 'v1')],
  );
  await sendEvent(event, 'versioned@example.com');
  const run = await oneRun(id);
  await waitFor(async () => (await stepsOf(run.id)).includes('wait:waiting'));
  // An edit of the graph (what PATCH /automations/:id writes): version 2 sends another message.
  await t.db.query(
    `INSERT INTO automation_versions (automation_id, version, steps, connections) VALUES ($1, 2, $2::jsonb, $3::jsonb)`,
    [
      id,
      JSON.stringify([
        { key: 'start', type: 'trigger', config: { event_name: event } },
        { key: 'wait', type: 'delay', config: { duration: '1 hour' } },
        send('v2', { subject: 'Version 2' }),
      ]),
      JSON.stringify([edge('start', 'wait'), edge('wait', 'v2')]),
    ],
  );
  await t.db.query('UPDATE automations SET version = 2 WHERE id = $1', [id]);
  advance(3_600_000 + 1000);
  await oneRun(id, 'completed');
  assert.deepEqual(
    (await emailsOfRun(run.id)).map((email) => email.subject),
    ['Version 1'],
  );
});

test('a step that deletes the contact stops the contact’s other runs done in the same batch; they do not walk on', async () => {
  // Two automations on one event: the first deletes the contact when its delay ends, the second's
  // (longer) delay ends in the same batch, after it.
  const deleting = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      { key: 'wait_x', type: 'delay', config: { duration: '1 hour' } },
      { key: 'bye', type: 'contact_delete', config: {} },
    ],
    [edge('start', 'wait_x'), edge('wait_x', 'bye')],
  );
  const other = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      { key: 'wait_y', type: 'delay', config: { duration: '90 minutes' } },
      { key: 'again', type: 'delay', config: { duration: '1 hour' } },
      send('never'),
    ],
    [edge('start', 'wait_y'), edge('wait_y', 'again'), edge('again', 'never')],
    deleting.event,
  );
  await sendEvent(deleting.event, 'deleted.in.batch@example.com');
  const x = await oneRun(deleting.id);
  const y = await oneRun(other.id);
  await waitFor(async () => (await stepsOf(y.id)).includes('wait_y:waiting'));
  advance(2 * 3_600_000);
  await oneRun(deleting.id, 'completed');
  await oneRun(other.id, 'cancelled');
  assert.deepEqual(await stepsOf(x.id), ['start:completed', 'wait_x:completed', 'bye:completed']);
  // The second run's delay stays cancelled (by the deletion), and nothing after it was entered.
  assert.deepEqual(await stepsOf(y.id), ['start:completed', 'wait_y:cancelled']);
});

test('events of one address in one batch: a contact deleted by the first event’s run is made again for the second', async () => {
  const bye = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      { key: 'bye', type: 'contact_delete', config: {} },
    ],
    [edge('start', 'bye')],
  );
  const hello = await automation([{ key: 'start', type: 'trigger', config: {} }, send('hi')], [edge('start', 'hi')]);
  const email = 'comes.back@example.com';
  const { rows: made } = await t.db.query<{ id: string }>(
    'INSERT INTO contacts (organization_id, email) VALUES ($1, $2) RETURNING id',
    [org.id, email],
  );
  // Both stored (no jobs: the batch is run here, as a worker would run the two together), "bye" first.
  const stored = async (name: string, at: string) =>
    (
      await t.db.query<{ id: string }>(
        `INSERT INTO received_events (organization_id, name, email, payload, received_at)
         VALUES ($1, $2, $3, '{}'::jsonb, $4) RETURNING id`,
        [org.id, name, email, at],
      )
    ).rows[0]!.id;
  const byeId = await stored(bye.event, '2026-01-01T00:00:00Z');
  const helloId = await stored(hello.event, '2026-01-01T00:00:01Z');
  await t.db.transaction((tx) => processEvents(tx, [helloId, byeId], clock()));
  await oneRun(bye.id, 'completed');
  const run = await oneRun(hello.id);
  const { rows } = await t.db.query<{ id: string; contact_id: string | null }>(
    'SELECT id, contact_id FROM received_events WHERE id = ANY($1::uuid[])',
    [[byeId, helloId]],
  );
  const contactOf = new Map(rows.map((row) => [row.id, row.contact_id]));
  assert.equal(contactOf.get(byeId), made[0]!.id);
  assert.ok(contactOf.get(helloId) && contactOf.get(helloId) !== made[0]!.id, 'a new contact for the second event');
  assert.equal(run.contact_id, contactOf.get(helloId));
  await oneRun(hello.id, 'completed');
  assert.equal((await emailsOfRun(run.id)).length, 1);
});

test('delays from a second up: a 2-second delay ends on the real clock', async () => {
  // Only the real clock's worker from here on.
  await worker.stop();
  worker = await startAutomations(t.db, t.config, { error: () => {}, warn: () => {} });
  const { id, event } = await automation(
    [
      { key: 'start', type: 'trigger', config: {} },
      { key: 'pause', type: 'delay', config: { duration: '2 seconds' } },
      send('after'),
    ],
    [edge('start', 'pause'), edge('pause', 'after')],
  );
  const sentAt = Date.now();
  await sendEvent(event, 'real.clock@example.com');
  const run = await oneRun(id);
  await waitFor(async () => (await runsOf(id))[0]!.status === 'completed', 10_000);
  assert.ok(Date.now() - sentAt >= 2000);
  assert.equal((await emailsOfRun(run.id)).length, 1);
});
