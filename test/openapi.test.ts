import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { DASHBOARD_PATHS } from '../src/dashboard/dashboard-routes.ts';
import { DOCS_PATHS } from '../src/dashboard/docs-routes.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(() => t.close());

test('/openapi.json describes every route, generated from the route schemas', async () => {
  const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
  assert.equal(res.statusCode, 200);
  const doc = res.json();
  assert.equal(doc.openapi, '3.1.0');
  // The document itself and the dashboard's page and files are not API operations.
  const notOperations = new Set<string>(['/openapi.json', ...DASHBOARD_PATHS, ...DOCS_PATHS]);
  for (const route of t.app.routeList.filter((r) => !notOperations.has(r.url))) {
    const path = route.url.replace(/:(\w+)/g, '{$1}');
    assert.ok(
      doc.paths[path]?.[route.method.toLowerCase()],
      `${route.method} ${path} is missing from the OpenAPI document`,
    );
  }
  const send = doc.paths['/emails'].post;
  // from may come from the template a message is sent with.
  assert.deepEqual(send.requestBody.content['application/json'].schema.required, ['to']);
  assert.deepEqual(doc.paths['/healthz'].get.security, [], 'public routes need no credential');
  assert.ok(doc.components.securitySchemes.bearer);
});

test('the browsable reference is served at /docs', async () => {
  const res = await t.app.inject({ method: 'GET', url: '/docs' });
  assert.equal(res.statusCode, 200);
  assert.match(res.headers['content-type'] as string, /text\/html/);
  assert.match(res.body, /swagger/i);
});
