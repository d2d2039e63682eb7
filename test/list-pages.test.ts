// Resend's list pages on domains, API keys, templates and topics: `limit` with `after` or `before`,
// `has_more`, and the whole list in one answer when no limit is given.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';

let t: TestApp;
let org: TestOrganization;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'pages');
});
after(() => t.close());

async function call(method: string, url: string, payload?: object) {
  return t.app.inject({ method, url, headers: bearer(org.fullKey), ...(payload === undefined ? {} : { payload }) });
}

interface ListBody {
  object: string;
  has_more: boolean;
  data: Array<{ id: string }>;
}
async function list(url: string): Promise<ListBody> {
  const res = await call('GET', url);
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/** Five more of a resource, each created after the one before (created_at is the order's key). */
const resources: Array<{ path: string; create: (n: number) => object; newestFirst: boolean }> = [
  { path: '/domains', create: (n) => ({ name: `page${n}-${process.pid}.example.org` }), newestFirst: true },
  { path: '/api-keys', create: (n) => ({ name: `key ${n}` }), newestFirst: true },
  { path: '/templates', create: (n) => ({ name: `template ${n}`, html: `<p>${n}</p>` }), newestFirst: true },
  { path: '/topics', create: (n) => ({ name: `topic ${n}`, default_subscription: 'opt_in' }), newestFirst: false },
];

for (const resource of resources) {
  test(`GET ${resource.path} pages with limit, after and before`, async () => {
    for (let n = 0; n < 5; n += 1) {
      const res = await call('POST', resource.path, resource.create(n));
      assert.equal(res.statusCode, 201, res.body);
    }
    const whole = await list(resource.path);
    assert.equal(whole.object, 'list');
    assert.equal(whole.has_more, false);
    assert.ok(whole.data.length >= 5);
    const ids = whole.data.map((item) => item.id);

    const first = await list(`${resource.path}?limit=2`);
    assert.deepEqual(
      first.data.map((item) => item.id),
      ids.slice(0, 2),
    );
    assert.equal(first.has_more, true);
    const second = await list(`${resource.path}?limit=2&after=${ids[1]}`);
    assert.deepEqual(
      second.data.map((item) => item.id),
      ids.slice(2, 4),
    );
    const last = await list(`${resource.path}?limit=100&after=${ids[ids.length - 3]}`);
    assert.deepEqual(
      last.data.map((item) => item.id),
      ids.slice(-2),
    );
    assert.equal(last.has_more, false);
    // `before` gives the page just before the cursor, in the list's own order.
    const back = await list(`${resource.path}?limit=2&before=${ids[3]}`);
    assert.deepEqual(
      back.data.map((item) => item.id),
      ids.slice(1, 3),
    );
    assert.equal(back.has_more, true);
  });
}

test('a cursor that names nothing in the list, both cursors, or a limit out of range is a 400', async () => {
  for (const url of [
    '/domains?after=00000000-0000-4000-8000-000000000000',
    '/topics?before=not-an-id',
    '/api-keys?after=a&before=b',
    '/templates?limit=0',
    '/templates?limit=101',
    '/topics?limit=ten',
  ]) {
    const res = await call('GET', url);
    assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
    assert.equal(res.json().name, 'validation_error', url);
  }
  // Another organization's domain is not a cursor here.
  const other = await createTestOrganization(t.db, t.config, 'pages-other');
  const theirs = await t.app.inject({ method: 'GET', url: '/domains', headers: bearer(other.fullKey) });
  const res = await call('GET', `/domains?after=${theirs.json().data[0].id}`);
  assert.equal(res.statusCode, 400, res.body);
  assert.equal(res.json().field, 'after');
});

test('newest first: the order Resend lists domains, API keys and templates in', async () => {
  for (const resource of resources.filter((r) => r.newestFirst)) {
    const res = await call('POST', resource.path, resource.create(99));
    const newest = await list(`${resource.path}?limit=1`);
    assert.equal(newest.data[0]!.id, res.json().id, resource.path);
  }
});
