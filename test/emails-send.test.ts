// POST /emails: every rule of the spec's message table and Errors table, and what an accepted message
// leaves in the database before the 200 goes out.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { counts, frozenRateClock, message, send, setLimits } from './helpers/emails.ts';
import { addDomain } from '../src/domains/domains.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;

before(async () => {
  t = await buildTestApp({ MAILROOM_ATTACHMENTS_MAX_BYTES: '1024' });
  org = await createTestOrganization(t.db, t.config, 'send');
  other = await createTestOrganization(t.db, t.config, 'other');
});
after(() => t.close());
beforeEach(() => setLimits(t.db, org.id, { rateLimit: 1000, monthlyQuota: 1_000_000 }));

const expectError = async (body: unknown, statusCode: number, name: string, field?: string) => {
  const before = await counts(t.db, org.id);
  const res = await send(t.app, org.fullKey, body);
  assert.equal(res.statusCode, statusCode, res.body);
  const error = res.json();
  assert.equal(error.statusCode, statusCode);
  assert.equal(error.name, name, res.body);
  assert.equal(typeof error.message, 'string');
  if (field !== undefined) assert.equal(error.field, field, res.body);
  assert.deepEqual(await counts(t.db, org.id), before, 'a refused message is neither stored nor charged');
  return error;
};

describe('accepted', () => {
  test('200 { object: "email", id } after the message, recipients, timeline entry and delivery job are committed', async () => {
    const res = await send(
      t.app,
      org.sendingKey,
      message(org, { to: ['a@example.com', 'B <b@example.com>'], cc: 'c@example.com' }),
    );
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.deepEqual(Object.keys(body).sort(), ['id', 'object']);
    assert.equal(body.object, 'email');
    // A UUID, time-ordered (version 7): new messages land at the end of the indexes keyed by id.
    assert.match(body.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

    const email = (await t.db.query('SELECT * FROM emails WHERE id = $1', [body.id])).rows[0] as Record<
      string,
      unknown
    >;
    assert.equal(email.status, 'queued');
    assert.deepEqual(email.to, ['a@example.com', 'B <b@example.com>']);
    assert.equal(email.recipient_count, 3);
    assert.match(String(email.message_id), new RegExp(`^<${body.id}@${org.domain}>$`));
    const recipients = await t.db.query(
      'SELECT address, kind FROM email_recipients WHERE email_id = $1 ORDER BY address',
      [body.id],
    );
    assert.deepEqual(recipients.rows, [
      { address: 'a@example.com', kind: 'to' },
      { address: 'b@example.com', kind: 'to' },
      { address: 'c@example.com', kind: 'cc' },
    ]);
    const events = await t.db.query('SELECT type FROM email_events WHERE email_id = $1', [body.id]);
    assert.deepEqual(events.rows, [{ type: 'accepted' }]);
    const jobs = await t.db.query("SELECT queue FROM jobs WHERE payload->>'email_id' = $1", [body.id]);
    assert.deepEqual(jobs.rows, [{ queue: 'deliver-email' }]);
  });

  test('a session and both kinds of key may send', async () => {
    for (const token of [org.fullKey, org.sendingKey, org.session]) {
      assert.equal((await send(t.app, token, message(org))).statusCode, 200);
    }
  });

  test('quota is charged per recipient across to, cc and bcc', async () => {
    const before = await counts(t.db, org.id);
    const res = await send(
      t.app,
      org.fullKey,
      message(org, { to: ['a@example.com', 'b@example.com'], bcc: ['c@example.com'] }),
    );
    assert.equal(res.statusCode, 200);
    const after = await counts(t.db, org.id);
    assert.deepEqual(after, { emails: before.emails + 1, charged: before.charged + 3 });
  });

  test('a future scheduled_at queues the message for then and answers at once', async () => {
    const at = new Date(Date.now() + 3600_000).toISOString();
    const res = await send(t.app, org.fullKey, message(org, { scheduled_at: at }));
    assert.equal(res.statusCode, 200);
    const { id } = res.json();
    const row = (
      await t.db.query<{ status: string; scheduled_at: Date }>(
        'SELECT status, scheduled_at FROM emails WHERE id = $1',
        [id],
      )
    ).rows[0]!;
    assert.equal(row.status, 'scheduled');
    assert.equal(row.scheduled_at.toISOString(), at);
    const job = (await t.db.query<{ run_at: Date }>("SELECT run_at FROM jobs WHERE payload->>'email_id' = $1", [id]))
      .rows[0]!;
    assert.equal(job.run_at.toISOString(), at);
  });

  test('offsets other than Z are accepted', async () => {
    const at = new Date(Date.now() + 7200_000);
    const local = at.toISOString().replace('Z', '+00:00');
    assert.equal((await send(t.app, org.fullKey, message(org, { scheduled_at: local }))).statusCode, 200);
  });

  test('IDN domains are converted, display names kept', async () => {
    const res = await send(
      t.app,
      org.fullKey,
      message(org, { to: 'Jürgen Müller <jm@bücher.example>', reply_to: ['help@例え.jp'] }),
    );
    assert.equal(res.statusCode, 200, res.body);
    const row = (
      await t.db.query<{ to: string[]; reply_to: string[] }>('SELECT "to", reply_to FROM emails WHERE id = $1', [
        res.json().id,
      ])
    ).rows[0]!;
    assert.deepEqual(row.to, ['Jürgen Müller <jm@xn--bcher-kva.example>']);
    assert.deepEqual(row.reply_to, ['help@xn--r8jz45g.jp']);
  });

  test('tags as an object or an array, custom headers, html and text together', async () => {
    for (const tags of [{ category: 'welcome', tier: 2 }, [{ name: 'category', value: 'welcome' }, 'plain']]) {
      const res = await send(
        t.app,
        org.fullKey,
        message(org, { tags, html: '<p>Hi</p>', headers: { 'X-Entity-Ref-ID': '123' } }),
      );
      assert.equal(res.statusCode, 200, res.body);
      const row = (await t.db.query<{ tags: unknown }>('SELECT tags FROM emails WHERE id = $1', [res.json().id]))
        .rows[0]!;
      assert.deepEqual(row.tags, tags);
    }
  });

  test('attachments are decoded and stored; filenames sanitized; type inferred', async () => {
    const content = Buffer.from('%PDF-1.4 tiny').toString('base64');
    const res = await send(
      t.app,
      org.fullKey,
      message(org, {
        attachments: [
          { filename: '../../etc/invoice.pdf', content },
          { filename: 'logo.png', content, content_type: 'image/png', content_id: 'logo' },
        ],
      }),
    );
    assert.equal(res.statusCode, 200, res.body);
    const rows = await t.db.query<{ filename: string; content_type: string; content: Uint8Array }>(
      'SELECT filename, content_type, content FROM email_attachments WHERE email_id = $1 ORDER BY position',
      [res.json().id],
    );
    assert.deepEqual(
      rows.rows.map((r) => [r.filename, r.content_type, Buffer.from(r.content).toString()]),
      [
        ['invoice.pdf', 'application/pdf', '%PDF-1.4 tiny'],
        ['logo.png', 'image/png', '%PDF-1.4 tiny'],
      ],
    );
  });
});

describe('refused: the spec Errors table', () => {
  for (const field of ['from', 'to']) {
    test(`missing ${field} → 400 missing_required_field`, async () => {
      const body = message(org);
      delete body[field];
      await expectError(body, 400, 'missing_required_field', field);
    });
  }

  test('missing subject without a template → 400 missing_required_field', async () => {
    const body = message(org);
    delete body.subject;
    await expectError(body, 400, 'missing_required_field', 'subject');
  });

  test('none of html, text, template → 400 missing_required_field', async () => {
    const body = message(org);
    delete body.text;
    await expectError(body, 400, 'missing_required_field');
  });

  test('empty to → 400 missing_required_field', async () => {
    await expectError(message(org, { to: [] }), 400, 'missing_required_field', 'to');
  });

  test('a base64 attachment that does not decode → 400 invalid_attachment', async () => {
    for (const content of ['not base64!', 'abc', 'YWJj\nZA==', '']) {
      await expectError(message(org, { attachments: [{ filename: 'a.txt', content }] }), 400, 'invalid_attachment');
    }
  });

  test('attachments over the size limit → 413 payload_too_large', async () => {
    const content = Buffer.alloc(1025).toString('base64');
    await expectError(message(org, { attachments: [{ filename: 'big.bin', content }] }), 413, 'payload_too_large');
  });

  test('a from domain of another organization, unverified, or unknown → 400 invalid_from_address', async () => {
    await expectError(message(org, { from: `x@${other.domain}` }), 400, 'invalid_from_address', 'from');
    await addDomain(t.db, t.config, org.id, 'unverified.example');
    await expectError(message(org, { from: 'x@unverified.example' }), 400, 'invalid_from_address', 'from');
    await expectError(message(org, { from: 'x@nobody.example' }), 400, 'invalid_from_address', 'from');
    await expectError(message(org, { from: `x@sub.${org.domain}` }), 400, 'invalid_from_address', 'from');
  });

  test('a template that does not exist → 400 template_not_found', async () => {
    const body = message(org, { template: { id: '00000000-0000-4000-8000-000000000000' } });
    delete body.text;
    delete body.subject;
    await expectError(body, 400, 'template_not_found');
  });

  test('more than 50 recipients → 400 too_many_recipients, nothing charged', async () => {
    const many = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}${i}@example.com`);
    await expectError(message(org, { to: many(51, 't') }), 400, 'too_many_recipients');
    await expectError(
      message(org, { to: many(20, 't'), cc: many(20, 'c'), bcc: many(11, 'b') }),
      400,
      'too_many_recipients',
    );
    const fifty = await send(
      t.app,
      org.fullKey,
      message(org, { to: many(20, 't'), cc: many(20, 'c'), bcc: many(10, 'b') }),
    );
    assert.equal(fifty.statusCode, 200);
  });

  test('no credential → 401 missing_api_key; a bad one → 401 invalid_api_key', async () => {
    const none = await t.app.inject({ method: 'POST', url: '/emails', payload: message(org) });
    assert.deepEqual([none.statusCode, none.json().name], [401, 'missing_api_key']);
    const bad = await send(t.app, 'mr_nope', message(org));
    assert.deepEqual([bad.statusCode, bad.json().name], [401, 'invalid_api_key']);
  });

  test('over the rate limit → 429 rate_limit_exceeded with retry-after', async () => {
    await setLimits(t.db, org.id, { rateLimit: 2 });
    // The bucket's clock stands still while the test sends: no token comes back, however slow the machine.
    const clock = frozenRateClock(t.db);
    try {
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await send(t.app, org.fullKey, message(org)));
      assert.deepEqual(
        answers.map((r) => r.statusCode),
        [200, 200, 429],
      );
      const limited = answers[2]!;
      assert.equal(limited.json().name, 'rate_limit_exceeded');
      assert.ok(Number(limited.headers['retry-after']) >= 1);
      assert.equal(limited.headers['ratelimit-limit'], '2');
      assert.equal(limited.headers['ratelimit-remaining'], '0');
      // Once retry-after has passed, a send goes through again.
      clock.advance(Number(limited.headers['retry-after']) * 1000);
      assert.equal((await send(t.app, org.fullKey, message(org))).statusCode, 200);
    } finally {
      clock.release();
    }
  });

  test('over the monthly quota → 429 monthly_quota_exceeded, nothing stored', async () => {
    const { charged } = await counts(t.db, org.id);
    await setLimits(t.db, org.id, { monthlyQuota: charged + 2 });
    await expectError(
      message(org, { to: ['a@example.com', 'b@example.com', 'c@example.com'] }),
      429,
      'monthly_quota_exceeded',
    );
    assert.equal(
      (await send(t.app, org.fullKey, message(org, { to: ['a@example.com', 'b@example.com'] }))).statusCode,
      200,
    );
    await expectError(message(org), 429, 'monthly_quota_exceeded');
  });
});

describe('refused: the message table rules', () => {
  const cases: Array<[string, Record<string, unknown>, string, string?]> = [
    ['CR/LF in an address', { to: 'a@example.com\r\nBcc: victim@example.com' }, 'validation_error', 'to'],
    ['a quoted local part', { to: '"a@b.example"@evil.example' }, 'validation_error', 'to'],
    ['a second @', { to: 'a@b@example.com' }, 'validation_error', 'to'],
    ['no domain dot', { to: 'root@localhost' }, 'validation_error', 'to'],
    ['an IP literal', { to: 'a@[127.0.0.1]' }, 'validation_error', 'to'],
    ['a comment', { to: 'a(comment)@example.com' }, 'validation_error', 'to'],
    ['a group', { to: 'friends: a@example.com;' }, 'validation_error', 'to'],
    ['nested angle brackets', { to: 'A <b <c@example.com>>' }, 'validation_error', 'to'],
    ['a bad cc in a list', { cc: ['ok@example.com', 'bad'] }, 'validation_error', 'cc.1'],
    ['a bad reply_to', { reply_to: 'x' }, 'validation_error', 'reply_to'],
    ['a bad from', { from: 'Acme' }, 'validation_error', 'from'],
    ['to of the wrong type', { to: 42 }, 'validation_error', 'to'],
    ['an unknown field', { htlm: '<p>' }, 'validation_error', 'htlm'],
    ['template with html', { template: { id: 'x' }, html: '<p>' }, 'validation_error', 'template'],
    ['CR/LF in the subject', { subject: 'Hi\r\nBcc: x@example.com' }, 'validation_error', 'subject'],
    ['scheduled_at in the past', { scheduled_at: '2020-01-01T00:00:00Z' }, 'validation_error', 'scheduled_at'],
    ['scheduled_at without an offset', { scheduled_at: '2099-01-01T00:00:00' }, 'validation_error', 'scheduled_at'],
    ['scheduled_at not a date', { scheduled_at: 'tomorrow' }, 'validation_error', 'scheduled_at'],
    ['scheduled_at impossible', { scheduled_at: '2099-02-30T00:00:00Z' }, 'validation_error', 'scheduled_at'],
    ['tags of the wrong type', { tags: 'welcome' }, 'validation_error', 'tags'],
    ['headers not an object', { headers: ['X-A: b'] }, 'validation_error', 'headers'],
    ['a header overriding From', { headers: { from: 'ceo@bank.example' } }, 'validation_error', 'headers.from'],
    [
      'a header overriding Content-Type',
      { headers: { 'Content-Type': 'text/plain' } },
      'validation_error',
      'headers.Content-Type',
    ],
    [
      'a header overriding DKIM-Signature',
      { headers: { 'DKIM-Signature': 'x' } },
      'validation_error',
      'headers.DKIM-Signature',
    ],
    ['a header value with CR/LF', { headers: { 'X-A': 'b\r\nBcc: x@example.com' } }, 'validation_error', 'headers.X-A'],
    ['a header name with a colon', { headers: { 'X-A:': 'b' } }, 'validation_error', 'headers.X-A:'],
    ['an unknown topic', { topic_id: '00000000-0000-4000-8000-000000000000' }, 'validation_error', 'topic_id'],
    ['a malformed topic id', { topic_id: 'news' }, 'validation_error', 'topic_id'],
    [
      'an attachment without filename',
      { attachments: [{ content: 'YQ==' }] },
      'missing_required_field',
      'attachments.0.filename',
    ],
    [
      'an attachment path on a link-local address (cloud metadata): never fetched',
      { attachments: [{ filename: 'a', path: 'http://169.254.169.254/' }] },
      'invalid_attachment',
      'attachments.0.path',
    ],
    [
      'an attachment without content or path',
      { attachments: [{ filename: 'a' }] },
      'missing_required_field',
      'attachments.0.content',
    ],
    ['scheduled_at at 24:00', { scheduled_at: '2099-01-01T24:00:00Z' }, 'validation_error', 'scheduled_at'],
    [
      'an attachment with a bad type',
      { attachments: [{ filename: 'a', content: 'YQ==', content_type: 'evil\r\nx' }] },
      'invalid_attachment',
    ],
  ];
  for (const [what, extra, name, field] of cases) {
    test(`${what} → 400 ${name}`, async () => {
      await expectError(message(org, extra), 400, name, field);
    });
  }

  test('a body that is not an object → 400 validation_error', async () => {
    for (const body of [[message(org)], 'text', 42]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/emails',
        headers: { ...bearer(org.fullKey), 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().name, 'validation_error');
    }
  });

  test('a body over the size limit → 413 payload_too_large', async () => {
    const small = await buildTestApp({ MAILROOM_BODY_LIMIT_BYTES: '2048' });
    const o = await createTestOrganization(small.db, small.config);
    const res = await send(small.app, o.fullKey, message(o, { text: 'x'.repeat(4096) }));
    assert.equal(res.statusCode, 413);
    assert.equal(res.json().name, 'payload_too_large');
    await small.close();
  });
});

describe('rate-limit headers', () => {
  test('every answer to a send carries ratelimit-limit, -remaining and -reset', async () => {
    await setLimits(t.db, org.id, { rateLimit: 50 });
    const ok = await send(t.app, org.fullKey, message(org));
    const bad = await send(t.app, org.fullKey, message(org, { to: 'bad' }));
    for (const res of [ok, bad]) {
      assert.equal(res.headers['ratelimit-limit'], '50');
      assert.match(String(res.headers['ratelimit-remaining']), /^\d+$/);
      assert.match(String(res.headers['ratelimit-reset']), /^\d+$/);
    }
    assert.equal(ok.headers['ratelimit-remaining'], '49');
  });
});
