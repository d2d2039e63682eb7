// The documentation served at /guide: every docs/*.md as a page with anchors on its headings, its
// screenshots, no script allowed, and nothing outside docs/ reachable. Requests through inject.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildOpsApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/platform/config.ts';
import { DOCS_DIR, docsRoutes, headingAnchor } from '../src/dashboard/docs-routes.ts';
import { openTestDatabase, type TestDatabase } from './helpers/database.ts';

let database: TestDatabase;
let dir: string;
const apps: App[] = [];

before(async () => {
  database = await openTestDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'mailroom-docs-'));
  await mkdir(path.join(dir, 'screenshots'));
  await writeFile(
    path.join(dir, 'guide.md'),
    '# The guide\n\nSee [the other page](other.md#why-it-matters).\n\n## Why it matters\n\n## Why it matters\n\n<script>alert(1)</script>\n\n![A picture](screenshots/shot.png)\n',
  );
  await writeFile(path.join(dir, 'other.md'), '# Another page\n');
  await writeFile(path.join(dir, 'screenshots', 'shot.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  await writeFile(path.join(dir, 'secret.txt'), 'not documentation');
});
after(async () => {
  for (const app of apps) await app.close();
  await database.close();
  await rm(dir, { recursive: true, force: true });
});

async function appServing(directory: string): Promise<App> {
  const app = await buildOpsApp({
    db: database.db,
    config: loadConfig({ MAILROOM_LOG_LEVEL: 'silent' }),
    logger: false,
  });
  await app.register(docsRoutes(directory));
  apps.push(app);
  return app;
}

test('a page is its Markdown as HTML, headings with anchors, under a policy that runs no script', async () => {
  const app = await appServing(dir);
  for (const url of ['/guide/guide', '/guide/guide.md']) {
    const res = await app.inject({ method: 'GET', url });
    assert.equal(res.statusCode, 200, url);
    assert.match(res.headers['content-type'] as string, /^text\/html/);
    assert.match(res.headers['content-security-policy'] as string, /default-src 'none'/);
    assert.doesNotMatch(res.headers['content-security-policy'] as string, /script-src/);
    assert.match(res.body, /<title>The guide · Mailroom documentation<\/title>/);
    assert.match(res.body, /<h1 id="the-guide">The guide<\/h1>/);
    assert.match(res.body, /<h2 id="why-it-matters">Why it matters<\/h2>/);
    assert.match(res.body, /<h2 id="why-it-matters-1">Why it matters<\/h2>/, 'a repeated heading gets its own anchor');
    assert.match(res.body, /<a href="other\.md#why-it-matters">/);
    assert.match(res.body, /<img src="screenshots\/shot\.png" alt="A picture">/);
  }
  const index = await app.inject({ method: 'GET', url: '/guide' });
  assert.match(index.body, /<a href="\/guide\/other">Another page<\/a>/);
  assert.match(index.body, /<a href="\/guide\/guide">The guide<\/a>/);
  const image = await app.inject({ method: 'GET', url: '/guide/screenshots/shot.png' });
  assert.equal(image.statusCode, 200);
  assert.equal(image.headers['content-type'], 'image/png');
  const style = await app.inject({ method: 'GET', url: '/guide/style.css' });
  assert.match(style.headers['content-type'] as string, /^text\/css/);
});

test('nothing outside docs/ is reachable: unknown pages, other files and paths are 404 in the envelope', async () => {
  const app = await appServing(dir);
  for (const url of [
    '/guide/missing',
    '/guide/secret.txt',
    '/guide/..%2Fsecret.txt',
    '/guide/screenshots/missing.png',
    '/guide/screenshots/..%2F..%2Fguide.md',
    '/guide/screenshots/..%2Fguide.md',
  ]) {
    const res = await app.inject({ method: 'GET', url });
    assert.equal(res.statusCode, 404, url);
    assert.equal(res.json().name, 'not_found', url);
  }
});

test("the project's own documentation is served whole: every page, and every screenshot it shows", async () => {
  const app = await appServing(DOCS_DIR);
  const pages = (await readdir(DOCS_DIR)).filter((name) => name.endsWith('.md'));
  assert.ok(pages.length > 10);
  for (const name of pages) {
    const res = await app.inject({ method: 'GET', url: `/guide/${name.replace(/\.md$/, '')}` });
    assert.equal(res.statusCode, 200, name);
    for (const [, image] of res.body.matchAll(/<img src="([^"]+)"/g)) {
      const shown = await app.inject({ method: 'GET', url: `/guide/${image!}` });
      assert.equal(shown.statusCode, 200, `${name} shows ${image}`);
    }
  }
});

test("anchors are GitHub's: lower case, punctuation dropped, spaces as dashes", () => {
  assert.equal(headingAnchor('Dark theme and accessibility'), 'dark-theme-and-accessibility');
  assert.equal(headingAnchor('API keys & `tokens`: what, why?'), 'api-keys--tokens-what-why');
  assert.equal(headingAnchor('Topics & contacts'), 'topics--contacts');
});
