// API keys, sending domains and inbound routes answered from memory, never a stale permission: forgotten at once in the
// process that changes them, on the change's notification in every other process (whatever made the
// change), and not cached at all while the process cannot hear notifications.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../src/platform/config.ts';
import { buildApp, type App } from '../src/app.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import type { Database } from '../src/platform/db/database.ts';
import { LookupCache, MAX_AGE_MS, lookupCache } from '../src/platform/db/lookup-cache.ts';
import { hashToken } from '../src/platform/tokens.ts';
import { bearer, createTestOrganization, type TestOrganization } from './helpers/app.ts';
import { onPostgres, openTestDatabase, type TestDatabase } from './helpers/database.ts';
import { message, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';
import { decideRecipient, routeMessage } from '../src/receiving/routes.ts';

const config = loadConfig({ MAILROOM_LOG_LEVEL: 'silent' });
let data: TestDatabase;
let app: App;

before(async () => {
  data = await openTestDatabase();
  app = await buildApp({ db: data.db, config, logger: false });
  await app.ready();
});
after(async () => {
  await app.close();
  await data.close();
});

const listKeys = (target: App, token: string) =>
  target.inject({ method: 'GET', url: '/api-keys', headers: bearer(token) });
const cachedKey = (db: Database, token: string) => lookupCache(db, 'api-keys').get(hashToken(token));

async function newKey(org: TestOrganization, permission = 'full_access'): Promise<{ id: string; token: string }> {
  const res = await app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: bearer(org.fullKey),
    payload: { name: 'cached', permission },
  });
  assert.equal(res.statusCode, 201, res.body);
  const body = res.json() as { id: string; token: string };
  return { id: body.id, token: body.token };
}

test('a key is served from memory once found; revoked, the very next request is refused', async () => {
  const org = await createTestOrganization(data.db, config, 'cache');
  const key = await newKey(org);
  assert.equal((await listKeys(app, key.token)).statusCode, 200);
  assert.ok(cachedKey(data.db, key.token), 'the key is cached after its first use');
  assert.equal((await listKeys(app, key.token)).statusCode, 200);

  const revoked = await app.inject({ method: 'DELETE', url: `/api-keys/${key.id}`, headers: bearer(org.fullKey) });
  assert.equal(revoked.statusCode, 200, revoked.body);
  assert.equal(cachedKey(data.db, key.token), undefined);
  const refused = await listKeys(app, key.token);
  assert.equal(refused.statusCode, 401);
  assert.equal(refused.json().name, 'invalid_api_key');
});

test('a change made behind the app’s back (SQL, another process) reaches the cache through its notification', async () => {
  const org = await createTestOrganization(data.db, config, 'cache');
  const key = await newKey(org, 'sending_access');
  assert.equal((await send(app, key.token, message(org))).statusCode, 200);
  assert.ok(cachedKey(data.db, key.token));
  // Not through revokeApiKey: the trigger on api_keys is what tells the listeners.
  await data.db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [key.id]);
  await waitFor(() => cachedKey(data.db, key.token) === undefined, 2000, 5);
  assert.equal((await send(app, key.token, message(org))).statusCode, 401);
});

test('a sending domain is served from memory; deleted, the next send from it is refused', async () => {
  const org = await createTestOrganization(data.db, config, 'cache');
  const domains = lookupCache(data.db, 'sending-domains');
  assert.equal((await send(app, org.sendingKey, message(org))).statusCode, 200);
  assert.ok(domains.get(`${org.id} ${org.domain}`));
  const { rows } = await data.db.query<{ id: string }>('SELECT id FROM domains WHERE organization_id = $1', [org.id]);
  const deleted = await app.inject({ method: 'DELETE', url: `/domains/${rows[0]!.id}`, headers: bearer(org.fullKey) });
  assert.equal(deleted.statusCode, 200, deleted.body);
  const refused = await send(app, org.sendingKey, message(org));
  assert.equal(refused.statusCode, 400, refused.body);
  assert.equal(refused.json().name, 'invalid_from_address');
});

test('tokens that are not keys are never cached: made-up tokens and sessions are looked up each time', async () => {
  const org = await createTestOrganization(data.db, config, 'cache');
  for (let i = 0; i < 20; i += 1) assert.equal((await listKeys(app, `mr_made_up_${i}`)).statusCode, 401);
  for (let i = 0; i < 20; i += 1) assert.equal(cachedKey(data.db, `mr_made_up_${i}`), undefined);
  assert.equal((await listKeys(app, org.session)).statusCode, 200);
  assert.equal(cachedKey(data.db, org.session), undefined);
});

test('a look-up in flight when the cache is emptied is not cached; nothing is cached while not listening', () => {
  const cache = new LookupCache<string>();
  cache.remember('a', 'A', cache.ticket());
  assert.equal(cache.get('a'), undefined, 'not listening yet: nothing cached');
  cache.setLive(true);
  const ticket = cache.ticket();
  cache.forget(); // a change arrives while the look-up is in flight
  cache.remember('a', 'A (read before the change)', ticket);
  assert.equal(cache.get('a'), undefined);
  cache.remember('a', 'A', cache.ticket());
  assert.equal(cache.get('a'), 'A');
  cache.setLive(false); // the listening connection dropped
  assert.equal(cache.get('a'), undefined);
  cache.remember('b', 'B', cache.ticket());
  assert.equal(cache.get('b'), undefined);
});

test('an answer is used for MAX_AGE_MS at most, even without a notification (one lost on a silently dropped connection)', (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
  const cache = new LookupCache<string>();
  cache.setLive(true);
  cache.remember('a', 'A', cache.ticket());
  t.mock.timers.tick(MAX_AGE_MS - 1);
  assert.equal(cache.get('a'), 'A');
  t.mock.timers.tick(2);
  assert.equal(cache.get('a'), undefined);
});

// Two processes need a shared server: PGlite is one process's database.
if (onPostgres) {
  test('two processes: a key revoked through one is refused by the other; a dropped listener caches nothing until it is back', async () => {
    const otherDb = openPostgres(data.url!, 3);
    const other = await buildApp({ db: otherDb, config, logger: false });
    await other.ready();
    try {
      const org = await createTestOrganization(data.db, config, 'cache2');
      const key = await newKey(org);
      assert.equal((await listKeys(other, key.token)).statusCode, 200);
      assert.ok(cachedKey(otherDb, key.token), 'the other process cached the key');
      const revoked = await app.inject({ method: 'DELETE', url: `/api-keys/${key.id}`, headers: bearer(org.fullKey) });
      assert.equal(revoked.statusCode, 200);
      await waitFor(() => cachedKey(otherDb, key.token) === undefined, 2000, 1);
      assert.equal((await listKeys(other, key.token)).statusCode, 401);

      // The other process's listening connection is cut: it stops caching at once, and starts again
      // once it has reconnected (it may have missed a change meanwhile, so it starts from nothing).
      const live = await newKey(org);
      assert.equal((await listKeys(other, live.token)).statusCode, 200);
      assert.ok(cachedKey(otherDb, live.token));
      const { rows } = await data.db.query<{ n: number }>(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND query = 'LISTEN "mailroom_lookups"' AND pid <> pg_backend_pid()`,
      );
      assert.equal(rows[0]!.n, 2, 'both apps listen');
      await waitFor(() => cachedKey(otherDb, live.token) === undefined, 2000, 5);
      assert.equal((await listKeys(other, live.token)).statusCode, 200);
      await waitFor(
        async () => (await listKeys(other, live.token)).statusCode === 200 && !!cachedKey(otherDb, live.token),
        5000,
        50,
      );
    } finally {
      await other.close();
      await otherDb.close();
    }
  });
}

test('inbound routes are answered from memory; a route added behind the app’s back applies once its notification arrives', async () => {
  const org = await createTestOrganization(data.db, config, 'cache-routes');
  await data.db.query('UPDATE domains SET receiving = true WHERE organization_id = $1', [org.id]);
  const receiving = lookupCache(data.db, 'receiving-domains');
  const routes = lookupCache(data.db, 'receiving-routes');
  const address = `someone@${org.domain}`;
  const served = async () => {
    assert.equal((await decideRecipient(data.db, address)).accept, true);
    assert.deepEqual(await routeMessage(data.db, org.id, [address], {}), {
      applied: [],
      forwardTo: [],
      webhookEndpointIds: [],
      forwardFrom: {},
    });
    return receiving.get(org.domain) !== undefined && routes.get(org.id) !== undefined;
  };
  // The set-up's own changes notify too, and empty the caches when they arrive: filled once they have.
  await waitFor(served, 2000, 20);
  await new Promise((resolve) => setTimeout(resolve, 200));
  await waitFor(served, 2000, 20);
  // Not through the API: the trigger on inbound_routes is what tells the listeners.
  await data.db.query(
    `INSERT INTO inbound_routes (organization_id, recipient_kind, recipient_pattern, actions)
     VALUES ($1, 'exact', $2, '[{"type": "reject", "message": "Gone"}]')`,
    [org.id, address],
  );
  await waitFor(() => receiving.get(org.domain) === undefined, 2000, 5);
  assert.deepEqual(await decideRecipient(data.db, address), { accept: false, code: 550, message: '5.7.1 Gone' });
  assert.equal(routes.get(org.id), undefined);
});
