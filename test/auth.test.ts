import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { resolveBearer } from '../src/tenancy/credentials.ts';
import { hashPassword, verifyPassword } from '../src/tenancy/passwords.ts';
import type { Queryable } from '../src/platform/db/database.ts';

let t: TestApp;
let org: TestOrganization;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config);
});
after(() => t.close());

describe('passwords', () => {
  test('are hashed with argon2id in PHC form, salted, and verified', async () => {
    const hash = await hashPassword('correct horse battery staple');
    assert.match(hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    assert.notEqual(hash, await hashPassword('correct horse battery staple'));
    assert.equal(await verifyPassword('correct horse battery staple', hash), true);
    assert.equal(await verifyPassword('correct horse battery stapler', hash), false);
    assert.equal(await verifyPassword('anything', 'not a hash'), false);
  });

  test('are never stored in clear', async () => {
    const { rows } = await t.db.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE email = $1', [
      org.userEmail,
    ]);
    assert.ok(rows[0]!.password_hash.startsWith('$argon2id$'));
    assert.ok(!rows[0]!.password_hash.includes(org.password));
  });
});

describe('login and logout', () => {
  const login = (email: string, password: string) =>
    t.app.inject({ method: 'POST', url: '/auth/login', payload: { email, password } });

  test('a right email and password give a session token that works', async () => {
    const res = await login(org.userEmail.toUpperCase(), org.password);
    assert.equal(res.statusCode, 200);
    const { token, expires_at } = res.json();
    assert.match(token, /^mrs_[A-Za-z0-9_-]{43}$/);
    assert.ok(new Date(expires_at).getTime() > Date.now() + 160 * 3600_000);
    const keys = await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(token) });
    assert.equal(keys.statusCode, 200);
  });

  test('a wrong password and an unknown email read the same', async () => {
    const wrong = await login(org.userEmail, 'wrong password!!');
    const unknown = await login('nobody@nowhere.example', org.password);
    for (const res of [wrong, unknown]) {
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().name, 'invalid_credentials');
    }
    assert.equal(wrong.json().message, unknown.json().message);
  });

  test('logout ends the session', async () => {
    const { token } = (await login(org.userEmail, org.password)).json();
    const out = await t.app.inject({ method: 'POST', url: '/auth/logout', headers: bearer(token) });
    assert.equal(out.statusCode, 200);
    const again = await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(token) });
    assert.equal(again.statusCode, 401);
    assert.equal(again.json().name, 'invalid_api_key');
  });

  test('an expired session is refused', async () => {
    const { token } = (await login(org.userEmail, org.password)).json();
    await t.db.query("UPDATE sessions SET expires_at = now() - interval '1 second'");
    const res = await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(token) });
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().name, 'invalid_api_key');
  });
});

describe('bearer tokens', () => {
  test('malformed Authorization headers are 401 invalid_api_key, a missing one missing_api_key', async () => {
    for (const authorization of [
      'Bearer',
      'Basic abc',
      `Bearer ${org.fullKey} extra`,
      `Token ${org.fullKey}`,
      'Bearer \u0000',
    ]) {
      const res = await t.app.inject({ method: 'GET', url: '/api-keys', headers: { authorization } });
      assert.equal(res.statusCode, 401, authorization);
      assert.equal(res.json().name, 'invalid_api_key', authorization);
    }
    const none = await t.app.inject({ method: 'GET', url: '/api-keys' });
    assert.equal(none.json().name, 'missing_api_key');
  });

  test('a known and an unknown token cost the same: one query on the token hash', async () => {
    // Timing is measured in bench/, not here; this pins the reason it is flat: the same single
    // indexed look-up runs whatever the token, with no early exit on its shape or prefix.
    const seen: Array<{ text: string; params: readonly unknown[] | undefined }> = [];
    const counting: Queryable = {
      query: (text, params) => {
        seen.push({ text, params });
        return t.db.query(text, params);
      },
    };
    for (const token of [org.fullKey, 'mr_unknown', 'garbage', org.session]) {
      await resolveBearer(counting, `Bearer ${token}`).catch(() => {});
    }
    await resolveBearer(counting, 'Basic xyz').catch(() => {});
    assert.equal(seen.length, 5);
    assert.equal(new Set(seen.map((q) => q.text)).size, 1);
    for (const q of seen) assert.match(String(q.params?.[0]), /^[0-9a-f]{64}$/);
  });
});

describe('API keys', () => {
  test('are created with a recognisable prefix, shown once, stored as SHA-256, listed without tokens', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api-keys',
      headers: bearer(org.fullKey),
      payload: { name: 'ci', permission: 'sending_access' },
    });
    assert.equal(res.statusCode, 201);
    const key = res.json();
    assert.match(key.token, /^mr_[A-Za-z0-9_-]{43}$/);
    assert.equal(key.permission, 'sending_access');
    const stored = await t.db.query<{ token_hash: string }>('SELECT token_hash FROM api_keys WHERE id = $1', [key.id]);
    assert.match(stored.rows[0]!.token_hash, /^[0-9a-f]{64}$/);
    const list = await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(org.fullKey) });
    assert.ok(list.json().data.some((k: { id: string }) => k.id === key.id));
    assert.doesNotMatch(list.body, /mr_[A-Za-z0-9_-]{43}/);
    assert.doesNotMatch(list.body, /token/);
  });

  test('a permission defaults to full_access', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api-keys',
      headers: bearer(org.fullKey),
      payload: { name: 'd' },
    });
    assert.equal(res.json().permission, 'full_access');
  });

  test('a revoked key stops working at once and leaves the list', async () => {
    const key = (
      await t.app.inject({ method: 'POST', url: '/api-keys', headers: bearer(org.fullKey), payload: { name: 'gone' } })
    ).json();
    assert.equal((await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(key.token) })).statusCode, 200);
    const del = await t.app.inject({ method: 'DELETE', url: `/api-keys/${key.id}`, headers: bearer(org.fullKey) });
    assert.deepEqual(del.json(), { object: 'api_key', id: key.id, deleted: true });
    const after = await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(key.token) });
    assert.equal(after.statusCode, 401);
    assert.equal(after.json().name, 'invalid_api_key');
    const list = await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(org.fullKey) });
    assert.ok(!list.json().data.some((k: { id: string }) => k.id === key.id));
    const twice = await t.app.inject({ method: 'DELETE', url: `/api-keys/${key.id}`, headers: bearer(org.fullKey) });
    assert.equal(twice.statusCode, 404);
  });

  test('a malformed id is 404, not an error', async () => {
    const res = await t.app.inject({ method: 'DELETE', url: '/api-keys/not-a-uuid', headers: bearer(org.fullKey) });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().name, 'not_found');
  });
});
