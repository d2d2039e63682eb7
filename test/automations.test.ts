import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Resend } from 'resend';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { assertRefused, checkedCaller } from './helpers/checked-calls.ts';

// Resend's /automations over real HTTP, every answer checked against Resend's schema: the graph's
// checks (one refusal per rule), versions, stop against disable, runs, step counts, isolation between
// organizations, and the unmodified SDK. Runs are written here by SQL, as the engine writes them.

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let base: string;
let resend: Resend;
let templateId: string;
let draftTemplateId: string;
let topicId: string;
let segmentId: string;

const call = checkedCaller(
  () => base,
  () => org.fullKey,
);

async function ok(method: string, path: string, body?: unknown, key?: string) {
  const answer = await call(method, path, body, key);
  assert.ok(answer.status < 300, `${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'auto');
  other = await createTestOrganization(t.db, t.config, 'autoother');
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  resend = new Resend(org.fullKey, { baseUrl: base });
  templateId = (await ok('POST', '/templates', { name: 'Welcome', alias: 'welcome', html: '<p>Hi</p>' })).id;
  await ok('POST', `/templates/${templateId}/publish`);
  draftTemplateId = (await ok('POST', '/templates', { name: 'Draft', html: '<p>Later</p>' })).id;
  topicId = (await ok('POST', '/topics', { name: 'News', default_subscription: 'opt_in' })).id;
  segmentId = (await ok('POST', '/segments', { name: 'Paid' })).id;
});
after(() => t.close());

type Step = { key: string; type: string; config: Record<string, unknown> };
type Connection = { from: string; to: string; type?: string };

/** A graph with a step of every type and every kind of connection. */
function graph(): { steps: Step[]; connections: Connection[] } {
  return {
    steps: [
      { key: 'start', type: 'trigger', config: { event_name: 'user.created' } },
      {
        key: 'welcome',
        type: 'send_email',
        config: {
          template: { id: templateId, variables: { plan: { var: 'plan' } } },
          subject: 'Welcome',
          reply_to: 'help@example.com',
          topic_id: topicId,
        },
      },
      { key: 'pause', type: 'delay', config: { duration: '1 hour' } },
      {
        key: 'wait_pay',
        type: 'wait_for_event',
        config: {
          event_name: 'payment.done',
          timeout: '2 days',
          filter_rule: { type: 'rule', field: 'event.amount', operator: 'gt', value: 0 },
        },
      },
      { key: 'paid', type: 'condition', config: { type: 'rule', field: 'event.plan', operator: 'eq', value: 'pro' } },
      { key: 'tag', type: 'add_to_segment', config: { segment_id: segmentId } },
      {
        key: 'update',
        type: 'contact_update',
        config: {
          first_name: { var: 'first' },
          last_name: null,
          unsubscribed: false,
          properties: { plan: 'free', n: 1 },
        },
      },
      { key: 'forget', type: 'contact_delete', config: {} },
    ],
    connections: [
      { from: 'start', to: 'welcome' },
      { from: 'welcome', to: 'pause', type: 'default' },
      { from: 'pause', to: 'wait_pay' },
      { from: 'wait_pay', to: 'paid', type: 'event_received' },
      { from: 'wait_pay', to: 'forget', type: 'timeout' },
      { from: 'paid', to: 'tag', type: 'condition_met' },
      { from: 'paid', to: 'update', type: 'condition_not_met' },
    ],
  };
}

/** A graph naming nothing of the organization's (for other organizations). */
const simple = () => ({
  steps: [
    { key: 'start', type: 'trigger', config: { event_name: 'user.created' } },
    { key: 'pause', type: 'delay', config: { duration: '30 minutes' } },
  ],
  connections: [{ from: 'start', to: 'pause' }],
});

const create = (body: Record<string, unknown>, key?: string) => call('POST', '/automations', body, key);

async function created(extra: Record<string, unknown> = {}, key?: string): Promise<string> {
  const answer = await create({ name: 'Onboarding', ...graph(), ...extra }, key);
  assert.equal(answer.status, 201, JSON.stringify(answer.body));
  assert.deepEqual(Object.keys(answer.body).sort(), ['id', 'object']);
  assert.equal(answer.body.object, 'automation');
  return answer.body.id;
}

/** A run written as the engine writes one: pinned to `version`, with the steps given in order. */
async function insertRun(
  automationId: string,
  version: number,
  status: string,
  steps: Array<[key: string, type: string, status: string]>,
): Promise<string> {
  const contactId = randomUUID();
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO automation_runs (organization_id, automation_id, version, event_id, contact_id, contact_email, status,
                                  started_at, completed_at)
     VALUES ($1, $2, $3, $4, $5, 'someone@example.com', $6, now(), CASE WHEN $6 = 'running' THEN NULL ELSE now() END)
     RETURNING id`,
    [org.id, automationId, version, randomUUID(), contactId, status],
  );
  const runId = rows[0]!.id;
  for (const [seq, [key, type, stepStatus]] of steps.entries()) {
    await t.db.query(
      `INSERT INTO automation_run_steps (run_id, seq, organization_id, automation_id, contact_id, step_key, step_type,
                                         status, started_at, completed_at, output)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), CASE WHEN $8 IN ('completed', 'failed', 'skipped') THEN now() END,
               CASE WHEN $8 = 'completed' THEN '{"ok":true}'::jsonb END)`,
      [runId, seq + 1, org.id, automationId, contactId, key, type, stepStatus],
    );
  }
  return runId;
}

describe('the routes', () => {
  test('create, read, update, delete', async () => {
    const id = await created();
    const read = await ok('GET', `/automations/${id}`);
    const expected = graph();
    assert.deepEqual(
      { ...read, created_at: undefined, updated_at: undefined },
      {
        object: 'automation',
        id,
        name: 'Onboarding',
        status: 'disabled',
        created_at: undefined,
        updated_at: undefined,
        steps: expected.steps,
        // The type is there on every connection, default when it was left out.
        connections: expected.connections.map((c) => ({ ...c, type: c.type ?? 'default' })),
      },
    );
    assert.equal(new Date(read.created_at).toISOString(), read.created_at);

    assert.deepEqual(await ok('PATCH', `/automations/${id}`, { name: 'Onboarding 2', status: 'enabled' }), {
      object: 'automation',
      id,
    });
    const patched = await ok('GET', `/automations/${id}`);
    assert.deepEqual([patched.name, patched.status], ['Onboarding 2', 'enabled']);
    assert.ok(patched.updated_at > read.updated_at);

    assert.deepEqual(await ok('DELETE', `/automations/${id}`), { object: 'automation', id, deleted: true });
    assertRefused(await call('GET', `/automations/${id}`), 404, 'not_found');
    assertRefused(await call('DELETE', `/automations/${id}`), 404, 'not_found');
    assertRefused(await call('GET', '/automations/not-an-id'), 404, 'not_found');
  });

  test('created enabled when asked; the trigger event is kept on the automation', async () => {
    const id = await created({ status: 'enabled' });
    assert.equal((await ok('GET', `/automations/${id}`)).status, 'enabled');
    const { rows } = await t.db.query('SELECT trigger_event, version FROM automations WHERE id = $1', [id]);
    assert.deepEqual(rows[0], { trigger_event: 'user.created', version: 1 });
  });

  test('the list: newest first, by status, a page at a time', async () => {
    const owner = await createTestOrganization(t.db, t.config, 'autolist');
    const first = await created({ name: 'first', ...simple() }, owner.fullKey);
    const second = await created({ name: 'second', status: 'enabled', ...simple() }, owner.fullKey);
    const third = await created({ name: 'third', ...simple() }, owner.fullKey);
    const all = await ok('GET', '/automations', undefined, owner.fullKey);
    assert.deepEqual(
      all.data.map((a: { id: string }) => a.id),
      [third, second, first],
    );
    assert.deepEqual(Object.keys(all.data[0]).sort(), ['created_at', 'id', 'name', 'status', 'updated_at']);
    assert.equal(all.has_more, false);
    const enabled = await ok('GET', '/automations?status=enabled', undefined, owner.fullKey);
    assert.deepEqual(
      enabled.data.map((a: { id: string }) => a.id),
      [second],
    );
    const page = await ok('GET', '/automations?limit=2', undefined, owner.fullKey);
    assert.deepEqual([page.data.length, page.has_more], [2, true]);
    const next = await ok('GET', `/automations?limit=2&after=${page.data[1].id}`, undefined, owner.fullKey);
    assert.deepEqual(
      next.data.map((a: { id: string }) => a.id),
      [first],
    );
    const back = await ok('GET', `/automations?limit=1&before=${first}`, undefined, owner.fullKey);
    assert.deepEqual(
      back.data.map((a: { id: string }) => a.id),
      [second],
    );
    assertRefused(
      await call('GET', '/automations?status=paused', undefined, owner.fullKey),
      400,
      'validation_error',
      'status',
    );
  });

  test('a PATCH: steps and connections together or not at all, and never empty', async () => {
    const id = await created();
    const { steps, connections } = graph();
    assertRefused(await call('PATCH', `/automations/${id}`, { steps }), 400, 'validation_error', 'connections');
    assertRefused(await call('PATCH', `/automations/${id}`, { connections }), 400, 'validation_error', 'steps');
    assert.equal((await call('PATCH', `/automations/${id}`, {})).status, 400);
    assertRefused(await call('PATCH', `/automations/${id}`, { name: '' }), 400, 'validation_error', 'name');
  });

  test('duplicate: a disabled copy of the current graph, named "(copy)"', async () => {
    const id = await created({ status: 'enabled' });
    const { steps, connections } = graph();
    await ok('PATCH', `/automations/${id}`, { steps: steps.slice(0, 2), connections: connections.slice(0, 1) });
    const answer = await call('POST', `/automations/${id}/duplicate`);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    assert.equal(answer.body.object, 'automation');
    const copy = await ok('GET', `/automations/${answer.body.id}`);
    const original = await ok('GET', `/automations/${id}`);
    assert.deepEqual(
      [copy.name, copy.status, copy.steps, copy.connections],
      ['Onboarding (copy)', 'disabled', original.steps, original.connections],
    );
    const { rows } = await t.db.query('SELECT version, trigger_event FROM automations WHERE id = $1', [answer.body.id]);
    assert.deepEqual(rows[0], { version: 1, trigger_event: 'user.created' });
  });

  test('a sending key is refused on every route', async () => {
    const id = await created();
    for (const [method, path] of [
      ['POST', '/automations'],
      ['GET', '/automations'],
      ['GET', `/automations/${id}`],
      ['PATCH', `/automations/${id}`],
      ['DELETE', `/automations/${id}`],
      ['POST', `/automations/${id}/duplicate`],
      ['POST', `/automations/${id}/stop`],
      ['GET', `/automations/${id}/runs`],
      ['GET', `/automations/${id}/runs/${randomUUID()}`],
      ['GET', `/automations/${id}/step-counts`],
    ] as const) {
      const body =
        method === 'POST' && path === '/automations'
          ? { name: 'x', ...graph() }
          : method === 'PATCH'
            ? { name: 'x' }
            : undefined;
      assertRefused(await call(method, path, body, org.sendingKey), 401, 'restricted_api_key');
    }
    assert.equal((await ok('GET', `/automations/${id}`)).name, 'Onboarding');
  });

  test("another organization's automation is 404 on every route, and not in its list", async () => {
    const id = await created();
    const runId = await insertRun(id, 1, 'running', [['start', 'trigger', 'completed']]);
    for (const [method, path] of [
      ['GET', `/automations/${id}`],
      ['PATCH', `/automations/${id}`],
      ['POST', `/automations/${id}/duplicate`],
      ['POST', `/automations/${id}/stop`],
      ['GET', `/automations/${id}/runs`],
      ['GET', `/automations/${id}/runs/${runId}`],
      ['GET', `/automations/${id}/step-counts`],
      ['DELETE', `/automations/${id}`],
    ] as const) {
      const body = method === 'PATCH' ? { name: 'mine now' } : undefined;
      assertRefused(await call(method, path, body, other.fullKey), 404, 'not_found');
    }
    const theirs = await ok('GET', '/automations', undefined, other.fullKey);
    assert.ok(!theirs.data.some((a: { id: string }) => a.id === id));
    const mine = await ok('GET', `/automations/${id}`);
    assert.deepEqual([mine.name, mine.status], ['Onboarding', 'disabled']);
    assert.equal((await ok('GET', `/automations/${id}/runs/${runId}`)).status, 'running');
    // A graph naming another organization's template, topic or segment is refused as naming none.
    const otherTemplate = (await ok('POST', '/templates', { name: 'T', html: '<p>x</p>' }, other.fullKey)).id;
    await ok('POST', `/templates/${otherTemplate}/publish`, undefined, other.fullKey);
    const g = graph();
    (g.steps[1]!.config.template as { id: string }).id = otherTemplate;
    assertRefused(await create({ name: 'x', ...g }), 400, 'validation_error', 'steps[1].config.template.id');
  });
});

describe('the checks of a graph', () => {
  /** A graph changed by `change`; refused on create (and on a PATCH of the graph) naming `field`. */
  async function refused(change: (g: ReturnType<typeof graph>) => void, field: string, message?: RegExp) {
    const g = graph();
    change(g);
    const answer = await create({ name: 'Refused', ...g });
    assertRefused(answer, 400, 'validation_error', field);
    if (message) assert.match(answer.body.message, message);
    return answer.body.message as string;
  }
  const step = (g: ReturnType<typeof graph>, key: string) => g.steps.find((s) => s.key === key)!;

  test('the brief example: a wait timeout past 30 days names the step, its index and the field', async () => {
    const message = await refused((g) => {
      step(g, 'wait_pay').config.timeout = '31 days';
    }, 'steps[3].config.timeout');
    assert.equal(message, 'step "wait_pay" (steps[3]): config.timeout: must be between 1 second and 30 days');
  });

  test('steps: at least one, at most 150', async () => {
    await refused((g) => {
      g.steps = [];
      g.connections = [];
    }, 'steps');
    await refused(
      (g) => {
        for (let i = 0; i < 143; i++) g.steps.push({ key: `more${i}`, type: 'delay', config: { duration: '1 hour' } });
      },
      'steps',
      /at most 150/,
    );
    // 150 exactly is fine.
    const g = graph();
    for (let i = 0; i < 142; i++) g.steps.push({ key: `more${i}`, type: 'delay', config: { duration: '1 hour' } });
    assert.equal((await create({ name: 'Full', ...g })).status, 201);
  });

  test('keys: non-empty and unique', async () => {
    await refused((g) => {
      g.steps[1]!.key = '';
    }, 'steps[1].key');
    await refused(
      (g) => {
        g.steps[2]!.key = 'welcome';
      },
      'steps[2].key',
      /steps\[1\] has the same key/,
    );
  });

  test('a step: a known type, a config object, no other fields', async () => {
    await refused(
      (g) => {
        g.steps[2]!.type = 'sleep';
      },
      'steps[2].type',
      /unknown step type "sleep"/,
    );
    await refused((g) => {
      (g.steps[2] as { config: unknown }).config = 'later';
    }, 'steps[2].config');
    await refused((g) => {
      (g.steps[2] as Record<string, unknown>).name = 'Pause';
    }, 'steps[2].name');
    await refused(
      (g) => {
        step(g, 'pause').config.until = 'tomorrow';
      },
      'steps[2].config.until',
      /unknown field for a delay step/,
    );
  });

  test('exactly one trigger, with an event name that is not Resend’s own', async () => {
    await refused(
      (g) => {
        g.steps.shift();
        g.connections.shift();
      },
      'steps',
      /no trigger step/,
    );
    await refused(
      (g) => {
        g.steps.push({ key: 'again', type: 'trigger', config: { event_name: 'x' } });
      },
      'steps[8].type',
      /steps\[0\] is the trigger already/,
    );
    await refused((g) => {
      g.steps[0]!.config.event_name = ' ';
    }, 'steps[0].config.event_name');
    await refused(
      (g) => {
        g.steps[0]!.config.event_name = 'e'.repeat(201);
      },
      'steps[0].config.event_name',
      /at most 200 characters/,
    );
    await refused(
      (g) => {
        g.steps[0]!.config.event_name = 'resend:email.sent';
      },
      'steps[0].config.event_name',
      /reserved/,
    );
  });

  test('connections: between existing keys, of a known type', async () => {
    await refused(
      (g) => {
        g.connections[2]!.from = 'nowhere';
      },
      'connections[2].from',
      /no step has the key "nowhere"/,
    );
    const message = await refused((g) => {
      g.connections[2]!.to = 'nowhere';
    }, 'connections[2].to');
    assert.equal(message, 'connection from "pause" to "nowhere" (connections[2]): to: no step has the key "nowhere"');
    await refused(
      (g) => {
        g.connections[2]!.type = 'always';
      },
      'connections[2].type',
      /unknown connection type/,
    );
    await refused((g) => {
      (g as { connections: unknown }).connections = 'none';
    }, 'connections');
  });

  test("a connection's type fits the step it leaves", async () => {
    await refused(
      (g) => {
        g.connections[5]!.type = 'default';
      },
      'connections[5].type',
      /a condition step leads on by condition_met or condition_not_met, not default/,
    );
    await refused(
      (g) => {
        g.connections[3]!.type = 'condition_met';
      },
      'connections[3].type',
      /wait_for_event/,
    );
    await refused(
      (g) => {
        g.connections[1]!.type = 'timeout';
      },
      'connections[1].type',
      /a send_email step leads on by default, not timeout/,
    );
    // default alone out of a wait_for_event is accepted.
    const g = graph();
    g.connections[3]!.type = 'default';
    assert.equal((await create({ name: 'Default wait', ...g })).status, 201);
    // Several connections of one type from a step are branches a run takes together.
    const h = graph();
    h.connections.push({ from: 'paid', to: 'forget', type: 'condition_met' }, { from: 'wait_pay', to: 'update' });
    assert.equal((await create({ name: 'Branches', ...h })).status, 201);
  });

  test('nothing connects into the trigger', async () => {
    await refused(
      (g) => {
        g.connections.push({ from: 'forget', to: 'start' });
      },
      'connections[7].to',
      /nothing connects into the trigger/,
    );
  });

  test('the same connection twice is refused', async () => {
    const message = await refused((g) => {
      g.connections.push({ ...g.connections[0]! });
    }, 'connections[7].to');
    assert.match(message, /connections\[0\] connects these steps already/);
  });

  test('a loop must pass through a delay or a wait_for_event', async () => {
    const message = await refused((g) => {
      g.connections.push({ from: 'tag', to: 'paid' });
    }, 'connections[7].to');
    assert.match(message, /closes the loop "paid" → "tag" → "paid"/);
    await refused((g) => {
      g.steps.push({ key: 'loop', type: 'contact_update', config: {} });
      g.connections.push({ from: 'loop', to: 'loop' });
    }, 'connections[7].to');
    // Back to the delay: a run pauses on each round.
    const g = graph();
    g.connections.push({ from: 'tag', to: 'pause' });
    assert.equal((await create({ name: 'Loop', ...g })).status, 201);
    const h = graph();
    h.connections.push({ from: 'update', to: 'wait_pay' });
    assert.equal((await create({ name: 'Loop 2', ...h })).status, 201);
  });

  test('send_email: a published template of the organization (id or alias), and its fields', async () => {
    await refused(
      (g) => {
        (step(g, 'welcome').config.template as { id: string }).id = randomUUID();
      },
      'steps[1].config.template.id',
      /no template of this organization/,
    );
    await refused(
      (g) => {
        (step(g, 'welcome').config.template as { id: string }).id = draftTemplateId;
      },
      'steps[1].config.template.id',
      /is a draft: publish it first/,
    );
    await refused((g) => {
      delete step(g, 'welcome').config.template;
    }, 'steps[1].config.template');
    await refused((g) => {
      (step(g, 'welcome').config.template as { variables: unknown }).variables = ['a'];
    }, 'steps[1].config.template.variables');
    await refused((g) => {
      step(g, 'welcome').config.subject = 7;
    }, 'steps[1].config.subject');
    await refused((g) => {
      step(g, 'welcome').config.from = false;
    }, 'steps[1].config.from');
    await refused(
      (g) => {
        step(g, 'welcome').config.topic_id = randomUUID();
      },
      'steps[1].config.topic_id',
      /no topic/,
    );
    // By alias.
    const g = graph();
    (step(g, 'welcome').config.template as { id: string }).id = 'welcome';
    assert.equal((await create({ name: 'Alias', ...g })).status, 201);
  });

  test('delay: a duration from 1 second to 30 days', async () => {
    await refused(
      (g) => {
        step(g, 'pause').config.duration = 'soon';
      },
      'steps[2].config.duration',
      /not a duration/,
    );
    await refused(
      (g) => {
        step(g, 'pause').config.duration = '31 days';
      },
      'steps[2].config.duration',
      /between 1 second and 30 days/,
    );
  });

  test('wait_for_event: an event name, a timeout, a filter rule', async () => {
    await refused((g) => {
      delete step(g, 'wait_pay').config.event_name;
    }, 'steps[3].config.event_name');
    await refused((g) => {
      step(g, 'wait_pay').config.timeout = '0 seconds';
    }, 'steps[3].config.timeout');
    await refused(
      (g) => {
        step(g, 'wait_pay').config.filter_rule = { type: 'rule', field: 'event.amount', operator: 'gt', value: 'x' };
      },
      'steps[3].config.filter_rule.value',
      /compares with a number/,
    );
  });

  test('condition: the config is a rule', async () => {
    await refused(
      (g) => {
        step(g, 'paid').config = { type: 'rule', field: 'event.plan', operator: 'like', value: 'pro' };
      },
      'steps[4].config.operator',
      /unknown operator/,
    );
    await refused((g) => {
      step(g, 'paid').config = { type: 'and', rules: [{ type: 'rule', field: '', operator: 'exists' }] };
    }, 'steps[4].config.rules[0].field');
  });

  test('add_to_segment: a segment of the organization', async () => {
    await refused(
      (g) => {
        step(g, 'tag').config.segment_id = randomUUID();
      },
      'steps[5].config.segment_id',
      /no segment/,
    );
    await refused((g) => {
      step(g, 'tag').config.segment_id = 'Paid';
    }, 'steps[5].config.segment_id');
  });

  test('contact_update: names, unsubscribed and properties of their forms', async () => {
    await refused((g) => {
      step(g, 'update').config.first_name = 3;
    }, 'steps[6].config.first_name');
    await refused((g) => {
      step(g, 'update').config.last_name = { var: '' };
    }, 'steps[6].config.last_name');
    await refused((g) => {
      step(g, 'update').config.unsubscribed = 'yes';
    }, 'steps[6].config.unsubscribed');
    await refused((g) => {
      step(g, 'update').config.properties = { tags: ['a'] };
    }, 'steps[6].config.properties.tags');
    await refused((g) => {
      step(g, 'update').config.email = 'x@example.com';
    }, 'steps[6].config.email');
  });

  test('contact_delete: an empty config', async () => {
    await refused(
      (g) => {
        step(g, 'forget').config.soft = true;
      },
      'steps[7].config.soft',
      /takes no config fields/,
    );
  });

  test('the same checks on a PATCH of the graph, which then changes nothing', async () => {
    const id = await created();
    const g = graph();
    step(g, 'pause').config.duration = 'forever';
    assertRefused(await call('PATCH', `/automations/${id}`, g), 400, 'validation_error', 'steps[2].config.duration');
    const { rows } = await t.db.query('SELECT version FROM automations WHERE id = $1', [id]);
    assert.equal(rows[0]!.version, 1);
  });

  test('enabling re-checks the graph: a template deleted since, or one still a draft', async () => {
    const template = (await ok('POST', '/templates', { name: 'Short-lived', html: '<p>x</p>' })).id;
    await ok('POST', `/templates/${template}/publish`);
    const g = graph();
    (step(g, 'welcome').config.template as { id: string }).id = template;
    const id = (await ok('POST', '/automations', { name: 'Later', ...g })).id;
    await ok('DELETE', `/templates/${template}`);
    assertRefused(
      await call('PATCH', `/automations/${id}`, { status: 'enabled' }),
      400,
      'validation_error',
      'steps[1].config.template.id',
    );
    assert.equal((await ok('GET', `/automations/${id}`)).status, 'disabled');
    // Disabling, renaming: no check.
    await ok('PATCH', `/automations/${id}`, { name: 'Later still', status: 'disabled' });
    // Created enabled with a draft template: refused.
    const h = graph();
    (step(h, 'welcome').config.template as { id: string }).id = draftTemplateId;
    assertRefused(
      await create({ name: 'Now', status: 'enabled', ...h }),
      400,
      'validation_error',
      'steps[1].config.template.id',
    );
  });
});

describe('versions, runs, stop and disable', () => {
  test('a PATCH of the graph adds a version; a run pinned to version 1 still reads', async () => {
    const id = await created({ status: 'enabled' });
    const runId = await insertRun(id, 1, 'running', [
      ['start', 'trigger', 'completed'],
      ['welcome', 'send_email', 'completed'],
      ['pause', 'delay', 'waiting'],
    ]);
    const g = graph();
    g.steps[0]!.config.event_name = 'user.upgraded';
    await ok('PATCH', `/automations/${id}`, g);
    const { rows } = await t.db.query<{ version: number; trigger_event: string }>(
      'SELECT version, trigger_event FROM automations WHERE id = $1',
      [id],
    );
    assert.deepEqual(rows[0], { version: 2, trigger_event: 'user.upgraded' });
    const versions = await t.db.query<{ version: number; event: string }>(
      `SELECT version, steps->0->'config'->>'event_name' AS event FROM automation_versions
        WHERE automation_id = $1 ORDER BY version`,
      [id],
    );
    assert.deepEqual(versions.rows, [
      { version: 1, event: 'user.created' },
      { version: 2, event: 'user.upgraded' },
    ]);
    assert.equal((await ok('GET', `/automations/${id}`)).steps[0].config.event_name, 'user.upgraded');
    const run = await ok('GET', `/automations/${id}/runs/${runId}`);
    assert.equal(run.status, 'running');
    assert.deepEqual(
      run.steps.map((s: { key: string }) => s.key),
      ['start', 'welcome', 'pause'],
    );
    const pinned = await t.db.query('SELECT version FROM automation_runs WHERE id = $1', [runId]);
    assert.equal(pinned.rows[0]!.version, 1);

    // The same graph again, or a rename: no new version.
    await ok('PATCH', `/automations/${id}`, { ...g, name: 'Renamed' });
    const after = await t.db.query('SELECT version FROM automations WHERE id = $1', [id]);
    assert.equal(after.rows[0]!.version, 2);
  });

  test('runs: the list by status and a page at a time; a run with its steps in the order entered', async () => {
    const id = await created();
    const first = await insertRun(id, 1, 'completed', [['start', 'trigger', 'completed']]);
    const second = await insertRun(id, 1, 'failed', [['start', 'trigger', 'completed']]);
    const third = await insertRun(id, 1, 'running', [
      ['start', 'trigger', 'completed'],
      ['welcome', 'send_email', 'failed'],
      ['pause', 'delay', 'skipped'],
      ['wait_pay', 'wait_for_event', 'waiting'],
    ]);
    await t.db.query(
      `UPDATE automation_runs SET created_at = now() - make_interval(mins => CASE id WHEN $1 THEN 3 WHEN $2 THEN 2 ELSE 1 END)
        WHERE id IN ($1, $2, $3)`,
      [first, second, third],
    );
    const ids = (body: { data: Array<{ id: string }> }) => body.data.map((r) => r.id);
    const all = await ok('GET', `/automations/${id}/runs`);
    assert.deepEqual(ids(all), [third, second, first]);
    assert.deepEqual(Object.keys(all.data[0]).sort(), ['completed_at', 'created_at', 'id', 'started_at', 'status']);
    assert.deepEqual(ids(await ok('GET', `/automations/${id}/runs?status=running,failed`)), [third, second]);
    assert.deepEqual(ids(await ok('GET', `/automations/${id}/runs?status=completed`)), [first]);
    const page = await ok('GET', `/automations/${id}/runs?limit=1&after=${third}`);
    assert.deepEqual([ids(page), page.has_more], [[second], true]);
    assertRefused(await call('GET', `/automations/${id}/runs?status=running,lost`), 400, 'validation_error', 'status');

    const run = await ok('GET', `/automations/${id}/runs/${third}`);
    assert.equal(run.object, 'automation_run');
    assert.deepEqual(
      run.steps.map((s: { key: string; type: string; status: string }) => [s.key, s.type, s.status]),
      [
        ['start', 'trigger', 'completed'],
        ['welcome', 'send_email', 'failed'],
        ['pause', 'delay', 'skipped'],
        ['wait_pay', 'wait_for_event', 'waiting'],
      ],
    );
    assert.deepEqual(run.steps[0].output, { ok: true });
    assert.equal(run.steps[3].completed_at, null);
    assertRefused(await call('GET', `/automations/${id}/runs/${randomUUID()}`), 404, 'not_found');
    // A run of another automation of the same organization is not under this one.
    const elsewhere = await created();
    assertRefused(await call('GET', `/automations/${elsewhere}/runs/${third}`), 404, 'not_found');
  });

  test('step counts: every step of the current graph, over every run', async () => {
    const id = await created();
    await insertRun(id, 1, 'running', [
      ['start', 'trigger', 'completed'],
      ['welcome', 'send_email', 'completed'],
      ['pause', 'delay', 'waiting'],
    ]);
    await insertRun(id, 1, 'failed', [
      ['start', 'trigger', 'completed'],
      ['welcome', 'send_email', 'failed'],
    ]);
    await insertRun(id, 1, 'completed', [
      ['start', 'trigger', 'completed'],
      ['paid', 'condition', 'skipped'],
    ]);
    const counts = await ok('GET', `/automations/${id}/step-counts`);
    assert.equal(counts.object, 'list');
    const byKey = Object.fromEntries(counts.data.map((c: { key: string }) => [c.key, c]));
    assert.deepEqual(
      Object.keys(byKey),
      graph().steps.map((s) => s.key),
    );
    assert.deepEqual(byKey.start, {
      key: 'start',
      type: 'trigger',
      entered: 3,
      waiting: 0,
      completed: 3,
      failed: 0,
      skipped: 0,
    });
    assert.deepEqual(byKey.welcome, {
      key: 'welcome',
      type: 'send_email',
      entered: 2,
      waiting: 0,
      completed: 1,
      failed: 1,
      skipped: 0,
    });
    assert.deepEqual(byKey.pause, {
      key: 'pause',
      type: 'delay',
      entered: 1,
      waiting: 1,
      completed: 0,
      failed: 0,
      skipped: 0,
    });
    assert.equal(byKey.paid.skipped, 1);
    assert.equal(byKey.forget.entered, 0);
  });

  test('stop: disabled, its running runs cancelled with their steps not yet done; others untouched', async () => {
    const id = await created({ status: 'enabled' });
    const running = await insertRun(id, 1, 'running', [
      ['start', 'trigger', 'completed'],
      ['welcome', 'send_email', 'completed'],
      ['pause', 'delay', 'waiting'],
    ]);
    const pending = await insertRun(id, 1, 'running', [
      ['start', 'trigger', 'completed'],
      ['welcome', 'send_email', 'pending'],
    ]);
    const done = await insertRun(id, 1, 'completed', [['start', 'trigger', 'completed']]);
    const elsewhere = await created({ status: 'enabled' });
    const untouched = await insertRun(elsewhere, 1, 'running', [['pause', 'delay', 'waiting']]);

    assert.deepEqual(await ok('POST', `/automations/${id}/stop`), { object: 'automation', id, status: 'disabled' });
    assert.equal((await ok('GET', `/automations/${id}`)).status, 'disabled');
    const stopped = await ok('GET', `/automations/${id}/runs/${running}`);
    assert.equal(stopped.status, 'cancelled');
    assert.ok(stopped.completed_at);
    assert.deepEqual(
      stopped.steps.map((s: { status: string }) => s.status),
      ['completed', 'completed', 'cancelled'],
    );
    assert.ok(stopped.steps[2].completed_at);
    const stoppedPending = await ok('GET', `/automations/${id}/runs/${pending}`);
    assert.deepEqual(
      [stoppedPending.status, ...stoppedPending.steps.map((s: { status: string }) => s.status)],
      ['cancelled', 'completed', 'cancelled'],
    );
    assert.equal((await ok('GET', `/automations/${id}/runs/${done}`)).status, 'completed');
    const other = await ok('GET', `/automations/${elsewhere}/runs/${untouched}`);
    assert.deepEqual([other.status, other.steps[0].status], ['running', 'waiting']);
    // Stopping again is harmless.
    assert.equal((await ok('POST', `/automations/${id}/stop`)).status, 'disabled');
  });

  test('a PATCH to disabled only stops new runs: running runs carry on', async () => {
    const id = await created({ status: 'enabled' });
    const running = await insertRun(id, 1, 'running', [
      ['start', 'trigger', 'completed'],
      ['pause', 'delay', 'waiting'],
    ]);
    await ok('PATCH', `/automations/${id}`, { status: 'disabled' });
    assert.equal((await ok('GET', `/automations/${id}`)).status, 'disabled');
    const run = await ok('GET', `/automations/${id}/runs/${running}`);
    assert.deepEqual([run.status, run.steps[1].status], ['running', 'waiting']);
  });

  test('deleting an automation deletes its versions and runs', async () => {
    const id = await created();
    await insertRun(id, 1, 'running', [['start', 'trigger', 'completed']]);
    await ok('DELETE', `/automations/${id}`);
    for (const table of ['automation_versions', 'automation_runs', 'automation_run_steps']) {
      const { rows } = await t.db.query(`SELECT 1 FROM ${table} WHERE automation_id = $1`, [id]);
      assert.equal(rows.length, 0, table);
    }
  });
});

describe("Resend's SDK, unmodified", () => {
  test('automations: create, list, get, update, duplicate, stop, remove; runs: list, get', async () => {
    const createdSdk = await resend.automations.create({
      name: 'Through the SDK',
      steps: [
        { key: 'start', type: 'trigger', config: { eventName: 'user.created' } },
        {
          key: 'welcome',
          type: 'send_email',
          config: {
            template: { id: templateId, variables: { name: { var: 'name' } } },
            replyTo: 'help@example.com',
            topicId,
          },
        },
        {
          key: 'wait_pay',
          type: 'wait_for_event',
          config: {
            eventName: 'payment.done',
            timeout: '1 day',
            filterRule: { type: 'rule', field: 'event.plan', operator: 'eq', value: 'pro' },
          },
        },
        { key: 'tag', type: 'add_to_segment', config: { segmentId } },
        { key: 'update', type: 'contact_update', config: { firstName: { var: 'first' }, lastName: null } },
      ],
      connections: [
        { from: 'start', to: 'welcome' },
        { from: 'welcome', to: 'wait_pay' },
        { from: 'wait_pay', to: 'tag', type: 'event_received' },
        { from: 'wait_pay', to: 'update', type: 'timeout' },
      ],
    });
    assert.equal(createdSdk.error, null, JSON.stringify(createdSdk.error));
    const id = createdSdk.data!.id;

    const read = await resend.automations.get(id);
    assert.equal(read.error, null, JSON.stringify(read.error));
    assert.equal(read.data!.status, 'disabled');
    assert.deepEqual(read.data!.steps[0], { key: 'start', type: 'trigger', config: { event_name: 'user.created' } });
    assert.deepEqual(read.data!.steps[1]!.config, {
      template: { id: templateId, variables: { name: { var: 'name' } } },
      reply_to: 'help@example.com',
      topic_id: topicId,
    });
    assert.deepEqual(read.data!.steps[3]!.config, { segment_id: segmentId });
    assert.deepEqual(read.data!.steps[4]!.config, { first_name: { var: 'first' }, last_name: null });
    assert.deepEqual(read.data!.connections[0], { from: 'start', to: 'welcome', type: 'default' });

    const listed = await resend.automations.list({ status: 'disabled', limit: 100 });
    assert.equal(listed.error, null, JSON.stringify(listed.error));
    assert.ok(listed.data!.data.some((a) => a.id === id));

    const updated = await resend.automations.update(id, {
      status: 'enabled',
      steps: [{ key: 'start', type: 'trigger', config: { eventName: 'user.joined' } }],
      connections: [],
    });
    assert.deepEqual([updated.error, updated.data], [null, { object: 'automation', id }]);
    assert.equal((await resend.automations.get(id)).data!.steps.length, 1);

    const runId = await insertRun(id, 1, 'running', [['start', 'trigger', 'completed']]);
    const runs = await resend.automations.runs.list({ automationId: id, status: ['running', 'failed'] });
    assert.equal(runs.error, null, JSON.stringify(runs.error));
    assert.deepEqual(
      runs.data!.data.map((r) => r.id),
      [runId],
    );
    const run = await resend.automations.runs.get({ automationId: id, runId });
    assert.equal(run.error, null, JSON.stringify(run.error));
    assert.equal(run.data!.steps[0]!.key, 'start');

    const copy = await resend.automations.duplicate(id);
    assert.equal(copy.error, null, JSON.stringify(copy.error));
    assert.equal((await resend.automations.get(copy.data!.id)).data!.name, 'Through the SDK (copy)');

    const stopped = await resend.automations.stop(id);
    assert.deepEqual([stopped.error, stopped.data], [null, { object: 'automation', id, status: 'disabled' }]);
    assert.equal((await resend.automations.runs.get({ automationId: id, runId })).data!.status, 'cancelled');

    const removed = await resend.automations.remove(id);
    assert.deepEqual([removed.error, removed.data], [null, { object: 'automation', id, deleted: true }]);
    assert.equal((await resend.automations.get(id)).error?.name, 'not_found');

    const refused = await resend.automations.create({
      name: 'Bad',
      steps: [{ key: 'start', type: 'trigger', config: { eventName: 'resend:x' } }],
      connections: [],
    });
    assert.equal(refused.error?.name, 'validation_error');
  });
});
