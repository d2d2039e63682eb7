// API keys as Resend has them: renamed with PATCH /api-keys/:id, listed with when each was last used.
// Every answer is checked against Resend's published schema, and the Resend SDK drives each operation.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { responseProblems } from './helpers/resend-openapi.ts';
import { KeyUsage, STAMP_INTERVAL_MS } from '../src/tenancy/key-usage.ts';
import { createApiKey, renameApiKey } from '../src/tenancy/api-keys.ts';
import { LOOKUPS_CHANNEL } from '../src/platform/db/lookup-cache.ts';
import { waitFor } from './helpers/wait.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let resend: Resend;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'keys');
  other = await createTestOrganization(t.db, t.config, 'keys-other');
  resend = new Resend(org.fullKey, { baseUrl: await t.app.listen({ port: 0, host: '127.0.0.1' }) });
});
after(() => t.close());

/** Calls the API; every answer to an operation Resend has must also be one its schema allows. */
const call = async (
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  payload?: object,
  token = org.fullKey,
) => {
  const res = await t.app.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
  assert.deepEqual(
    responseProblems(method, url, res.statusCode, res.json()) ?? [],
    [],
    `${method} ${url}: ${res.body}`,
  );
  return res;
};
const newKey = async (name: string, organizationId = org.id) =>
  createApiKey(t.db, { organizationId, name, permission: 'sending_access' });
const listed = async (id: string) =>
  (await call('GET', '/api-keys')).json().data.find((key: { id: string }) => key.id === id) as
    { name: string; last_used_at: string | null } | undefined;

test('PATCH /api-keys/:id renames a key, through the SDK too', async () => {
  const key = await newKey('before');
  const res = await call('PATCH', `/api-keys/${key.id}`, { name: 'after' });
  assert.deepEqual(res.json(), { object: 'api_key', id: key.id });
  assert.equal((await listed(key.id))?.name, 'after');

  const updated = await resend.apiKeys.update(key.id, { name: 'renamed by the SDK' });
  assert.equal(updated.error, null, JSON.stringify(updated.error));
  assert.deepEqual(updated.data, { object: 'api_key', id: key.id });
  const list = await resend.apiKeys.list();
  assert.equal(list.error, null, JSON.stringify(list.error));
  assert.equal(list.data?.data.find((k) => k.id === key.id)?.name, 'renamed by the SDK');

  // The token is unchanged: renaming is not rotating.
  assert.equal((await t.app.inject({ method: 'POST', url: '/emails', headers: bearer(key.token) })).statusCode, 400);
});

test("a rename with a bad name is a 400 naming it; another organization's key, a revoked one or no key is 404", async () => {
  const key = await newKey('stays');
  for (const [payload, name] of [
    [{}, 'missing_required_field'],
    [{ name: '' }, 'validation_error'],
    [{ name: 'x'.repeat(51) }, 'validation_error'],
    [{ name: 5 }, 'validation_error'],
    [{ name: 'ok', permission: 'full_access' }, 'validation_error'],
  ] as const) {
    const res = await call('PATCH', `/api-keys/${key.id}`, payload);
    assert.equal(res.statusCode, 400, JSON.stringify(payload));
    assert.equal(res.json().name, name, JSON.stringify(payload));
  }
  const theirs = await newKey('theirs', other.id);
  const res = await call('PATCH', `/api-keys/${theirs.id}`, { name: 'mine now' });
  assert.deepEqual([res.statusCode, res.json().name], [404, 'not_found']);
  const fromTheSdk = await resend.apiKeys.update(theirs.id, { name: 'mine now' });
  assert.equal(fromTheSdk.error?.name, 'not_found');
  const theirList = await call('GET', '/api-keys', undefined, other.fullKey);
  assert.equal(theirList.json().data.find((k: { id: string }) => k.id === theirs.id).name, 'theirs');

  await call('DELETE', `/api-keys/${key.id}`);
  assert.equal((await call('PATCH', `/api-keys/${key.id}`, { name: 'revoked' })).statusCode, 404);
  assert.equal((await call('PATCH', '/api-keys/not-a-uuid', { name: 'x' })).statusCode, 404);
  assert.equal((await call('PATCH', '/api-keys/00000000-0000-4000-8000-000000000000', { name: 'x' })).statusCode, 404);
});

test('last_used_at is null until a key is used, then the time of its use, over the API and in the SDK', async () => {
  const key = await newKey('fresh');
  assert.equal((await listed(key.id))?.last_used_at, null);

  const start = Date.now();
  // Any authenticated call is a use, even one the key may not make (a sending key reading the list).
  const refused = await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(key.token) });
  assert.equal(refused.json().name, 'restricted_api_key');
  const end = Date.now();
  const used = (await listed(key.id))?.last_used_at;
  assert.ok(used, 'stamped');
  const at = Date.parse(used);
  assert.ok(at >= start - 1000 && at <= end + 1000, `${used} is the time of the call`);

  const list = await resend.apiKeys.list();
  assert.equal(list.data?.data.find((k) => k.id === key.id)?.last_used_at, used);
});

test('a key is stamped at most once a minute per process, and never moved back', async () => {
  const key = await newKey('busy');
  let now = new Date('2026-01-01T10:00:00Z');
  const usage = new KeyUsage(t.db, () => now);
  const stamped = async () =>
    (
      await t.db.query<{ last_used_at: Date }>('SELECT last_used_at FROM api_key_usage WHERE api_key_id = $1', [key.id])
    ).rows[0]?.last_used_at.toISOString();

  await usage.record(key.id);
  assert.equal(await stamped(), '2026-01-01T10:00:00.000Z');
  // Used again and again within the minute: no write (the stamp stays the first one).
  for (const seconds of [1, 30, 59]) {
    now = new Date(Date.parse('2026-01-01T10:00:00Z') + seconds * 1000);
    await usage.record(key.id);
  }
  assert.equal(await stamped(), '2026-01-01T10:00:00.000Z');
  // A minute after the last write, the next use writes.
  now = new Date(Date.parse('2026-01-01T10:00:00Z') + STAMP_INTERVAL_MS);
  await usage.record(key.id);
  assert.equal(await stamped(), '2026-01-01T10:01:00.000Z');

  // Another process that stamps an older time (its clock is behind) does not move it back.
  const behind = new KeyUsage(t.db, () => new Date('2026-01-01T09:00:00Z'));
  await behind.record(key.id);
  assert.equal(await stamped(), '2026-01-01T10:01:00.000Z');
});

test('a stamp that could not be written does not fail the use, and the next use writes it', async () => {
  const key = await newKey('unlucky');
  let down = true;
  const flaky = new KeyUsage(
    {
      query: (text, params) => (down ? Promise.reject(new Error('connection lost')) : t.db.query(text, params)),
    },
    () => new Date('2026-02-01T08:00:00Z'),
  );
  await flaky.record(key.id);
  down = false;
  await flaky.record(key.id); // the same minute: written now, since the first write did not happen
  const { rows } = await t.db.query<{ last_used_at: Date }>(
    'SELECT last_used_at FROM api_key_usage WHERE api_key_id = $1',
    [key.id],
  );
  assert.equal(rows[0]?.last_used_at.toISOString(), '2026-02-01T08:00:00.000Z');
});

test('a stamp does not make processes forget their cached keys; a rename does', async () => {
  const key = await newKey('quiet');
  let notified = 0;
  const stop = await t.db.listen(LOOKUPS_CHANNEL, () => (notified += 1));
  try {
    await new KeyUsage(t.db, () => new Date('2026-03-01T00:00:00Z')).record(key.id);
    await renameApiKey(t.db, org.id, key.id, 'still quiet');
    // Notices arrive in commit order within milliseconds: the rename's, and a stamp's had it sent one.
    await waitFor(() => notified > 0);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(notified, 1, 'only the rename notified');
  } finally {
    await stop();
  }
});

// A sending key limited to one domain (Resend's domain_id) sends from that domain only, whatever carries
// the message (POST /emails, every entry of POST /emails/batch; SMTP submission in submission.test.ts).
describe('a sending key limited to one domain', () => {
  let secondDomain: { id: string; name: string };
  let ownDomainId: string;

  /** A second verified domain of the organization (marked verified directly: DNS is not the point here). */
  async function verifiedDomain(name: string) {
    const res = await call('POST', '/domains', { name });
    assert.equal(res.statusCode, 201, res.body);
    await t.db.query(`UPDATE domains SET status = 'verified', verified_at = now() WHERE id = $1`, [res.json().id]);
    return { id: res.json().id as string, name };
  }
  const send = (token: string, from: string) =>
    t.app.inject({
      method: 'POST',
      url: '/emails',
      headers: bearer(token),
      payload: { from, to: 'reader@example.com', subject: 's', text: 't' },
    });

  before(async () => {
    secondDomain = await verifiedDomain(`second-${process.pid}.example.test`);
    ownDomainId = (await call('GET', '/domains')).json().data.find((d: { name: string }) => d.name === org.domain).id;
  });

  test('created through the SDK with domain_id; listed with it; an unlimited key lists null', async () => {
    const created = await resend.apiKeys.create({
      name: 'only one',
      permission: 'sending_access',
      domain_id: ownDomainId,
    });
    assert.equal(created.error, null, JSON.stringify(created.error));
    assert.match(created.data!.token, /^mr_/);
    const plain = await newKey('any domain');
    const list = (await call('GET', '/api-keys')).json().data as Array<{ id: string; domain_id: string | null }>;
    assert.equal(list.find((key) => key.id === created.data!.id)?.domain_id, ownDomainId);
    assert.equal(list.find((key) => key.id === plain.id)?.domain_id, null);

    const res = await call('POST', '/api-keys', {
      name: 'raw',
      permission: 'sending_access',
      domain_id: secondDomain.id,
    });
    assert.equal(res.statusCode, 201, res.body);
    assert.equal(res.json().domain_id, secondDomain.id);
    assert.equal(res.json().permission, 'sending_access');
  });

  test('refused: with full_access or no permission, another organization’s domain, an unknown or malformed id', async () => {
    const theirDomain = (await call('GET', '/domains', undefined, other.fullKey)).json().data[0].id as string;
    for (const payload of [
      { name: 'x', permission: 'full_access', domain_id: ownDomainId },
      { name: 'x', domain_id: ownDomainId },
      { name: 'x', permission: 'sending_access', domain_id: theirDomain },
      { name: 'x', permission: 'sending_access', domain_id: '00000000-0000-4000-8000-000000000000' },
      { name: 'x', permission: 'sending_access', domain_id: 'not-a-uuid' },
    ]) {
      const res = await call('POST', '/api-keys', payload);
      assert.deepEqual(
        [res.statusCode, res.json().name, res.json().field],
        [400, 'validation_error', 'domain_id'],
        JSON.stringify(payload),
      );
    }
    const sdk = await resend.apiKeys.create({ name: 'x', permission: 'full_access', domain_id: ownDomainId });
    assert.equal(sdk.error?.name, 'validation_error');
    const keys = (await call('GET', '/api-keys')).json().data as Array<{ name: string }>;
    assert.ok(!keys.some((key) => key.name === 'x'), 'no key was created');
  });

  test('POST /emails: its domain is accepted, another verified domain of the organization refused naming from', async () => {
    const limited = await createApiKey(t.db, {
      organizationId: org.id,
      name: 'limited',
      permission: 'sending_access',
      domainId: ownDomainId,
    });
    assert.equal((await send(limited.token, `hello@${org.domain}`)).statusCode, 200);
    const refused = await send(limited.token, `Hello <hello@${secondDomain.name}>`);
    assert.equal(refused.statusCode, 400, refused.body);
    assert.deepEqual(refused.json(), {
      statusCode: 400,
      name: 'invalid_from_address',
      message: `This API key may send only from ${org.domain}, not from ${secondDomain.name}`,
      field: 'from',
    });
    // The same organization's unlimited keys send from either domain.
    assert.equal((await send(org.sendingKey, `hello@${secondDomain.name}`)).statusCode, 200);
    assert.equal((await send(org.fullKey, `hello@${secondDomain.name}`)).statusCode, 200);

    const sdk = await new Resend(limited.token, { baseUrl: resend.baseUrl }).emails.send({
      from: `hello@${secondDomain.name}`,
      to: 'reader@example.com',
      subject: 's',
      text: 't',
    });
    assert.equal(sdk.error?.name, 'invalid_from_address');
  });

  test('POST /emails/batch: every entry is checked; strict validation refuses the whole batch', async () => {
    const limited = await createApiKey(t.db, {
      organizationId: org.id,
      name: 'limited batch',
      permission: 'sending_access',
      domainId: ownDomainId,
    });
    const entries = [
      { from: `a@${org.domain}`, to: 'one@example.com', subject: '1', text: 'one' },
      { from: `a@${secondDomain.name}`, to: 'two@example.com', subject: '2', text: 'two' },
    ];
    const permissive = await t.app.inject({
      method: 'POST',
      url: '/emails/batch',
      headers: { ...bearer(limited.token), 'x-batch-validation': 'permissive' },
      payload: entries,
    });
    assert.equal(permissive.statusCode, 200, permissive.body);
    const { data, errors } = permissive.json();
    assert.equal(data[0].object, 'email');
    assert.deepEqual(
      [errors.length, errors[0].index, errors[0].name, errors[0].field],
      [1, 1, 'invalid_from_address', 'from'],
    );

    const strict = await new Resend(limited.token, { baseUrl: resend.baseUrl }).batch.send(entries);
    assert.equal(strict.error?.name, 'invalid_from_address', JSON.stringify(strict));
  });

  test('a key whose domain is deleted keeps its limit and can send nothing', async () => {
    const doomed = await verifiedDomain(`doomed-${process.pid}.example.test`);
    const limited = await createApiKey(t.db, {
      organizationId: org.id,
      name: 'orphan',
      permission: 'sending_access',
      domainId: doomed.id,
    });
    assert.equal((await send(limited.token, `a@${doomed.name}`)).statusCode, 200);
    assert.equal((await call('DELETE', `/domains/${doomed.id}`)).statusCode, 200);
    const list = (await call('GET', '/api-keys')).json().data as Array<{ id: string; domain_id: string | null }>;
    assert.equal(list.find((key) => key.id === limited.id)?.domain_id, doomed.id);
    for (const from of [`a@${org.domain}`, `a@${secondDomain.name}`]) {
      const res = await send(limited.token, from);
      assert.deepEqual([res.statusCode, res.json().name, res.json().field], [400, 'invalid_from_address', 'from']);
      assert.match(res.json().message, /deleted: it can send nothing/);
    }
  });
});
