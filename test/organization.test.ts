// GET and PATCH /organization: the caller's own organization, and its tracking switches.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'own');
  other = await createTestOrganization(t.db, t.config, 'other');
});
after(() => t.close());

function call(token: string, method: 'GET' | 'PATCH', payload?: unknown, headers: Record<string, string> = {}) {
  return t.app.inject({
    method,
    url: '/organization',
    headers: { ...bearer(token), ...headers },
    ...(payload !== undefined ? { payload: payload as object } : {}),
  });
}

const storedSwitches = async (id: string) =>
  (
    await t.db.query<{ open_tracking: boolean; click_tracking: boolean }>(
      'SELECT open_tracking, click_tracking FROM organizations WHERE id = $1',
      [id],
    )
  ).rows[0];

test("GET /organization shows the caller's organization, tracking off by default", async () => {
  const res = await call(org.fullKey, 'GET');
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  const { rows } = await t.db.query<{ name: string; monthly_quota: number; rate_limit: number }>(
    'SELECT name, monthly_quota, rate_limit FROM organizations WHERE id = $1',
    [org.id],
  );
  assert.deepEqual(Object.keys(body).sort(), [
    'click_tracking',
    'created_at',
    'id',
    'monthly_quota',
    'name',
    'object',
    'open_tracking',
    'rate_limit',
  ]);
  assert.equal(body.object, 'organization');
  assert.equal(body.id, org.id);
  assert.equal(body.name, rows[0]!.name);
  assert.equal(body.monthly_quota, rows[0]!.monthly_quota);
  assert.equal(body.rate_limit, rows[0]!.rate_limit);
  // New organizations start with tracking off (migration 0022): turning it on is the organization's choice.
  assert.equal(body.open_tracking, false);
  assert.equal(body.click_tracking, false);
  assert.ok(!Number.isNaN(Date.parse(body.created_at)) && body.created_at.endsWith('Z'), body.created_at);

  // A dashboard session reads the same.
  const session = await call(org.session, 'GET');
  assert.equal(session.statusCode, 200);
  assert.deepEqual(session.json(), body);
});

test('PATCH /organization switches tracking and answers the updated organization', async () => {
  const opens = await call(org.fullKey, 'PATCH', { open_tracking: true });
  assert.equal(opens.statusCode, 200, opens.body);
  assert.equal(opens.json().object, 'organization');
  assert.equal(opens.json().open_tracking, true);
  assert.equal(opens.json().click_tracking, false, 'a switch not sent is left as it was');
  assert.deepEqual(await storedSwitches(org.id), { open_tracking: true, click_tracking: false });

  const clicks = await call(org.session, 'PATCH', { click_tracking: true });
  assert.equal(clicks.statusCode, 200, clicks.body);
  assert.deepEqual(await storedSwitches(org.id), { open_tracking: true, click_tracking: true });
  assert.deepEqual((await call(org.fullKey, 'GET')).json(), clicks.json());

  const both = await call(org.fullKey, 'PATCH', { open_tracking: false, click_tracking: false });
  assert.equal(both.statusCode, 200);
  assert.deepEqual(await storedSwitches(org.id), { open_tracking: false, click_tracking: false });
  await call(org.fullKey, 'PATCH', { open_tracking: true, click_tracking: true });
  assert.deepEqual(await storedSwitches(org.id), { open_tracking: true, click_tracking: true });
});

test('PATCH /organization takes only the tracking switches, and at least one', async () => {
  const refused: Array<[string, unknown, Record<string, string>?]> = [
    ['no body', undefined],
    ['an empty body with a JSON content type', undefined, { 'content-type': 'application/json' }],
    ['an empty object', {}],
    ['another field', { name: 'Renamed' }],
    ['the quota', { open_tracking: false, monthly_quota: 1_000_000 }],
    ['a non-boolean', { open_tracking: 'false' }],
    ['null', { click_tracking: null }],
    ['an array', [{ open_tracking: false }]],
  ];
  for (const [what, payload, headers] of refused) {
    const res = await call(org.fullKey, 'PATCH', payload, headers);
    assert.equal(res.statusCode, 400, `${what}: ${res.body}`);
    assert.equal(res.json().name, 'validation_error', `${what}: ${res.body}`);
  }
  assert.deepEqual(await storedSwitches(org.id), { open_tracking: true, click_tracking: true });
  const { rows } = await t.db.query<{ monthly_quota: number }>(
    'SELECT monthly_quota FROM organizations WHERE id = $1',
    [org.id],
  );
  assert.notEqual(rows[0]!.monthly_quota, 1_000_000);
});

test("each organization's key sees and changes only its own organization", async () => {
  const mine = (await call(org.fullKey, 'GET')).json();
  const theirs = await call(other.fullKey, 'GET');
  assert.equal(theirs.statusCode, 200);
  assert.equal(theirs.json().id, other.id);
  assert.notEqual(theirs.json().name, mine.name);

  const patched = await call(other.fullKey, 'PATCH', { click_tracking: true });
  assert.equal(patched.json().id, other.id);
  assert.deepEqual(await storedSwitches(other.id), { open_tracking: false, click_tracking: true });
  assert.deepEqual(await storedSwitches(org.id), { open_tracking: true, click_tracking: true });
  assert.deepEqual((await call(org.fullKey, 'GET')).json(), mine);
});

test('a sending_access key may neither read nor change the organization', async () => {
  for (const method of ['GET', 'PATCH'] as const) {
    const res = await call(org.sendingKey, method, method === 'PATCH' ? { open_tracking: false } : undefined);
    assert.equal(res.statusCode, 401, res.body);
    assert.equal(res.json().name, 'restricted_api_key');
  }
  const anonymous = await t.app.inject({ method: 'GET', url: '/organization' });
  assert.equal(anonymous.statusCode, 401);
  assert.deepEqual(await storedSwitches(org.id), { open_tracking: true, click_tracking: true });
});
