// A message's content for the dashboard: the raw source the capture transport stored
// (GET /emails/:id/raw), and the signed, sandboxed preview of its HTML (GET /emails/:id/preview, then
// GET /previews/:token over real HTTP).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { message, send } from './helpers/emails.ts';
import { freePort } from './helpers/server-process.ts';
import { waitFor } from './helpers/wait.ts';

const HTML =
  '<html><body><h1>Receipt</h1><img src="https://images.example.com/logo.png"><script>x()</script></body></html>';
const STRICT_POLICY =
  "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; frame-ancestors 'self'";
const REMOTE_POLICY =
  "sandbox; default-src 'none'; style-src 'unsafe-inline' https: http:; img-src data: https: http:; font-src data: https: http:; frame-ancestors 'self'";

let t: TestApp;
let delivery: TestDelivery;
let dataDir: string;
let base: string;
let a: TestOrganization;
let b: TestOrganization;
let sentId: string;
let othersId: string;

before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'mailroom-content-'));
  const port = await freePort();
  t = await buildTestApp({ MAILROOM_TRANSPORT: 'capture', MAILROOM_DATA_DIR: dataDir, PORT: String(port) });
  await t.app.listen({ port, host: '127.0.0.1' });
  base = `http://127.0.0.1:${port}`;
  delivery = await startTestDelivery(t);
  a = await createTestOrganization(t.db, t.config, 'a');
  b = await createTestOrganization(t.db, t.config, 'b');
  const sent = await send(t.app, a.fullKey, message(a, { subject: 'Your receipt', html: HTML }));
  const others = await send(t.app, b.fullKey, message(b, { subject: 'Theirs', html: '<p>theirs</p>' }));
  sentId = sent.json().id;
  othersId = others.json().id;
  await waitFor(async () => {
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM emails WHERE id = ANY($1::uuid[]) AND status = 'sent'`,
      [[sentId, othersId]],
    );
    return rows[0]!.n === 2;
  }, 15_000);
});
after(async () => {
  await delivery.stop();
  await t.close();
  await rm(dataDir, { recursive: true, force: true });
});

const get = (url: string, token: string) => t.app.inject({ method: 'GET', url, headers: bearer(token) });

test('GET /emails/:id/raw: the source the capture transport stored, as UTF-8 text', async () => {
  const res = await fetch(`${base}/emails/${sentId}/raw`, { headers: bearer(a.session) });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  const raw = await res.text();
  assert.match(raw, /^Subject: Your receipt\r$/m);
  assert.match(raw, /^DKIM-Signature: /m);
  assert.match(raw, /^To: someone@example\.com\r$/m);
  // The file as stored, byte for byte.
  assert.equal((await get(`/emails/${sentId}/raw`, a.fullKey)).body, raw);
});

test('GET /emails/:id/raw: 404 for another organization, a message not sent yet, or one pruned', async () => {
  const theirs = await get(`/emails/${othersId}/raw`, a.fullKey);
  assert.equal(theirs.statusCode, 404);
  assert.deepEqual([theirs.json().name, theirs.json().message], ['not_found', 'Email not found']);
  assert.equal((await get(`/emails/not-an-id/raw`, a.fullKey)).statusCode, 404);

  const scheduled = await send(
    t.app,
    a.fullKey,
    message(a, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() }),
  );
  const notYet = await get(`/emails/${scheduled.json().id}/raw`, a.fullKey);
  assert.equal(notYet.statusCode, 404);
  assert.equal(notYet.json().name, 'not_found');
  assert.match(notYet.json().message, /only the capture transport/);

  const pruned = await send(t.app, a.fullKey, message(a));
  await t.db.query('UPDATE emails SET body_pruned_at = now() WHERE id = $1', [pruned.json().id]);
  const gone = await get(`/emails/${pruned.json().id}/raw`, a.fullKey);
  assert.equal(gone.statusCode, 404);
  assert.match(gone.json().message, /deleted on .* retention period/);
});

test('GET /emails/:id/preview: a signed link serving the HTML sandboxed, over HTTP', async () => {
  const res = await get(`/emails/${sentId}/preview`, a.session);
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  assert.deepEqual(Object.keys(body).sort(), ['expires_at', 'html_url', 'object']);
  assert.equal(body.object, 'email_preview');
  assert.ok(body.html_url.startsWith(`${base}/previews/`), body.html_url);
  const expiresIn = Date.parse(body.expires_at) - Date.now();
  assert.ok(expiresIn > 3590_000 && expiresIn <= 3600_000, body.expires_at);

  const page = await fetch(body.html_url);
  assert.equal(page.status, 200);
  assert.equal(await page.text(), HTML);
  assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.equal(page.headers.get('content-security-policy'), STRICT_POLICY);
  assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
  assert.equal(page.headers.get('cache-control'), 'private, no-store');
  assert.equal(page.headers.get('x-frame-options'), null);

  const remote = await fetch(`${body.html_url}?remote_content=1`);
  assert.equal(remote.status, 200);
  assert.equal(remote.headers.get('content-security-policy'), REMOTE_POLICY);
  assert.equal(await remote.text(), HTML);
  const off = await fetch(`${body.html_url}?remote_content=0`);
  assert.equal(off.headers.get('content-security-policy'), STRICT_POLICY);
  const bad = await fetch(`${body.html_url}?remote_content=yes`);
  assert.equal(bad.status, 400);
});

test('/previews/:token refuses a tampered, expired, foreign or other-purpose token with 404 in the envelope', async () => {
  const { html_url: url } = (await get(`/emails/${sentId}/preview`, a.fullKey)).json();
  const token = url.slice(`${base}/previews/`.length) as string;
  const [payload, tag] = token.split('.') as [string, string];
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
  const forged = Buffer.from(JSON.stringify({ e: othersId, o: b.id, x: Math.floor(Date.now() / 1000) + 60 })).toString(
    'base64url',
  );
  const refused = [
    `${payload}.${flip(tag, 3)}`, // tag altered
    `${flip(payload, 5)}.${tag}`, // payload altered
    `${forged}.${tag}`, // another message, same tag
    t.app.signer.sign('preview', { e: sentId, o: a.id, x: Math.floor(Date.now() / 1000) - 1 }), // expired
    t.app.signer.sign('preview', { e: othersId, o: a.id, x: Math.floor(Date.now() / 1000) + 60 }), // b's message under a
    t.app.signer.sign('attachment', { e: sentId, o: a.id, x: Math.floor(Date.now() / 1000) + 60 }), // other purpose
    'garbage',
  ];
  for (const bad of refused) {
    const res = await fetch(`${base}/previews/${bad}`);
    assert.equal(res.status, 404, bad);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const error = (await res.json()) as { statusCode: number; name: string; message: string };
    assert.deepEqual([error.statusCode, error.name], [404, 'not_found']);
    assert.match(error.message, /not valid or has expired/);
  }
});

test("GET /emails/:id/preview: another organization's message is 404; no HTML or pruned content: html_url null", async () => {
  const theirs = await get(`/emails/${othersId}/preview`, a.session);
  assert.equal(theirs.statusCode, 404);
  assert.equal(theirs.json().name, 'not_found');

  const textOnly = await send(t.app, a.fullKey, message(a, { text: 'plain only' }));
  const noHtml = await get(`/emails/${textOnly.json().id}/preview`, a.fullKey);
  assert.equal(noHtml.statusCode, 200);
  assert.equal(noHtml.json().html_url, null);
  assert.ok(Date.parse(noHtml.json().expires_at) > Date.now());

  // A link handed out before retention pruned the content stops serving it.
  const withHtml = await send(t.app, a.fullKey, message(a, { html: '<p>soon gone</p>' }));
  const link = (await get(`/emails/${withHtml.json().id}/preview`, a.fullKey)).json().html_url as string;
  assert.equal((await fetch(link)).status, 200);
  await t.db.query('UPDATE emails SET html = NULL, text = NULL, body_pruned_at = now() WHERE id = $1', [
    withHtml.json().id,
  ]);
  assert.equal((await fetch(link)).status, 404);
  assert.equal((await get(`/emails/${withHtml.json().id}/preview`, a.fullKey)).json().html_url, null);
});
