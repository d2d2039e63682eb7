// Serving the dashboard's build: only the files the build produced, with the security headers, and a
// clear message instead of a crash when the build is missing. No browser: requests through inject.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { buildOpsApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/platform/config.ts';
import { acceptsGzip, DASHBOARD_CSP, dashboardRoutes, NOT_BUILT_MESSAGE } from '../src/dashboard/dashboard-routes.ts';
import { openTestDatabase, type TestDatabase } from './helpers/database.ts';

let database: TestDatabase;
let dist: string;
const apps: App[] = [];

before(async () => {
  database = await openTestDatabase();
  dist = await mkdtemp(path.join(tmpdir(), 'mailroom-dist-'));
  await mkdir(path.join(dist, 'assets'));
  await writeFile(path.join(dist, 'index.html'), '<!doctype html><title>built</title>');
  await writeFile(path.join(dist, 'assets', 'index-abc123.js'), 'console.log(1)');
  await writeFile(path.join(dist, 'assets', 'index-abc123.css'), 'body{}');
  await writeFile(path.join(dist, 'secret.txt'), 'not an asset');
});
after(async () => {
  for (const app of apps) await app.close();
  await database.close();
  await rm(dist, { recursive: true, force: true });
});

async function appServing(directory: string): Promise<App> {
  const app = await buildOpsApp({
    db: database.db,
    config: loadConfig({ MAILROOM_LOG_LEVEL: 'silent' }),
    logger: false,
  });
  await app.register(dashboardRoutes(directory));
  apps.push(app);
  return app;
}

test('/ is the index with the policy and no caching; assets are cached for good', async () => {
  const app = await appServing(dist);
  const index = await app.inject({ method: 'GET', url: '/' });
  assert.equal(index.statusCode, 200);
  assert.equal(index.body, '<!doctype html><title>built</title>');
  assert.match(index.headers['content-type'] as string, /^text\/html/);
  assert.equal(index.headers['content-security-policy'], DASHBOARD_CSP);
  assert.equal(index.headers['x-content-type-options'], 'nosniff');
  assert.equal(index.headers['referrer-policy'], 'no-referrer');
  assert.equal(index.headers['cache-control'], 'no-cache');

  const script = await app.inject({ method: 'GET', url: '/assets/index-abc123.js' });
  assert.equal(script.statusCode, 200);
  assert.match(script.headers['content-type'] as string, /^text\/javascript/);
  assert.equal(script.headers['cache-control'], 'public, max-age=31536000, immutable');
  const style = await app.inject({ method: 'GET', url: '/assets/index-abc123.css' });
  assert.match(style.headers['content-type'] as string, /^text\/css/);
  const head = await app.inject({ method: 'HEAD', url: '/' });
  assert.equal(head.statusCode, 200);
});

test('scripts and styles go gzipped to a browser that takes gzip, and as they are to one that does not', async () => {
  const app = await appServing(dist);
  const gzipped = await app.inject({
    method: 'GET',
    url: '/assets/index-abc123.js',
    headers: { 'accept-encoding': 'gzip, deflate, br' },
  });
  assert.equal(gzipped.statusCode, 200);
  assert.equal(gzipped.headers['content-encoding'], 'gzip');
  assert.equal(gzipped.headers.vary, 'accept-encoding');
  assert.equal(gunzipSync(gzipped.rawPayload).toString(), 'console.log(1)');

  for (const encoding of [undefined, 'identity', 'gzip;q=0, identity', 'br']) {
    const plain = await app.inject({
      method: 'GET',
      url: '/assets/index-abc123.js',
      headers: encoding === undefined ? {} : { 'accept-encoding': encoding },
    });
    assert.equal(plain.headers['content-encoding'], undefined, String(encoding));
    assert.equal(plain.body, 'console.log(1)', String(encoding));
  }
});

test('Accept-Encoding is read as the standard says: names in any case, a q of 0 refuses', () => {
  assert.equal(acceptsGzip('GZIP'), true);
  assert.equal(acceptsGzip('br;q=1.0, gzip;q=0.5'), true);
  assert.equal(acceptsGzip('*'), true);
  assert.equal(acceptsGzip('gzip;q=0'), false);
  assert.equal(acceptsGzip('*;q=0'), false);
  assert.equal(acceptsGzip('gzip;q=0, *'), false);
  assert.equal(acceptsGzip('x-gzip'), false);
  assert.equal(acceptsGzip(''), false);
});

test('nothing outside the build is reachable: unknown files and paths are 404 in the envelope', async () => {
  const app = await appServing(dist);
  for (const url of [
    '/assets/missing.js',
    '/assets/..%2Fsecret.txt',
    '/assets/../secret.txt',
    '/secret.txt',
    '/index.html/x',
    '/nope?x=1',
  ]) {
    const res = await app.inject({ method: 'GET', url });
    assert.equal(res.statusCode, 404, url);
    assert.equal(res.json().name, 'not_found', url);
  }
});

test('without a build, / says how to build it and the API is unaffected', async () => {
  const app = await appServing(path.join(dist, 'not-there') + path.sep);
  const res = await app.inject({ method: 'GET', url: '/' });
  assert.equal(res.statusCode, 503);
  assert.match(res.headers['content-type'] as string, /^text\/plain/);
  assert.equal(res.body, NOT_BUILT_MESSAGE);
  assert.match(res.body, /npm run build:web/);
  assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  assert.equal((await app.inject({ method: 'GET', url: '/assets/index-abc123.js' })).statusCode, 404);
});
