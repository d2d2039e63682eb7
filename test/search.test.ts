// GET /search: one query finds emails (by id, whole or partial recipient, word of a subject), contacts,
// domains, templates, broadcasts, webhook endpoints (sessions only) and API keys, of the caller's
// organization only, through the real app.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send } from './helpers/emails.ts';
import { RECENT_MESSAGES } from '../src/search/search.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
const ids: Record<string, string> = {};

async function post(token: string, url: string, payload: Record<string, unknown>): Promise<string> {
  const res = await t.app.inject({ method: 'POST', url, headers: bearer(token), payload });
  assert.ok(res.statusCode === 200 || res.statusCode === 201, `${url}: ${res.statusCode} ${res.body}`);
  return res.json().id as string;
}

async function find(q: string, token = org.session, extra = '') {
  const res = await t.app.inject({
    method: 'GET',
    url: `/search?q=${encodeURIComponent(q)}${extra}`,
    headers: bearer(token),
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as {
    object: string;
    query: string;
    data: Array<{ object: string; id: string; title: string; detail: string; created_at: string }>;
  };
}

before(async () => {
  t = await buildTestApp({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
  org = await createTestOrganization(t.db, t.config, 'search');
  other = await createTestOrganization(t.db, t.config, 'elsewhere');
  const sent = async (o: TestOrganization, to: string, subject: string) => {
    const res = await send(t.app, o.fullKey, message(o, { to: [to], subject }));
    assert.equal(res.statusCode, 200, res.body);
    return res.json().id as string;
  };
  ids.receipt = await sent(org, 'Alice.Walker@Example.com', 'Your receipt for order 1042');
  ids.reset = await sent(org, 'bob@example.net', 'Reset your password');
  ids.otherReceipt = await sent(other, 'alice.walker@example.com', 'Your receipt from elsewhere');
  ids.contact = await post(org.fullKey, '/contacts', {
    email: 'carol@example.org',
    first_name: 'Carol',
    last_name: 'Nguyen',
  });
  await post(other.fullKey, '/contacts', { email: 'carol@example.org', first_name: 'Carol' });
  ids.template = await post(org.fullKey, '/templates', {
    name: 'Order receipt',
    alias: 'receipt-v2',
    html: '<p>Hi</p>',
  });
  const segment = await post(org.fullKey, '/segments', { name: 'Everyone' });
  ids.broadcast = await post(org.fullKey, '/broadcasts', {
    name: 'November newsletter',
    segment_id: segment,
    from: `news@${org.domain}`,
    subject: 'What is new',
    html: '<p>News</p>',
  });
  ids.webhook = await post(org.fullKey, '/webhooks', { endpoint: 'http://127.0.0.1:9/hooks/receipts' });
  ids.key = await post(org.fullKey, '/api-keys', { name: 'Receipts service' });
});
after(() => t?.close());

test('a word finds every kind that holds it, in a fixed order, each with a title and a second line', async () => {
  const found = await find('RECEIPT');
  assert.equal(found.object, 'list');
  assert.equal(found.query, 'RECEIPT');
  assert.deepEqual(
    found.data.map((result) => [result.object, result.id]),
    [
      ['email', ids.receipt],
      ['template', ids.template],
      ['webhook', ids.webhook],
      ['api_key', ids.key],
    ],
  );
  const [email, template] = found.data;
  assert.equal(email!.title, 'Your receipt for order 1042');
  assert.match(email!.detail, /Alice\.Walker@Example\.com/i);
  assert.equal(template!.title, 'Order receipt');
  assert.equal(template!.detail, 'receipt-v2');
});

test('an email is found by its id, by its whole recipient in any case, and by part of an address', async () => {
  assert.deepEqual(
    (await find(ids.reset!.toUpperCase())).data.map((result) => result.id),
    [ids.reset],
    'an id, pasted in any case',
  );
  assert.deepEqual(
    (await find('ALICE.walker@example.COM')).data.map((result) => result.id),
    [ids.receipt],
  );
  assert.deepEqual(
    (await find('example.net')).data.filter((r) => r.object === 'email').map((result) => result.id),
    [ids.reset],
  );
});

test('a contact is found by its address, part of it, or its name; a domain and a broadcast by name', async () => {
  for (const q of ['carol@example.org', 'carol@', 'Nguyen', 'carol nguyen']) {
    const contacts = (await find(q)).data.filter((result) => result.object === 'contact');
    assert.deepEqual(
      contacts.map((result) => [result.id, result.title, result.detail]),
      [[ids.contact, 'carol@example.org', 'Carol Nguyen']],
      q,
    );
  }
  const domain = (await find(org.domain.slice(0, 8))).data.find((result) => result.object === 'domain');
  assert.equal(domain?.title, org.domain);
  assert.equal(domain?.detail, 'verified');
  const broadcast = (await find('newsletter')).data;
  assert.deepEqual(
    broadcast.map((result) => [result.object, result.id, result.detail]),
    [['broadcast', ids.broadcast, 'draft']],
  );
});

test("another organization's things are never found, not even by id", async () => {
  const byId = await find(ids.otherReceipt!);
  assert.deepEqual(byId.data, []);
  const elsewhere = await find('elsewhere');
  assert.deepEqual(
    elsewhere.data.map((result) => result.object),
    [],
    'the other organization has an email with that word, and its domain holds it',
  );
});

test('webhook endpoints are found for a dashboard session only, as they are listed; API keys for full access', async () => {
  const withKey = await find('receipts', org.fullKey);
  assert.deepEqual(
    withKey.data.map((result) => result.object),
    ['api_key'],
  );
  const sending = await t.app.inject({ method: 'GET', url: '/search?q=receipts', headers: bearer(org.sendingKey) });
  assert.equal(sending.statusCode, 401, 'a sending key reads nothing, as everywhere');
});

test('wildcards are text, limit caps each kind, and bad input is refused in the envelope', async () => {
  assert.deepEqual((await find('"')).data, [], 'a quote is no part of any address or subject');
  assert.deepEqual((await find('%')).data, []);
  assert.deepEqual((await find('_')).data, []);
  for (let i = 0; i < 3; i++) {
    const res = await send(t.app, org.fullKey, message(org, { to: [`many${i}@example.com`], subject: `Many ${i}` }));
    assert.equal(res.statusCode, 200);
  }
  const capped = await find('many', org.session, '&limit=2');
  assert.deepEqual(
    capped.data.map((result) => result.title),
    ['Many 2', 'Many 1'],
    'newest first',
  );
  for (const [url, name, field] of [
    ['/search', 'missing_required_field', 'q'],
    ['/search?q=', 'validation_error', 'q'],
    ['/search?q=%20%20', 'validation_error', 'q'],
    ['/search?q=a&limit=0', 'validation_error', 'limit'],
    ['/search?q=a&limit=21', 'validation_error', 'limit'],
    [`/search?q=${'a'.repeat(321)}`, 'validation_error', 'q'],
    ['/search?q=a&other=1', 'validation_error', undefined],
  ] as const) {
    const res = await t.app.inject({ method: 'GET', url, headers: bearer(org.session) });
    assert.equal(res.statusCode, 400, url);
    assert.equal(res.json().name, name, url);
    if (field) assert.equal(res.json().field, field, url);
  }
});

test(`a part of a subject is looked for among the newest ${RECENT_MESSAGES.toLocaleString('en')} messages; an older one by id or address`, async () => {
  const old = await send(t.app, org.fullKey, message(org, { to: ['dana@example.com'], subject: 'Ancient invoice' }));
  const oldId = old.json().id as string;
  assert.deepEqual(
    (await find('ancient invoice')).data.map((result) => result.id),
    [oldId],
    'found while among the newest',
  );
  // RECENT_MESSAGES newer messages, written in bulk (the search's bound is what is tested, not sending).
  await t.db.query(
    `INSERT INTO emails (id, organization_id, "from", "to", subject, message_id, status, recipient_count, created_at)
     SELECT gen_random_uuid(), $1, 'a@b.c', '["x@example.com"]', 'Filler', '<' || i || '@filler>', 'sent', 1,
            now() + make_interval(secs => i)
       FROM generate_series(1, $2::int) i`,
    [org.id, RECENT_MESSAGES],
  );
  assert.deepEqual((await find('ancient invoice')).data, [], 'past the bound');
  assert.deepEqual(
    (await find(oldId)).data.map((result) => result.id),
    [oldId],
  );
  assert.deepEqual(
    (await find('dana@example.com')).data.map((result) => result.id),
    [oldId],
  );
});
