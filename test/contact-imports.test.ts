// CSV contact imports (Resend's /contacts/imports) through the unmodified Resend SDK and plain HTTP: the
// column map, on_conflict, per-row errors with their rows, segments and topics, CSV quoting, a file
// streamed in chunks, refusals at upload, isolation between organizations, Idempotency-Key, and an
// import resumed after its server was killed with SIGKILL.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { Resend } from 'resend';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { assertRefused, checkedCaller, type CheckedAnswer } from './helpers/checked-calls.ts';
import { databaseForProcesses } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startServerProcess } from './helpers/server-process.ts';
import { waitFor } from './helpers/wait.ts';
import { runImport } from '../src/contacts/imports/run-import.ts';
import { startContactImports } from '../src/contacts/imports/start-imports.ts';

/** A multipart/form-data body as curl -F sends it. */
function multipart(fields: Record<string, string>, file?: string | Buffer, fileName = 'contacts.csv') {
  const boundary = `----mailroom${randomUUID()}`;
  const parts: Buffer[] = [];
  if (file !== undefined) {
    parts.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${fileName}"\r\n` +
          'Content-Type: text/csv\r\n\r\n',
      ),
      Buffer.from(file),
      Buffer.from('\r\n'),
    );
  }
  for (const [name, value] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

describe('contact imports', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let base: string;
  let resend: Resend;

  before(async () => {
    t = await buildTestApp();
    org = await createTestOrganization(t.db, t.config, 'imports');
    other = await createTestOrganization(t.db, t.config, 'other');
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
    resend = new Resend(org.fullKey, { baseUrl: base });
  });
  after(async () => {
    await t?.close();
  });

  const call = checkedCaller(
    () => base,
    () => org.fullKey,
  );

  /** POST /contacts/imports over HTTP; the answer's status and body. */
  async function upload(
    fields: Record<string, string>,
    file?: string | Buffer,
    { key = org.fullKey, idempotencyKey }: { key?: string; idempotencyKey?: string } = {},
  ): Promise<CheckedAnswer> {
    const { body, contentType } = multipart(fields, file);
    const res = await fetch(`${base}/contacts/imports`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': contentType,
        ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
      },
      body,
    });
    return { status: res.status, body: await res.json() };
  }

  /** Uploads and runs the import to its end (the job's handler, as the worker calls it). */
  async function imported(fields: Record<string, string>, file: string | Buffer, batchRows?: number) {
    const answer = await upload(fields, file);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    assert.deepEqual(Object.keys(answer.body).sort(), ['id', 'object']);
    assert.equal(answer.body.object, 'contact_import');
    assert.notEqual(await runImport(t.db, answer.body.id, { batchRows }), 'stopped');
    const view = await call('GET', `/contacts/imports/${answer.body.id}`);
    assert.equal(view.status, 200);
    return view.body;
  }

  async function contact(email: string) {
    const answer = await call('GET', `/contacts/${encodeURIComponent(email)}`);
    return answer.status === 200 ? answer.body : undefined;
  }

  async function errorsOf(id: string, query = '') {
    const answer = await call('GET', `/contacts/imports/${id}/errors${query}`);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    return answer.body as { has_more: boolean; data: Array<{ row: number; column: string | null; message: string }> };
  }

  test('through the SDK: the column map, segments and topics, then get and list', async () => {
    const plan = await call('POST', '/contact-properties', { key: 'plan', type: 'string' });
    const seats = await call('POST', '/contact-properties', { key: 'seats', type: 'number' });
    assert.equal(plan.status, 201);
    assert.equal(seats.status, 201);
    const segment = (await call('POST', '/segments', { name: 'Imported' })).body.id as string;
    const topic = (await call('POST', '/topics', { name: 'News', default_subscription: 'opt_out' })).body.id as string;
    const csv = [
      'Email,First Name,Last Name,Unsubscribed,Plan,Seats',
      'ada@sdk.example,Ada,Lovelace,false,pro,3',
      'Grace@SDK.example,Grace,Hopper,yes,free,',
    ].join('\n');
    const created = await resend.contacts.imports.create({
      file: new Blob([csv], { type: 'text/csv' }),
      columnMap: {
        email: 'Email',
        firstName: 'First Name',
        lastName: 'Last Name',
        unsubscribed: 'Unsubscribed',
        properties: { plan: { column: 'Plan', type: 'string' }, seats: { column: 'Seats', type: 'number' } },
      },
      onConflict: 'upsert',
      segments: [{ id: segment }],
      topics: [{ id: topic, subscription: 'opt_in' }],
    });
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;

    const queued = await resend.contacts.imports.get(id);
    assert.equal(queued.error, null, JSON.stringify(queued.error));
    assert.equal(queued.data!.status, 'queued');
    assert.equal(queued.data!.completed_at, null);

    // The real worker, as a server's runs it.
    const worker = await startContactImports(t.db, t.config, { error: () => {}, warn: () => {} });
    try {
      await waitFor(async () => (await resend.contacts.imports.get(id)).data?.status === 'completed', 15_000);
    } finally {
      await worker.stop();
    }
    const done = (await resend.contacts.imports.get(id)).data!;
    assert.deepEqual(done.counts, { total: 2, created: 2, updated: 0, skipped: 0, failed: 0 });
    assert.ok(done.completed_at);
    const listed = await resend.contacts.imports.list({ status: 'completed' });
    assert.equal(listed.error, null, JSON.stringify(listed.error));
    assert.ok(listed.data!.data.some((item) => item.id === id));

    const ada = await contact('ada@sdk.example');
    assert.equal(ada.first_name, 'Ada');
    assert.equal(ada.last_name, 'Lovelace');
    assert.equal(ada.unsubscribed, false);
    assert.deepEqual(ada.properties, { plan: { type: 'string', value: 'pro' }, seats: { type: 'number', value: 3 } });
    const grace = await contact('grace@sdk.example');
    assert.equal(grace.email, 'Grace@sdk.example');
    assert.equal(grace.unsubscribed, true);
    assert.deepEqual(grace.properties, { plan: { type: 'string', value: 'free' } });
    const members = (await call('GET', `/contacts?segment_id=${segment}`)).body.data.map((c: { id: string }) => c.id);
    assert.deepEqual(members.sort(), [ada.id, grace.id].sort());
    assert.deepEqual(ada.topics, [{ id: topic, subscription: 'opt_in' }]);
    // The file is not kept once imported.
    const { rows } = await t.db.query('SELECT 1 FROM contact_import_chunks WHERE import_id = $1', [id]);
    assert.equal(rows.length, 0);
  });

  test('without a column map, the header names the fields', async () => {
    const view = await imported({}, 'EMAIL,first_name,Last Name\r\nnomap@example.com,No,Map\r\n');
    assert.deepEqual(view.counts, { total: 1, created: 1, updated: 0, skipped: 0, failed: 0 });
    const found = await contact('nomap@example.com');
    assert.deepEqual([found.first_name, found.last_name], ['No', 'Map']);
  });

  test('on_conflict skip leaves an existing contact as it is; upsert updates the mapped fields', async () => {
    const segment = (await call('POST', '/segments', { name: 'Conflicts' })).body.id as string;
    await call('POST', '/contacts', { email: 'exists@conflict.example', first_name: 'Old', unsubscribed: true });
    const csv =
      'email,first_name,last_name,unsubscribed\nEXISTS@conflict.example,New,Name,\nfresh@conflict.example,F,,\n';
    const skipped = await imported({ segments: JSON.stringify([{ id: segment }]) }, csv);
    assert.deepEqual(skipped.counts, { total: 2, created: 1, updated: 0, skipped: 1, failed: 0 });
    const kept = await contact('exists@conflict.example');
    assert.deepEqual([kept.first_name, kept.last_name, kept.unsubscribed], ['Old', null, true]);
    let members = (await call('GET', `/contacts?segment_id=${segment}`)).body.data.map(
      (c: { email: string }) => c.email,
    );
    assert.deepEqual(members, ['fresh@conflict.example']);

    const upserted = await imported({ on_conflict: 'upsert', segments: JSON.stringify([{ id: segment }]) }, csv);
    assert.deepEqual(upserted.counts, { total: 2, created: 0, updated: 2, skipped: 0, failed: 0 });
    const changed = await contact('exists@conflict.example');
    // An empty cell changes nothing: the contact stays unsubscribed.
    assert.deepEqual([changed.first_name, changed.last_name, changed.unsubscribed], ['New', 'Name', true]);
    members = (await call('GET', `/contacts?segment_id=${segment}`)).body.data.map((c: { email: string }) => c.email);
    assert.deepEqual(members.sort(), ['exists@conflict.example', 'fresh@conflict.example']);
  });

  test('rows that cannot be contacts are errors with their row and column; the others are imported', async () => {
    await call('POST', '/contact-properties', { key: 'age', type: 'number' });
    const lines = ['mail,age,unsubscribed'];
    for (let i = 0; i < 30; i++) lines.push(`ok${i}@rows.example,${i},no`);
    lines[5] = 'not-an-address,5,no'; // row 6
    lines[7] = 'ok7@rows.example,seven,no'; // row 8
    lines[9] = 'ok9@rows.example,9,maybe'; // row 10
    lines[11] = ',11,no'; // row 12
    lines.push('OK1@rows.example,1,no'); // row 32: a duplicate of row 3, in a later batch
    lines.push('ok2@rows.example,2,no'); // row 33: a duplicate of row 4
    const view = await imported(
      {
        column_map: JSON.stringify({
          email: 'mail',
          properties: { age: { column: 'age' } },
          unsubscribed: 'unsubscribed',
        }),
      },
      lines.join('\n'),
      10, // batches of 10 rows: the duplicates are found across batches
    );
    assert.deepEqual(view.counts, { total: 32, created: 26, updated: 0, skipped: 0, failed: 6 });
    const errors = await errorsOf(view.id);
    assert.deepEqual(
      errors.data.map((e) => [e.row, e.column]),
      [
        [6, 'mail'],
        [8, 'age'],
        [10, 'unsubscribed'],
        [12, 'mail'],
        [32, 'mail'],
        [33, 'mail'],
      ],
    );
    assert.match(errors.data[0]!.message, /not-an-address/);
    assert.match(errors.data[1]!.message, /"seven" is not a number/);
    assert.equal(errors.data[4]!.message, 'duplicate: the address is on row 3 already');
    // Paged by row.
    const first = await errorsOf(view.id, '?limit=2');
    assert.deepEqual([first.has_more, first.data.map((e) => e.row)], [true, [6, 8]]);
    const next = await errorsOf(view.id, '?limit=10&after=8');
    assert.deepEqual([next.has_more, next.data.map((e) => e.row)], [false, [10, 12, 32, 33]]);
    assert.equal((await contact('ok1@rows.example')).properties.age.value, 1);
    // A duplicate within one batch too.
    const same = await imported({}, 'email\ndup@rows.example\nDUP@rows.example\n');
    assert.deepEqual(same.counts, { total: 2, created: 1, updated: 0, skipped: 0, failed: 1 });
    assert.equal((await errorsOf(same.id)).data[0]!.message, 'duplicate: the address is on row 2 already');
  });

  test('quoted fields, a byte-order mark, CRLF and blank lines', async () => {
    const csv =
      '\ufeff"email","first_name","last_name"\r\n' +
      '"quoted@csv.example","Smith, Jr.","O""Brien"\r\n' +
      '\r\n' +
      'multi@csv.example,"two\r\nlines",x\r\n' +
      'short@csv.example\r\n';
    const view = await imported({}, csv);
    assert.deepEqual(view.counts, { total: 3, created: 3, updated: 0, skipped: 0, failed: 0 });
    const quoted = await contact('quoted@csv.example');
    assert.deepEqual([quoted.first_name, quoted.last_name], ['Smith, Jr.', 'O"Brien']);
    assert.equal((await contact('multi@csv.example')).first_name, 'two\r\nlines');
    assert.equal((await contact('short@csv.example')).first_name, null);
  });

  test('a file that cannot be read fails the import with a reason; rows before a syntax error stay', async () => {
    const noEmail = await imported({}, 'name,phone\nAda,1\n');
    assert.equal(noEmail.status, 'failed');
    assert.match(noEmail.failure_reason, /no email column/);
    const mapped = await imported({ column_map: JSON.stringify({ email: 'Mail' }) }, 'email\na@b.example\n');
    assert.equal(mapped.status, 'failed');
    assert.match(mapped.failure_reason, /"Mail"/);
    const broken = await imported({}, 'email,first_name\nbefore@broken.example,A\nafter@broken.example,"unclosed\n', 1);
    assert.equal(broken.status, 'failed');
    assert.equal(
      broken.failure_reason,
      'row 3: a quote opens a field and is never closed (a quote inside a quoted field is written twice: ' +
        '"5"" screen"); the rows before it were imported',
    );
    assert.equal(broken.counts.created, 1);
    assert.ok(await contact('before@broken.example'));
  });

  test('20,000 rows are stored in chunks and imported in batches', async () => {
    await call('POST', '/contact-properties', { key: 'note', type: 'string' });
    const filler = 'x'.repeat(60);
    const lines = ['email,note'];
    for (let i = 0; i < 20_000; i++) lines.push(`bulk${i}@large.example,${filler}${i}`);
    const csv = lines.join('\n');
    assert.ok(csv.length > 1024 * 1024);
    const answer = await upload({ column_map: JSON.stringify({ email: 'email', properties: { note: 'note' } }) }, csv);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    const { rows } = await t.db.query<{ n: number; largest: number }>(
      'SELECT count(*)::int AS n, max(length(data))::int AS largest FROM contact_import_chunks WHERE import_id = $1',
      [answer.body.id],
    );
    // About 1 MiB a chunk: the file was written as it arrived, not held whole.
    assert.ok(rows[0]!.n >= 2, `${rows[0]!.n} chunk(s)`);
    assert.ok(rows[0]!.largest <= 1024 * 1024 + 256 * 1024, `a chunk of ${rows[0]!.largest} bytes`);
    await runImport(t.db, answer.body.id);
    const view = (await call('GET', `/contacts/imports/${answer.body.id}`)).body;
    assert.equal(view.status, 'completed');
    assert.deepEqual(view.counts, { total: 20_000, created: 20_000, updated: 0, skipped: 0, failed: 0 });
    assert.equal(view.progress.rows_processed, 20_000);
    const { rows: stored } = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM contacts WHERE organization_id = $1 AND email LIKE 'bulk%@large.example'",
      [org.id],
    );
    assert.equal(stored[0]!.n, 20_000);
    // Run again, the job changes nothing and counts nothing twice.
    await runImport(t.db, answer.body.id);
    assert.deepEqual((await call('GET', `/contacts/imports/${answer.body.id}`)).body.counts, view.counts);
  });

  test('a file that is not CSV text fails at once, with a reason that says what to do; its file is dropped', async () => {
    const cases: Array<[string, Buffer, string]> = [
      [
        'a quote in the header',
        Buffer.from('em"ail,first_name\nx@example.org,X\n'),
        'row 1 (the header row): a quote inside a field that does not start with one (remove it, or quote the ' +
          'whole field: a quote inside a quoted field is written twice: "5"" screen")',
      ],
      [
        'a spreadsheet sent by mistake (2 MB of binary data)',
        randomBytes(2 * 1024 * 1024),
        'not a CSV file: the upload looks like binary data (a spreadsheet? export it as CSV)',
      ],
      [
        'Latin-1 text',
        Buffer.from('email,first_name\nrene@latin.example,Ren\xe9\n', 'latin1'),
        'not a CSV file in UTF-8: the upload has bytes that are not UTF-8 text (export or save it as "CSV UTF-8")',
      ],
      [
        'UTF-16 text',
        Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('email\nutf16@text.example\n', 'utf16le')]),
        'not a CSV file in UTF-8: the upload is UTF-16 text (export it as "CSV UTF-8")',
      ],
    ];
    for (const [what, file, reason] of cases) {
      const answer = await upload({}, file);
      assert.equal(answer.status, 201, what);
      assert.deepEqual(await runImport(t.db, answer.body.id), { failed: reason }, what);
      const view = (await call('GET', `/contacts/imports/${answer.body.id}`)).body;
      assert.equal(view.status, 'failed', what);
      assert.equal(view.failure_reason, reason, what);
      assert.equal(view.counts.total, 0, what);
      const { rows } = await t.db.query('SELECT 1 FROM contact_import_chunks WHERE import_id = $1', [answer.body.id]);
      assert.equal(rows.length, 0, what);
    }
  });

  test('an import whose job fails run after run (not for an outage) ends failed after MAILROOM_JOB_MAX_ATTEMPTS', async () => {
    const answer = await upload({}, 'email\nstuck@attempts.example\n');
    // A stored column map the reader cannot walk: every run of the job throws.
    await t.db.query(`UPDATE contact_imports SET column_map = '{"email": "email", "properties": null}' WHERE id = $1`, [
      answer.body.id,
    ]);
    const logged: string[] = [];
    const log = {
      warn: () => void logged.push('warn'),
      error: () => void logged.push('error'),
      info: () => {},
    };
    const worker = await startContactImports(t.db, { ...t.config, jobMaxAttempts: 2 }, log);
    try {
      const job = async () =>
        (
          await t.db.query<{ id: string; failed_runs: number | null; failed_at: Date | null; last_error: string }>(
            `SELECT id, failed_runs, failed_at, last_error FROM jobs WHERE payload ->> 'import_id' = $1`,
            [answer.body.id],
          )
        ).rows[0]!;
      await waitFor(async () => (await job()).failed_runs === 1);
      assert.equal((await call('GET', `/contacts/imports/${answer.body.id}`)).body.status, 'in_progress');
      // The retry is 2 s away: brought forward rather than waited for.
      await t.db.query('UPDATE jobs SET run_at = now() WHERE id = $1', [(await job()).id]);
      worker.poke();
      await waitFor(async () => (await job()).failed_at !== null);
      const view = (await call('GET', `/contacts/imports/${answer.body.id}`)).body;
      assert.equal(view.status, 'failed');
      assert.match(view.failure_reason, /^stopped after 2 failed attempts: /);
      assert.equal((await job()).last_error, view.failure_reason);
      assert.deepEqual(logged, ['warn', 'error']);
    } finally {
      await worker.stop();
    }
  });

  test('a file over 50 MB is a 413, and what had arrived of it is removed', async () => {
    const chunkCount = async () =>
      (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM contact_import_chunks')).rows[0]!.n;
    const chunksBefore = await chunkCount();
    const boundary = `----mailroom${randomUUID()}`;
    const row = Buffer.from('someone@too-large.example,With A Name\n');
    const rows = Math.ceil((50 * 1024 * 1024 + 1) / row.length);
    const body = Readable.from(
      (function* () {
        yield Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.csv"\r\n\r\nemail,name\n`,
        );
        for (let i = 0; i < rows; i += 10_000) yield Buffer.concat(Array(Math.min(10_000, rows - i)).fill(row));
        yield Buffer.from(`\r\n--${boundary}--\r\n`);
      })(),
    );
    const res = await fetch(`${base}/contacts/imports`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.fullKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: Readable.toWeb(body) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
    assertRefused(
      { status: res.status, body: (await res.json()) as CheckedAnswer['body'] },
      413,
      'payload_too_large',
      'file',
    );
    const { rows: left } = await t.db.query("SELECT 1 FROM contact_imports WHERE status = 'uploading'");
    assert.equal(left.length, 0);
    assert.equal(await chunkCount(), chunksBefore);
  });

  test('bad fields are a 400 at upload, and nothing is stored', async () => {
    await call('POST', '/contact-properties', { key: 'tier', type: 'number' });
    const csv = 'email\nx@refused.example\n';
    const before = await t.db.query('SELECT id FROM contact_imports');
    const cases: Array<[Record<string, string>, string, RegExp]> = [
      [{ column_map: '{"email": "Email"' }, 'column_map', /not valid JSON/],
      [{ column_map: '{"first_name": "Name"}' }, 'column_map', /email is required/],
      [{ column_map: '{"email": "e", "phone": "p"}' }, 'column_map', /unknown field "phone"/],
      [{ column_map: '{"email": "e", "properties": {"missing": {"column": "m"}}}' }, 'column_map', /create it first/],
      [
        { column_map: '{"email": "e", "properties": {"tier": {"column": "t", "type": "string"}}}' },
        'column_map',
        /type number/,
      ],
      [{ on_conflict: 'replace' }, 'on_conflict', /upsert or skip/],
      [{ segments: JSON.stringify([{ id: randomUUID() }]) }, 'segments', /no such segment/],
      [{ topics: JSON.stringify([{ id: randomUUID(), subscription: 'opt_in' }]) }, 'topics', /no such topic/],
      [{ topics: '[{"id": "x", "subscription": "maybe"}]' }, 'topics', /opt_in/],
      [{ colour: 'blue' }, 'colour', /not a field/],
    ];
    for (const [fields, field, message] of cases) {
      const answer = await upload(fields, csv);
      assertRefused(answer, 400, 'validation_error', field);
      assert.match(answer.body.message, message);
    }
    assertRefused(await upload({}, undefined), 400, 'missing_required_field', 'file');
    assertRefused(await upload({}, ''), 400, 'validation_error', 'file');
    const json = await fetch(`${base}/contacts/imports`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.fullKey}`, 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(json.status, 400);
    const after = await t.db.query('SELECT id FROM contact_imports');
    assert.equal(after.rows.length, before.rows.length);
  });

  test("another organization's import is a 404; a sending key may not import", async () => {
    const view = await imported({}, 'email\nmine@isolation.example\n');
    const call404 = await call('GET', `/contacts/imports/${view.id}`, undefined, other.fullKey);
    assertRefused(call404, 404, 'not_found');
    assertRefused(await call('GET', `/contacts/imports/${view.id}/errors`, undefined, other.fullKey), 404, 'not_found');
    const list = await call('GET', '/contacts/imports', undefined, other.fullKey);
    assert.deepEqual(list.body.data, []);
    assert.equal((await upload({}, 'email\nx@y.example\n', { key: org.sendingKey })).status, 401);
    assertRefused(await call('GET', '/contacts/imports/not-a-uuid'), 404, 'not_found');
  });

  test('the same Idempotency-Key and file answer the same import; another file with it is refused', async () => {
    const key = `import-${randomUUID()}`;
    const csv = 'email\nonce@idem.example\n';
    const first = await upload({ on_conflict: 'skip' }, csv, { idempotencyKey: key });
    const again = await upload({ on_conflict: 'skip' }, csv, { idempotencyKey: key });
    assert.equal(first.status, 201);
    assert.deepEqual(again, first);
    const { rows } = await t.db.query(
      "SELECT id FROM contact_imports WHERE organization_id = $1 AND status <> 'uploading' AND id = $2",
      [org.id, first.body.id],
    );
    assert.equal(rows.length, 1);
    const { rows: all } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM contact_imports WHERE file_bytes = $1 AND organization_id = $2',
      [Buffer.byteLength(csv), org.id],
    );
    assert.equal(all[0]!.n, 1);
    const different = await upload({ on_conflict: 'skip' }, 'email\nother@idem.example\n', { idempotencyKey: key });
    assert.equal(different.body.name, 'invalid_idempotent_request');
  });
});

interface ImportView {
  status: string;
  counts: Record<string, number>;
  progress: { rows_processed: number };
}

async function viewOf(base: string, id: string, headers: Record<string, string>): Promise<ImportView> {
  return (await (await fetch(`${base}/contacts/imports/${id}`, { headers })).json()) as ImportView;
}

describe('a contact import survives its server being killed, and being stopped', () => {
  const ROWS = 100_000;
  let env: Record<string, string>;
  let cleanup: () => Promise<void>;
  let key: string;

  before(async () => {
    ({ env, cleanup } = await databaseForProcesses('import-crash'));
    // A dead server's job comes back after 3 s.
    Object.assign(env, { MAILROOM_JOB_LEASE_SECONDS: '3' });
    const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
    const org = await cli('org', 'create', '--name', 'Import crash');
    key = String(
      (await cli('key', 'create', '--org', String(org.id), '--name', 'k', '--permission', 'full_access')).token,
    );
  });
  after(async () => {
    await cleanup?.();
  });

  test('killed with SIGKILL mid-import, restarted, stopped with SIGTERM, restarted: every row imported once, the counts right', async () => {
    const lines = ['email,first_name'];
    for (let i = 0; i < ROWS; i++) lines.push(`c${i}@crash.example,N${i}`);
    lines.push('c10@crash.example,again'); // a duplicate of row 12, near the end
    const { body, contentType } = multipart({}, lines.join('\n'));
    const headers = { authorization: `Bearer ${key}` };

    const first = await startServerProcess(env);
    let id: string;
    try {
      const res = await fetch(`${first.base}/contacts/imports`, {
        method: 'POST',
        headers: { ...headers, 'content-type': contentType },
        body,
      });
      assert.equal(res.status, 201);
      id = ((await res.json()) as { id: string }).id;
      await waitFor(
        async () => {
          const view = (await (await fetch(`${first.base}/contacts/imports/${id}`, { headers })).json()) as {
            progress: { rows_processed: number };
          };
          return view.progress.rows_processed >= 1000;
        },
        30_000,
        5,
      );
    } finally {
      first.child.kill('SIGKILL');
      await first.exited;
    }

    // The second server resumes it; stopped with SIGTERM, it ends its current batch and exits at once,
    // leaving the rest to the third.
    const second = await startServerProcess(env);
    let atRestart: ImportView;
    let atStop: number;
    try {
      atRestart = await viewOf(second.base, id, headers);
      assert.ok(
        atRestart.progress.rows_processed < ROWS,
        `the import finished before the kill (${atRestart.progress.rows_processed} rows): the test proves nothing`,
      );
      await waitFor(
        async () =>
          (await viewOf(second.base, id, headers)).progress.rows_processed >= atRestart.progress.rows_processed + 1000,
        30_000,
        5,
      );
    } finally {
      second.child.kill('SIGTERM');
    }
    const stoppedWithin = Date.now();
    assert.equal(await second.exited, 0);
    assert.ok(Date.now() - stoppedWithin < 10_000, 'a running import held up the graceful stop');

    const third = await startServerProcess(env);
    try {
      atStop = (await viewOf(third.base, id, headers)).progress.rows_processed;
      assert.ok(atStop < ROWS, `the import finished before SIGTERM (${atStop} rows): the test proves less`);
      await waitFor(async () => (await viewOf(third.base, id, headers)).status === 'completed', 120_000, 200);
      const done = await viewOf(third.base, id, headers);
      assert.deepEqual(done.counts, { total: ROWS + 1, created: ROWS, updated: 0, skipped: 0, failed: 1 });
      const errors = (await (await fetch(`${third.base}/contacts/imports/${id}/errors`, { headers })).json()) as {
        data: Array<{ row: number; message: string }>;
      };
      assert.deepEqual(errors.data, [
        { row: ROWS + 2, column: 'email', message: 'duplicate: the address is on row 12 already' },
      ]);
      // Rows from before the kill, around it, around the stop and after it are there, as the file gave them.
      for (const row of [0, atRestart.progress.rows_processed, atStop, ROWS - 1]) {
        const found = (await (await fetch(`${third.base}/contacts/c${row}@crash.example`, { headers })).json()) as {
          first_name: string;
        };
        assert.equal(found.first_name, `N${row}`);
      }
    } finally {
      third.child.kill('SIGTERM');
      await third.exited;
    }
  });
});
