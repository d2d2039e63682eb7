// The API request log: every request made with an API key is recorded (method, path, status, key,
// duration, user agent, bodies with secrets and content redacted), written in batches off the request's
// path, read with Resend's GET /logs and GET /logs/:id (checked against Resend's OpenAPI document and
// through the unmodified SDK), scoped to the organization, and pruned after MAILROOM_RETENTION_DAYS.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send, sendBatch } from './helpers/emails.ts';
import { responseProblems } from './helpers/resend-openapi.ts';
import { FLUSH_DELAY_MS, RequestLogRecorder } from '../src/request-log/recorder.ts';
import { loggedBody, loggedBodyText, MAX_BODY_BYTES, REDACTED } from '../src/request-log/redact.ts';
import { pruneAll } from '../src/retention/prune.ts';
import { waitFor } from './helpers/wait.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;

before(async () => {
  // Webhook endpoints on loopback are allowed (one is created below).
  t = await buildTestApp({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
  org = await createTestOrganization(t.db, t.config, 'logs');
  other = await createTestOrganization(t.db, t.config, 'logs-other');
});
after(() => t.close());

const get = (url: string, token = org.fullKey) => t.app.inject({ method: 'GET', url, headers: bearer(token) });

/** A read that is checked against Resend's schema for it (every answer of GET /logs*). */
async function read(url: string, token = org.fullKey) {
  const res = await get(url, token);
  assert.deepEqual(responseProblems('GET', url, res.statusCode, res.json()), [], `${url}: ${res.body}`);
  return res;
}

/** The newest entry of the organization whose endpoint is `endpoint`, once written. */
async function newest(endpoint: string, token = org.fullKey) {
  await t.app.requestLog.flush();
  const list = (await read(`/logs?endpoint=${encodeURIComponent(endpoint)}&limit=1`, token)).json();
  assert.ok(list.data[0], `an entry for ${endpoint}`);
  return (await read(`/logs/${list.data[0].id}`, token)).json();
}

test('a send is recorded with its key, status, duration and user agent; content and secrets are redacted', async () => {
  const payload = message(org, {
    subject: 'Your invoice',
    html: '<p>Secret invoice</p>',
    text: 'Secret invoice',
    headers: { 'X-Customer': 'Ann' },
    attachments: [{ filename: 'invoice.pdf', content: Buffer.from('%PDF private').toString('base64') }],
    tags: [{ name: 'kind', value: 'invoice' }],
  });
  const res = await t.app.inject({
    method: 'POST',
    url: '/emails',
    headers: { ...bearer(org.fullKey), 'user-agent': 'billing-service/2.1' },
    payload,
  });
  assert.equal(res.statusCode, 200, res.body);
  const entry = await newest('/emails');
  const keyId = (
    await t.db.query<{ id: string }>("SELECT id FROM api_keys WHERE organization_id = $1 AND name = 'full'", [org.id])
  ).rows[0]!.id;
  assert.equal(entry.object, 'log');
  assert.equal(entry.method, 'POST');
  assert.equal(entry.endpoint, '/emails');
  assert.equal(entry.response_status, 200);
  assert.equal(entry.user_agent, 'billing-service/2.1');
  assert.deepEqual(entry.api_key, { id: keyId, name: 'full' });
  assert.ok(Number.isInteger(entry.duration_ms) && entry.duration_ms >= 0);
  assert.ok(Math.abs(Date.parse(entry.created_at) - Date.now()) < 60_000);
  assert.deepEqual(entry.request_body, {
    from: `Acme <hello@${org.domain}>`,
    to: 'someone@example.com',
    subject: 'Your invoice',
    html: REDACTED,
    text: REDACTED,
    headers: { 'X-Customer': REDACTED },
    attachments: [{ filename: 'invoice.pdf', content: REDACTED }],
    tags: [{ name: 'kind', value: 'invoice' }],
  });
  assert.deepEqual(entry.response_body, res.json());
  assert.deepEqual(Object.keys(entry.request_body), Object.keys(payload), 'keys in the order sent');
  const stored = JSON.stringify(entry);
  for (const content of ['Secret invoice', Buffer.from('%PDF private').toString('base64'), 'Ann']) {
    assert.equal(stored.includes(content), false, content);
  }
});

test('a new API key token and a webhook signing secret never reach the log', async () => {
  const key = await t.app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: bearer(org.fullKey),
    payload: { name: 'ci' },
  });
  assert.equal(key.statusCode, 201);
  const keyEntry = await newest('/api-keys');
  assert.equal(keyEntry.response_body.token, REDACTED);
  assert.equal(keyEntry.response_body.id, key.json().id);
  assert.equal(JSON.stringify(keyEntry).includes(key.json().token), false);

  const hook = await t.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(org.fullKey),
    payload: { endpoint: 'http://127.0.0.1:9/hook', events: ['email.delivered'] },
  });
  assert.equal(hook.statusCode, 201, hook.body);
  const hookEntry = await newest('/webhooks');
  assert.equal(hookEntry.response_body.signing_secret, REDACTED);
  assert.equal(JSON.stringify(hookEntry).includes(hook.json().signing_secret), false);
  // An endpoint's URL may be its secret (and only sessions may list endpoints): its origin stays.
  assert.equal(hookEntry.request_body.endpoint, `http://127.0.0.1:9/${REDACTED}`);
  assert.equal(JSON.stringify(hookEntry).includes('/hook'), false);

  // An attachment's path may be a pre-signed link: its signature does not reach the log.
  const signed = 'https://127.0.0.1:1/a.pdf?X-Amz-Signature=abc123secret';
  await send(t.app, org.fullKey, message(org, { attachments: [{ path: signed }] }));
  const pathEntry = await newest('/emails');
  assert.equal(pathEntry.request_body.attachments[0].path, `https://127.0.0.1:1/${REDACTED}`);
  assert.equal(JSON.stringify(pathEntry).includes('abc123secret'), false);
});

test('a refused body with text the database cannot store (NUL, a lone surrogate) is logged, and so are its neighbours', async () => {
  const before = (await read('/logs?limit=100')).json().data.length;
  const [bad, good] = await Promise.all([
    send(t.app, org.fullKey, { ...message(org), subject: 'nul \u0000 and \ud800 lone', 'x\u0000key': 1 }),
    get('/domains'),
  ]);
  assert.equal(bad.statusCode, 400, bad.body);
  assert.equal(good.statusCode, 200);
  const entry = await newest('/emails');
  assert.equal(entry.response_status, 400);
  assert.equal(entry.request_body.subject, 'nul \ufffd and \ufffd lone');
  assert.equal((await newest('/domains')).response_status, 200);
  assert.ok((await read('/logs?limit=100')).json().data.length >= before + 2);
});

test('a batch body (an array) is kept under `body`; refusals are recorded with their error', async () => {
  const batch = await sendBatch(t.app, org.fullKey, [message(org, { html: '<b>one</b>' }), message(org)]);
  assert.equal(batch.statusCode, 200, batch.body);
  const batchEntry = await newest('/emails/batch');
  assert.equal(batchEntry.request_body.body.length, 2);
  assert.equal(batchEntry.request_body.body[0].html, REDACTED);

  const invalid = await send(t.app, org.fullKey, { from: `a@${org.domain}`, subject: 'no recipient', text: 'x' });
  assert.equal(invalid.statusCode, 400);
  const invalidEntry = await newest('/emails');
  assert.equal(invalidEntry.response_status, 400);
  assert.equal(invalidEntry.response_body.name, invalid.json().name);
  assert.equal(invalidEntry.request_body.subject, 'no recipient', 'the body as sent, before validation');

  // A sending_access key refused a read is its organization's entry, with the refusal.
  const refused = await get('/domains', org.sendingKey);
  assert.equal(refused.statusCode, 401);
  const refusedEntry = await newest('/domains');
  assert.equal(refusedEntry.response_status, 401);
  assert.equal(refusedEntry.response_body.name, 'restricted_api_key');
  assert.equal(refusedEntry.api_key.name, 'sending');
});

test('sessions (the dashboard) and public routes are not recorded; unknown keys are nobody’s', async () => {
  await t.app.requestLog.flush();
  const count = async () =>
    (
      await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM request_logs WHERE organization_id = $1', [
        org.id,
      ])
    ).rows[0]!.n;
  const before = await count();
  assert.equal((await get('/domains', org.session)).statusCode, 200);
  assert.equal((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  assert.equal((await get('/domains', 'mr_' + 'x'.repeat(43))).statusCode, 401);
  await t.app.requestLog.flush();
  assert.equal(await count(), before);
});

test('GET /logs pages newest first with after and before, and filters by status class and path', async () => {
  const fresh = await createTestOrganization(t.db, t.config, 'pages');
  const paths = ['/domains', '/api-keys', '/topics', '/templates', '/contacts'];
  for (const path of paths) assert.equal((await get(path, fresh.fullKey)).statusCode, 200, path);
  assert.equal((await get('/emails/not-an-id', fresh.fullKey)).statusCode, 404);
  await t.app.requestLog.flush();

  const first = (await read('/logs?limit=2', fresh.fullKey)).json();
  assert.equal(first.object, 'list');
  assert.equal(first.has_more, true);
  assert.deepEqual(
    first.data.map((entry: { endpoint: string }) => entry.endpoint),
    ['/emails/not-an-id', '/contacts'],
  );
  const second = (await read(`/logs?limit=2&after=${first.data[1].id}`, fresh.fullKey)).json();
  assert.deepEqual(
    second.data.map((entry: { endpoint: string }) => entry.endpoint),
    ['/templates', '/topics'],
  );
  const back = (await read(`/logs?limit=2&before=${second.data[0].id}`, fresh.fullKey)).json();
  assert.deepEqual(back.data, first.data);

  const errors = (await read('/logs?status=4xx', fresh.fullKey)).json();
  assert.deepEqual(
    errors.data.map((entry: { response_status: number }) => entry.response_status),
    [404],
  );
  const exact = (await read('/logs?status=200&endpoint=/t', fresh.fullKey)).json();
  assert.deepEqual(
    exact.data.map((entry: { endpoint: string }) => entry.endpoint),
    ['/templates', '/topics'],
  );
  assert.equal((await read('/logs?status=2xx', fresh.fullKey)).json().data.length, 5);
  assert.equal((await read('/logs?endpoint=/d%25', fresh.fullKey)).json().data.length, 0, '% is literal');

  for (const url of [
    '/logs?after=nope',
    '/logs?limit=0',
    '/logs?status=abc',
    `/logs?after=${first.data[0].id}&before=${first.data[0].id}`,
  ]) {
    const res = await get(url, fresh.fullKey);
    assert.equal(res.statusCode, 400, url);
    assert.equal(res.json().name, 'validation_error', url);
  }
});

test('a sending_access key may not read the log; another organization’s entries are not found', async () => {
  const entry = await newest('/emails');
  const refused = await get('/logs', org.sendingKey);
  assert.equal(refused.statusCode, 401);
  assert.equal(refused.json().name, 'restricted_api_key');
  assert.equal((await get(`/logs/${entry.id}`, org.sendingKey)).statusCode, 401);

  const theirs = await get(`/logs/${entry.id}`, other.fullKey);
  assert.equal(theirs.statusCode, 404);
  assert.equal(theirs.json().name, 'not_found');
  assert.equal((await get('/logs/not-a-uuid')).statusCode, 404);
  await t.app.requestLog.flush();
  const list = (await read('/logs?limit=100', other.fullKey)).json();
  assert.equal(
    list.data.some((item: { id: string }) => item.id === entry.id),
    false,
  );
  // The session (the dashboard) reads the same log.
  assert.equal((await read(`/logs/${entry.id}`, org.session)).json().id, entry.id);
});

test('resend.logs.list and resend.logs.get through the unmodified SDK', async () => {
  const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
  const resend = new Resend(org.fullKey, { baseUrl: address });
  const sent = await resend.emails.send({ from: `a@${org.domain}`, to: 'sdk@example.com', subject: 'sdk', text: 'x' });
  assert.equal(sent.error, null, JSON.stringify(sent.error));
  await t.app.requestLog.flush();

  const list = await resend.logs.list({ limit: 5 });
  assert.equal(list.error, null, JSON.stringify(list.error));
  const entry = list.data!.data.find((item) => item.endpoint === '/emails' && item.method === 'POST')!;
  assert.ok(entry, 'the SDK’s send is listed');
  assert.match(entry.user_agent ?? '', /^resend-node:/);
  const one = await resend.logs.get(entry.id);
  assert.equal(one.error, null, JSON.stringify(one.error));
  assert.equal(one.data!.object, 'log');
  assert.deepEqual((one.data!.response_body as { id: string }).id, sent.data!.id);

  const missing = await resend.logs.get('00000000-0000-7000-8000-000000000000');
  assert.equal(missing.error?.name, 'not_found');
});

test('entries are pruned after MAILROOM_RETENTION_DAYS, counted from the request', async () => {
  const fresh = await createTestOrganization(t.db, t.config, 'prune');
  const recorder = t.app.requestLog;
  const realNow = recorder.now;
  const day = 86_400_000;
  try {
    recorder.now = () => new Date(Date.now() - 31 * day);
    assert.equal((await get('/domains', fresh.fullKey)).statusCode, 200);
    recorder.now = () => new Date(Date.now() - 29 * day);
    assert.equal((await get('/api-keys', fresh.fullKey)).statusCode, 200);
  } finally {
    recorder.now = realNow;
  }
  await recorder.flush();
  const endpoints = async () =>
    (await read('/logs', fresh.fullKey)).json().data.map((entry: { endpoint: string }) => entry.endpoint);
  assert.deepEqual(await endpoints(), ['/api-keys', '/domains']);
  const counts = await pruneAll(t.db, { retentionDays: 30, metadataRetentionDays: 90, dataDir: '/nonexistent' });
  assert.ok(counts.requestLogs >= 1);
  assert.deepEqual(await endpoints(), ['/api-keys']);
});

test('an answer does not wait for its entry; entries are written together, in one statement', async () => {
  const fresh = await createTestOrganization(t.db, t.config, 'later');
  const recorder = t.app.requestLog;
  const count = async () =>
    (
      await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM request_logs WHERE organization_id = $1', [
        fresh.id,
      ])
    ).rows[0]!.n;
  await recorder.flush();
  // Held in memory for as long as the test looks: the answers come back with nothing written.
  recorder.flushDelayMs = 60_000;
  try {
    const answers = await Promise.all(['/domains', '/api-keys', '/topics'].map((path) => get(path, fresh.fullKey)));
    assert.deepEqual(
      answers.map((res) => res.statusCode),
      [200, 200, 200],
    );
    assert.equal(await count(), 0, 'answered before anything was written');
  } finally {
    recorder.flushDelayMs = FLUSH_DELAY_MS;
  }
  await recorder.flush();
  assert.equal(await count(), 3);
  const { rows } = await t.db.query<{ batches: number }>(
    // Rows written by one statement share its transaction id.
    'SELECT count(DISTINCT xmin::text)::int AS batches FROM request_logs WHERE organization_id = $1',
    [fresh.id],
  );
  assert.equal(rows[0]!.batches, 1);

  // Without a flush, an entry is written a moment (FLUSH_DELAY_MS) after its answer.
  assert.equal((await get('/templates', fresh.fullKey)).statusCode, 200);
  await waitFor(async () => (await count()) === 4, 5000);
});

test('a removed key’s entries stay without it; a deleted organization’s entries go with it', async () => {
  const gone = await createTestOrganization(t.db, t.config, 'logs-gone');
  const made = await t.app.inject({
    method: 'POST',
    url: '/api-keys',
    headers: bearer(gone.fullKey),
    payload: { name: 'short-lived' },
  });
  const key = made.json() as { id: string; token: string };
  assert.equal((await get('/domains', key.token)).statusCode, 200);
  assert.equal((await get('/topics', gone.fullKey)).statusCode, 200);
  await t.app.requestLog.flush();
  const entries = async () =>
    (
      await t.db.query<{ endpoint: string; api_key_id: string | null }>(
        'SELECT endpoint, api_key_id FROM request_logs WHERE organization_id = $1 ORDER BY endpoint',
        [gone.id],
      )
    ).rows;
  assert.equal((await entries()).find((e) => e.endpoint === '/domains')?.api_key_id, key.id);

  // DELETE /api-keys/:id revokes a key and keeps its row (its entries keep naming it); a row removed
  // from the database takes its name off the entries.
  assert.equal(
    (await t.app.inject({ method: 'DELETE', url: `/api-keys/${key.id}`, headers: bearer(gone.fullKey) })).statusCode,
    200,
  );
  assert.equal((await entries()).find((e) => e.endpoint === '/domains')?.api_key_id, key.id);
  await t.db.query('DELETE FROM api_keys WHERE id = $1', [key.id]);
  assert.equal((await entries()).find((e) => e.endpoint === '/domains')?.api_key_id, null);
  assert.ok((await entries()).some((e) => e.endpoint === '/topics' && e.api_key_id !== null));

  await t.db.query('DELETE FROM organizations WHERE id = $1', [gone.id]);
  assert.deepEqual(await entries(), []);
});

test('the buffer is bounded: entries past it are dropped and counted, never held', async () => {
  const recorder = new RequestLogRecorder(t.db, { maxBufferedBytes: 4096, flushDelayMs: 60_000 });
  const entry = (i: number) => ({
    id: `00000000-0000-7000-8000-${String(i).padStart(12, '0')}`,
    organizationId: org.id,
    apiKeyId: null as unknown as string,
    method: 'GET',
    endpoint: `/bounded/${i}`,
    status: 200,
    durationMs: 1,
    userAgent: null,
    requestBody: null,
    responseBody: JSON.stringify({ note: 'x'.repeat(1000) }),
    createdAt: new Date(),
  });
  for (let i = 0; i < 10; i += 1) recorder.record(entry(i));
  assert.equal(recorder.dropped, 8, 'two entries of about 1.5 KiB fit in 4 KiB');
  await recorder.flush();
  const { rows } = await t.db.query<{ endpoint: string }>(
    "SELECT endpoint FROM request_logs WHERE endpoint LIKE '/bounded/%' ORDER BY endpoint",
  );
  assert.deepEqual(
    rows.map((row) => row.endpoint),
    ['/bounded/0', '/bounded/1'],
  );
  // Once written, the room is free again.
  recorder.record(entry(10));
  assert.equal(recorder.dropped, 8);
  await recorder.flush();
});

test('a write that fails drops only its own entry', async () => {
  const recorder = new RequestLogRecorder(t.db, { flushDelayMs: 60_000 });
  const base = {
    apiKeyId: null as unknown as string,
    method: 'GET',
    status: 200,
    durationMs: 1,
    userAgent: null,
    requestBody: null,
    responseBody: null,
    createdAt: new Date(),
  };
  recorder.record({ ...base, id: '00000000-0000-7000-8000-100000000001', organizationId: org.id, endpoint: '/ok/1' });
  // An entry the database refuses (here its id is not a UUID): the others of its statement are written.
  recorder.record({ ...base, id: 'not-a-uuid', organizationId: org.id, endpoint: '/refused' });
  // An organization that does not exist (deleted meanwhile): its entry is left out, not an error.
  recorder.record({
    ...base,
    id: '00000000-0000-7000-8000-100000000002',
    organizationId: '00000000-0000-7000-8000-999999999999',
    endpoint: '/gone',
  });
  recorder.record({ ...base, id: '00000000-0000-7000-8000-100000000003', organizationId: org.id, endpoint: '/ok/2' });
  await recorder.flush();
  assert.equal(recorder.dropped, 1);
  const { rows } = await t.db.query<{ endpoint: string }>(
    "SELECT endpoint FROM request_logs WHERE endpoint LIKE '/ok/%' OR endpoint IN ('/gone', '/refused') ORDER BY endpoint",
  );
  assert.deepEqual(
    rows.map((row) => row.endpoint),
    ['/ok/1', '/ok/2'],
  );
});

test('bodies are capped: long strings and lists are cut with a note, and the result stays an object', () => {
  const input = {
    note: 'y'.repeat(50_000),
    data: Array.from({ length: 500 }, (_, i) => ({ id: i, subject: `subject ${i}` })),
  };
  const big = loggedBody(input)!;
  // The text the log stores is that same body, cut or not.
  assert.deepEqual(JSON.parse(loggedBodyText(input)!), big);
  assert.deepEqual(JSON.parse(loggedBodyText({ to: 'a@example.com', html: '<p>x</p>' })!), {
    to: 'a@example.com',
    html: REDACTED,
  });
  const size = Buffer.byteLength(JSON.stringify(big));
  assert.ok(size <= MAX_BODY_BYTES, `${size} bytes`);
  const data = big.data as unknown[];
  assert.match(String(data.at(-1)), /^\[\d+ more items not kept\]$/);
  assert.deepEqual(data[0], { id: 0, subject: 'subject 0' });
  assert.match(big.note as string, /^y+… \[\d+ more characters not kept\]$/);
  // A cut never leaves half of a surrogate pair, nor does a header's name keep a NUL: neither can be stored.
  const emoji = loggedBody({ note: `${'y'.repeat(255)}${'😀'.repeat(20_000)}` })!;
  assert.doesNotMatch(emoji.note as string, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
  assert.deepEqual(loggedBody({ headers: { 'X-A\u0000': 'v' } }), { headers: { 'X-A\uFFFD': REDACTED } });
  assert.deepEqual(loggedBody([1, 2]), { body: [1, 2] });
  assert.equal(loggedBody(undefined), null);
  assert.deepEqual(
    loggedBody({ variables: [{ key: 'name', type: 'string' }] }),
    {
      variables: [{ key: 'name', type: 'string' }],
    },
    'template variable definitions are not content',
  );
  assert.deepEqual(loggedBody({ template: { id: 't', variables: { name: 'Ann' } }, password: 'p' }), {
    template: { id: 't', variables: { name: REDACTED } },
    password: REDACTED,
  });
});
