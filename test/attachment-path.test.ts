// Attachments given by URL (`path`, as Resend documents them) are fetched once, when the message is
// accepted, from a real HTTP server on loopback, and stored like base64 ones; every failure is a clear
// error and nothing is stored.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { Resend } from 'resend';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { counts, message, send, sendBatch } from './helpers/emails.ts';

const PDF = Buffer.from('%PDF-1.4 a small report');
let files: Server;
let filesUrl: string;
let t: TestApp; // loopback allowed, as an operator's MAILROOM_WEBHOOK_ALLOW_CIDRS would
let guarded: TestApp; // the default: private addresses refused
let org: TestOrganization;
let guardedOrg: TestOrganization;
const requested: string[] = [];
let flakyCalls = 0;

before(async () => {
  files = createServer((req, res) => {
    requested.push(req.url!);
    if (req.url!.split('?')[0] === '/files/report.pdf')
      return res.writeHead(200, { 'content-type': 'application/pdf' }).end(PDF);
    if (req.url === '/files/moved') return res.writeHead(302, { location: '/files/report.pdf' }).end();
    if (req.url === '/files/loop') return res.writeHead(302, { location: '/files/loop' }).end();
    if (req.url === '/files/big')
      return res.writeHead(200, { 'content-type': 'text/plain' }).end(Buffer.alloc(5000, 'a'));
    if (req.url === '/files/untyped.csv') return res.writeHead(200).end('a,b\n1,2\n');
    if (req.url === '/files/flaky') {
      flakyCalls += 1;
      return flakyCalls === 1 ? res.writeHead(503).end('busy') : res.writeHead(200).end(PDF);
    }
    res.writeHead(404).end('not here');
  });
  await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
  filesUrl = `http://127.0.0.1:${(files.address() as { port: number }).port}`;
  t = await buildTestApp({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8', MAILROOM_ATTACHMENTS_MAX_BYTES: '4096' });
  org = await createTestOrganization(t.db, t.config, 'path');
  guarded = await buildTestApp();
  guardedOrg = await createTestOrganization(guarded.db, guarded.config, 'guarded');
});
after(async () => {
  await t?.close();
  await guarded?.close();
  files?.close();
});

async function attachmentsOf(id: string) {
  const res = await t.app.inject({ method: 'GET', url: `/emails/${id}/attachments`, headers: bearer(org.fullKey) });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data as { id: string; filename: string; content_type: string; size: number }[];
}

test('a path is fetched at acceptance: named by its URL, typed by the answer, stored byte for byte', async () => {
  const res = await send(
    t.app,
    org.sendingKey,
    message(org, { attachments: [{ path: `${filesUrl}/files/report.pdf` }] }),
  );
  assert.equal(res.statusCode, 200, res.body);
  const [stored] = await attachmentsOf(res.json().id);
  assert.deepEqual(
    [stored!.filename, stored!.content_type, stored!.size],
    ['report.pdf', 'application/pdf', PDF.length],
  );
  const one = await t.app.inject({
    method: 'GET',
    url: `/emails/${res.json().id}/attachments/${stored!.id}`,
    headers: bearer(org.fullKey),
  });
  const download = await t.app.inject({ method: 'GET', url: new URL(one.json().download_url).pathname });
  assert.deepEqual(download.rawPayload, PDF);
});

test('a filename and content_type given win over the URL and the answer; a redirect is followed', async () => {
  const res = await send(
    t.app,
    org.sendingKey,
    message(org, {
      attachments: [
        { path: `${filesUrl}/files/moved`, filename: 'Q3 report.pdf', content_type: 'application/x-report' },
        { path: `${filesUrl}/files/untyped.csv` },
      ],
    }),
  );
  assert.equal(res.statusCode, 200, res.body);
  const stored = await attachmentsOf(res.json().id);
  assert.deepEqual(
    stored.map((a) => [a.filename, a.content_type, a.size]),
    [
      ['Q3 report.pdf', 'application/x-report', PDF.length],
      ['untyped.csv', 'text/csv', 8], // no Content-Type in the answer: from the file name
    ],
  );
});

test('the unmodified Resend SDK sends an attachment by path', async () => {
  const base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  const resend = new Resend(org.sendingKey, { baseUrl: base });
  const { data, error } = await resend.emails.send({
    from: `Acme <billing@${org.domain}>`,
    to: 'customer@example.com',
    subject: 'Your invoice',
    text: 'attached',
    attachments: [{ path: `${filesUrl}/files/report.pdf`, filename: 'invoice.pdf' }],
  });
  assert.equal(error, null, JSON.stringify(error));
  const [stored] = await attachmentsOf(data!.id);
  assert.deepEqual([stored!.filename, stored!.size], ['invoice.pdf', PDF.length]);
});

test('every failure is a clear error naming the attachment, and nothing is stored', async () => {
  const before = await counts(t.db, org.id);
  const refused = async (attachments: unknown[], status: number, name: string, field: string, text: RegExp) => {
    const res = await send(t.app, org.sendingKey, message(org, { attachments }));
    assert.equal(res.statusCode, status, res.body);
    assert.equal(res.json().name, name, res.body);
    assert.equal(res.json().field, field);
    assert.match(res.json().message, text);
  };
  await refused(
    [{ path: `${filesUrl}/files/missing.pdf` }],
    400,
    'invalid_attachment',
    'attachments.0.path',
    /HTTP 404/,
  );
  await refused(
    [{ path: `${filesUrl}/files/loop` }],
    400,
    'invalid_attachment',
    'attachments.0.path',
    /more than 5 redirects/,
  );
  await refused([{ path: 'ftp://files.example.com/a.pdf' }], 400, 'invalid_attachment', 'attachments.0.path', /http/);
  await refused([{ path: 'not a url' }], 400, 'invalid_attachment', 'attachments.0.path', /not a URL/);
  await refused(
    [{ path: `http://user:secret@127.0.0.1:1/a.pdf` }],
    400,
    'invalid_attachment',
    'attachments.0.path',
    /user name or password/,
  );
  await refused(
    [{ path: `${filesUrl}/files/report.pdf`, content: 'aGk=' }],
    400,
    'validation_error',
    'attachments.0.path',
    /not both/,
  );
  // The limit counts what was given inline and what was fetched: 5,000 bytes are over 4,096.
  await refused([{ path: `${filesUrl}/files/big` }], 413, 'payload_too_large', 'attachments.0.path', /4096 bytes/);
  await refused(
    [
      { filename: 'a.txt', content: Buffer.alloc(4060).toString('base64') },
      { path: `${filesUrl}/files/report.pdf` },
      { path: `${filesUrl}/files/report.pdf` },
    ],
    413,
    'payload_too_large',
    'attachments.2.path', // 4,060 inline + 23 fit; 23 more do not
    /4096 bytes/,
  );
  await refused([{ content: 'aGk=' }], 400, 'missing_required_field', 'attachments.0.filename', /filename/);
  assert.deepEqual(await counts(t.db, org.id), before);
});

test('by default a path on a private address is refused before anything is sent to it', async () => {
  const seen = requested.length;
  const res = await send(
    guarded.app,
    guardedOrg.sendingKey,
    message(guardedOrg, { attachments: [{ path: `${filesUrl}/files/report.pdf` }] }),
  );
  assert.equal(res.statusCode, 400, res.body);
  assert.equal(res.json().name, 'invalid_attachment');
  assert.match(res.json().message, /an address Mailroom may not reach/);
  assert.equal(requested.length, seen, 'the file server got no request');
});

test('a file host in trouble (5xx) is a 503 remembered under no idempotency key: the retry fetches again', async () => {
  const body = message(org, { attachments: [{ path: `${filesUrl}/files/flaky`, filename: 'report.pdf' }] });
  const headers = { 'idempotency-key': `flaky-${process.pid}` };
  const first = await send(t.app, org.sendingKey, body, headers);
  assert.equal(first.statusCode, 503, first.body);
  assert.equal(first.json().name, 'service_unavailable');
  assert.match(first.json().message, /HTTP 503; try again later/);
  const retry = await send(t.app, org.sendingKey, body, headers);
  assert.equal(retry.statusCode, 200, retry.body);
  assert.equal(flakyCalls, 2);
});

test('one request fetches at most 20 files, a batch included; a refused entry costs no fetch', async () => {
  const seen = requested.length;
  const entry = (i: number) =>
    message(org, { to: `r${i}@example.com`, attachments: [{ path: `${filesUrl}/files/report.pdf?entry=${i}` }] });
  const res = await sendBatch(t.app, org.sendingKey, [
    message(org, { from: 'someone@not-ours.example', attachments: [{ path: `${filesUrl}/files/report.pdf?entry=x` }] }),
    ...Array.from({ length: 21 }, (_, i) => entry(i)),
  ]);
  assert.equal(res.statusCode, 200, res.body);
  const { data, errors } = res.json();
  assert.equal(data.filter((each: { object: string }) => each.object === 'email').length, 20);
  assert.deepEqual(
    errors.map((e: { index: number; message: string }) => [e.index, /verified domain|At most 20/.test(e.message)]),
    [
      [0, true],
      [21, true],
    ],
  );
  // Distinct files asked for (a client may repeat a GET on a connection the server closed).
  const fetched = new Set(requested.slice(seen).filter((url) => url.includes('entry=')));
  assert.equal(fetched.size, 20, 'the refused sender cost no fetch, the 21st file was not fetched');
  assert.ok(!fetched.has('/files/report.pdf?entry=x') && !fetched.has('/files/report.pdf?entry=20'));
});
