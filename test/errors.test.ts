import { after, before, describe, test } from 'node:test';
import { connect } from 'node:net';
import assert from 'node:assert/strict';
import { loadConfig } from '../src/platform/config.ts';
import { buildApp, type App } from '../src/app.ts';
import { bearer, buildTestApp, createTestOrganization, type TestOrganization } from './helpers/app.ts';
import { openTestDatabase, type TestDatabase } from './helpers/database.ts';

let database: TestDatabase;
let app: App;
let org: TestOrganization;
const logged: string[] = [];

before(async () => {
  database = await openTestDatabase();
  const config = loadConfig({ MAILROOM_BODY_LIMIT_BYTES: '2048' });
  app = await buildApp({ db: database.db, config, logger: false });
  // A route that fails the way a bug would, to see what a 500 shows.
  app.get('/test/explode', { config: { access: 'public' } }, async (request) => {
    const withErrors = (_key: string, value: unknown) =>
      value instanceof Error ? { message: value.message, stack: value.stack } : value;
    request.log.error = ((obj: unknown) => logged.push(JSON.stringify(obj, withErrors))) as never;
    throw new Error('connection to 10.0.0.7 refused: password=hunter2');
  });
  await app.ready();
  org = await createTestOrganization(database.db, config);
});
after(async () => {
  await app.close();
  await database.close();
});

const isEnvelope = (body: Record<string, unknown>, statusCode: number, name: string) => {
  assert.equal(body.statusCode, statusCode);
  assert.equal(body.name, name);
  assert.equal(typeof body.message, 'string');
  assert.ok((body.message as string).length > 0);
};

test('an unknown route is 404 not_found in the envelope', async () => {
  const res = await app.inject({ method: 'GET', url: '/nope?x=1' });
  assert.equal(res.statusCode, 404);
  isEnvelope(res.json(), 404, 'not_found');
});

test('a body over the limit is 413 payload_too_large', async () => {
  const res = await app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: bearer(org.fullKey),
    payload: { name: 'x'.repeat(5000) },
  });
  assert.equal(res.statusCode, 413);
  isEnvelope(res.json(), 413, 'payload_too_large');
});

test('malformed JSON is 400 validation_error', async () => {
  const res = await app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: { ...bearer(org.fullKey), 'content-type': 'application/json' },
    payload: '{"name": ',
  });
  assert.equal(res.statusCode, 400);
  isEnvelope(res.json(), 400, 'validation_error');
});

test('a body that is not JSON is 400 validation_error', async () => {
  const res = await app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: { ...bearer(org.fullKey), 'content-type': 'text/plain' },
    payload: 'name=x',
  });
  assert.equal(res.statusCode, 400);
  isEnvelope(res.json(), 400, 'validation_error');
});

test('a missing field is 400 missing_required_field naming it', async () => {
  const res = await app.inject({ method: 'POST', url: '/api-keys', headers: bearer(org.fullKey), payload: {} });
  assert.equal(res.statusCode, 400);
  isEnvelope(res.json(), 400, 'missing_required_field');
  assert.equal(res.json().field, 'name');
});

test('an unknown field and a wrong type are 400 validation_error naming the field', async () => {
  const extra = await app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: bearer(org.fullKey),
    payload: { name: 'k', nmae: 'typo' },
  });
  isEnvelope(extra.json(), 400, 'validation_error');
  assert.equal(extra.json().field, 'nmae');
  const wrong = await app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: bearer(org.fullKey),
    payload: { name: 'k', permission: 'everything' },
  });
  isEnvelope(wrong.json(), 400, 'validation_error');
  assert.equal(wrong.json().field, 'permission');
  const notObject = await app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: bearer(org.fullKey),
    payload: [1, 2],
  });
  isEnvelope(notObject.json(), 400, 'validation_error');
});

test('a 500 shows no internals, names the request id, and logs the error', async () => {
  const res = await app.inject({ method: 'GET', url: '/test/explode' });
  assert.equal(res.statusCode, 500);
  isEnvelope(res.json(), 500, 'application_error');
  assert.doesNotMatch(res.body, /hunter2|10\.0\.0\.7|Error:|at /);
  const requestId = res.headers['x-request-id'] as string;
  assert.match(requestId, /^[0-9a-f-]{36}$/);
  assert.ok(res.json().message.includes(requestId));
  assert.ok(logged.some((line) => line.includes('hunter2') && line.includes(requestId)));
});

test('an empty body with Content-Type application/json is no body (SDKs send it on bodiless POSTs)', async () => {
  const logout = await app.inject({
    method: 'POST',
    url: '/auth/logout',
    headers: { ...bearer(org.session), 'content-type': 'application/json' },
    payload: '',
  });
  assert.equal(logout.statusCode, 200, logout.body);
  const needsBody = await app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: { ...bearer(org.fullKey), 'content-type': 'application/json' },
    payload: '',
  });
  assert.equal(needsBody.statusCode, 400);
  isEnvelope(needsBody.json(), 400, 'validation_error');
});

test('/readyz is 503 service_unavailable when the database does not answer; /healthz still 200', async () => {
  const own = await openTestDatabase();
  const lonely = await buildApp({ db: own.db, config: loadConfig({}), logger: false });
  await own.close();
  const ready = await lonely.inject({ method: 'GET', url: '/readyz' });
  assert.equal(ready.statusCode, 503);
  isEnvelope(ready.json(), 503, 'service_unavailable');
  assert.equal((await lonely.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  await lonely.close();
});

describe('requests Node refuses before a route sees them', () => {
  test('a client that trickles its body is cut off with 408 in the envelope; a malformed request gets 400', async () => {
    const t = await buildTestApp({ MAILROOM_REQUEST_TIMEOUT_MS: '1000' });
    try {
      const address = new URL(await t.app.listen({ port: 0, host: '127.0.0.1' }));
      const exchange = (request: string, waitMs: number) =>
        new Promise<{ answer: string; closedAfterMs: number }>((resolve, reject) => {
          const started = Date.now();
          const socket = connect(Number(address.port), '127.0.0.1', () => socket.write(request));
          let answer = '';
          socket.on('data', (chunk) => (answer += chunk.toString()));
          socket.on('close', () => resolve({ answer, closedAfterMs: Date.now() - started }));
          socket.on('error', reject);
          setTimeout(() => socket.destroy(), waitMs).unref();
        });
      // 100 bytes announced, 2 sent, and then nothing.
      const slow = await exchange(
        'POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"',
        10_000,
      );
      assert.match(slow.answer, /^HTTP\/1\.1 408 /);
      assert.deepEqual(JSON.parse(slow.answer.slice(slow.answer.indexOf('\r\n\r\n') + 4)), {
        statusCode: 408,
        name: 'request_timeout',
        message: 'The request did not arrive in time',
      });
      assert.ok(slow.closedAfterMs < 5000, `cut off after ${slow.closedAfterMs} ms`);

      const malformed = await exchange('GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0000b\r\n\r\n', 5000);
      assert.match(malformed.answer, /^HTTP\/1\.1 400 /);
      assert.equal(
        JSON.parse(malformed.answer.slice(malformed.answer.indexOf('\r\n\r\n') + 4)).name,
        'validation_error',
      );
    } finally {
      await t.close();
    }
  });
});
