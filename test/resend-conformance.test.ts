// Mailroom's answers, checked against Resend's published OpenAPI document (vendored in
// test/fixtures/resend-openapi) as the types of Resend's Node SDK read it (test/helpers/resend-openapi.ts
// applies the SDK's cases first): every operation both have is called with the bodies Resend documents,
// over real HTTP, and every answer must validate against Resend's response schema for it. A field that
// goes back to a wrong shape (a null Resend has no room for, a last_event or record kind Resend does not
// list, tags as an object, a list without has_more) fails here.
//
// Each feature's own test goes deeper (test/email-metrics, api-keys, templates, suppressions,
// request-log, scheduled-at, webhooks, attachment-path, broadcasts-api, segment-filter,
// contact-imports); this file holds every shared operation to Resend's shapes in one place.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { takeMessage } from '../src/delivery/take-message.ts';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { requestProblems, resendOperation, responseProblems } from './helpers/resend-openapi.ts';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { receiveMessage } from '../src/receiving/receive-message.ts';
import { runImport } from '../src/contacts/imports/run-import.ts';
import { recordClick } from '../src/tracking/engagement.ts';

let t: TestApp;
let org: TestOrganization;
let base: string;

before(async () => {
  // Nothing answers DNS on 127.0.0.1:9: a domain's verification fails at once instead of waiting on timeouts.
  t = await buildTestApp({
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_DNS_TIMEOUT_MS: '1000',
    MAILROOM_DNS_SERVERS: '127.0.0.1:9',
  });
  org = await createTestOrganization(t.db, t.config, 'conform');
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
after(() => t.close());

interface Exchange {
  method: string;
  path: string;
  status: number;
  body: unknown;
}

/**
 * One resource area's calls. Each answer is checked against Resend's schema as it comes; `check()` fails
 * the test with every problem found (and with any call Resend has no operation for: a typo in a path
 * must not pass unchecked).
 */
function area() {
  const problems: string[] = [];
  const operations = new Set<string>();

  async function call(method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<Exchange> {
    // The bodies sent are Resend's own, unless a call says it sends another form on purpose.
    if (body !== undefined && !(body instanceof FormData) && !options.notResendsForm && !options.mailroomsOwn) {
      const wrong = requestProblems(method, path, body);
      assert.deepEqual(wrong, [], `${method} ${path}: the test's own body is not one Resend documents`);
    }
    const res = await fetch(base + path, {
      method,
      headers: {
        authorization: `Bearer ${options.token ?? org.fullKey}`,
        ...(body === undefined || body instanceof FormData ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined || body instanceof FormData ? body : JSON.stringify(body),
    });
    const text = await res.text();
    const exchange = { method, path, status: res.status, body: text ? JSON.parse(text) : undefined };
    const operation = resendOperation(method, path);
    if (options.mailroomsOwn) {
      // An operation of Mailroom's own: Resend must really have none (else it is held to Resend's schema).
      if (operation) problems.push(`${method} ${path}: Resend has ${operation.operationId}; not Mailroom's own`);
      return exchange;
    }
    if (!operation) problems.push(`${method} ${path}: Resend has no such operation`);
    else operations.add(operation.operationId);
    const wrong = responseProblems(method, path, exchange.status, exchange.body) ?? [];
    for (const problem of wrong) problems.push(`${method} ${path} ${exchange.status}: ${problem}`);
    return exchange;
  }

  /** A call that must succeed; its answer's body. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, read field by field
  async function ok(method: string, path: string, body?: unknown, options?: CallOptions): Promise<any> {
    const exchange = await call(method, path, body, options);
    assert.ok(
      exchange.status >= 200 && exchange.status < 300,
      `${method} ${path} ${body === undefined ? '' : JSON.stringify(body)}: ${exchange.status} ${JSON.stringify(exchange.body)}`,
    );
    return exchange.body;
  }

  return {
    ok,
    call,
    check(expectedOperations: string[]) {
      assert.deepEqual(problems, []);
      assert.deepEqual([...operations].sort(), [...expectedOperations].sort(), 'the operations called');
    },
  };
}

interface CallOptions {
  token?: string;
  /** The body is a form Mailroom also takes (the SDK's, or its own); not checked as Resend's. */
  notResendsForm?: boolean;
  /**
   * A route of Mailroom's own, which Resend's document lacks (PATCH /segments/:id): neither body nor
   * answer has a schema to meet, and the call fails if Resend does have the operation after all.
   */
  mailroomsOwn?: boolean;
}

/** Resend's list shape: object "list", has_more (a boolean), data. */
function assertList(body: { object?: unknown; has_more?: unknown; data?: unknown }, what: string) {
  assert.equal(body.object, 'list', what);
  assert.equal(typeof body.has_more, 'boolean', `${what}: has_more`);
  assert.ok(Array.isArray(body.data), `${what}: data`);
}

test('domains', async () => {
  const { ok, check } = area();
  const created = await ok('POST', '/domains', {
    name: `conform-${process.pid}.example.org`,
    region: 'eu-west-1',
    open_tracking: true,
    click_tracking: false,
    tls: 'enforced',
    capabilities: { sending: 'enabled', receiving: 'disabled' },
  });
  assert.deepEqual(
    created.records.map((record: { record: string }) => record.record),
    ['DKIM', 'SPF'],
  );
  assertList(await ok('GET', '/domains'), 'GET /domains');
  const page = await ok('GET', '/domains?limit=1');
  assertList(page, 'GET /domains?limit=1');
  assert.equal(page.has_more, true, 'two domains, one a page');
  await ok('GET', `/domains?limit=1&after=${page.data[0].id}`);
  const read = await ok('GET', `/domains/${created.id}`);
  assert.deepEqual([read.region, read.capabilities], ['eu-west-1', { sending: 'enabled', receiving: 'disabled' }]);
  await ok('PATCH', `/domains/${created.id}`, {
    open_tracking: false,
    click_tracking: true,
    tls: 'opportunistic',
    capabilities: { sending: 'enabled' },
  });
  await ok('POST', `/domains/${created.id}/verify`);
  await ok('DELETE', `/domains/${created.id}`);
  // A return path and a tracking subdomain bring Resend's MX (with its priority) and CNAME record shapes.
  const branded = await ok('POST', '/domains', {
    name: `conform-branded-${process.pid}.example.org`,
    custom_return_path: 'send',
    tracking_subdomain: 'links',
  });
  assert.deepEqual(
    branded.records.map((record: { record: string; type: string }) => `${record.record} ${record.type}`),
    ['DKIM TXT', 'SPF MX', 'SPF TXT', 'Tracking CNAME'],
  );
  await ok('PATCH', `/domains/${branded.id}`, { tracking_subdomain: 'track' });
  assert.equal((await ok('GET', `/domains/${branded.id}`)).tracking_subdomain, 'track');
  await ok('POST', `/domains/${branded.id}/verify`);
  await ok('DELETE', `/domains/${branded.id}`);
  // Receiving brings Resend's Receiving MX at the domain's own name.
  const receiving = await ok('POST', '/domains', {
    name: `conform-inbox-${process.pid}.example.org`,
    capabilities: { sending: 'enabled', receiving: 'enabled' },
  });
  assert.deepEqual(
    receiving.records.map(
      (record: { record: string; type: string; name: string }) => `${record.record} ${record.type}`,
    ),
    ['DKIM TXT', 'SPF TXT', 'Receiving MX'],
  );
  assert.deepEqual(receiving.capabilities, { sending: 'enabled', receiving: 'enabled' });
  await ok('PATCH', `/domains/${receiving.id}`, { capabilities: { receiving: 'disabled' } });
  await ok('POST', `/domains/${receiving.id}/verify`);
  await ok('DELETE', `/domains/${receiving.id}`);
  check(['domains/create', 'domains/list', 'domains/get', 'domains/update', 'domains/verify', 'domains/remove']);
});

test('received emails', async () => {
  const { ok, check } = area();
  const { rows: domains } = await t.db.query<{ id: string }>('SELECT id FROM domains WHERE name = $1', [org.domain]);
  const receive = async (options: Mail.Options) => {
    const { ids } = await receiveMessage(
      { db: t.db, signer: t.app.signer, log: { info: () => {}, warn: () => {}, error: () => {} } },
      {
        raw: await new MailComposer(options).compile().build(),
        mailFrom: 'ada@outside.example',
        recipients: [{ address: `desk@${org.domain}`, organizationId: org.id, domainId: domains[0]!.id }],
        clientAddress: '192.0.2.7',
        helo: 'outside.example',
        tls: true,
      },
    );
    return ids[0]!;
  };
  await receive({ from: 'ada@outside.example', to: `desk@${org.domain}`, subject: 'Plain', text: 'Hello' });
  const rich = await receive({
    from: 'Ada <ada@outside.example>',
    to: `desk@${org.domain}`,
    cc: 'bob@outside.example',
    replyTo: 'ada+replies@outside.example',
    subject: 'With parts',
    html: '<p><img src="cid:dot@outside.example"></p>',
    attachments: [
      { filename: 'dot.gif', content: Buffer.from('R0lGODlhAQABAAAAACw=', 'base64'), cid: 'dot@outside.example' },
      { filename: 'notes.txt', content: 'notes' },
    ],
  });
  const list = await ok('GET', '/emails/receiving');
  assertList(list, 'GET /emails/receiving');
  assert.equal(list.data[0].id, rich);
  const page = await ok('GET', '/emails/receiving?limit=1');
  assert.equal(page.has_more, true);
  await ok('GET', `/emails/receiving?limit=1&after=${page.data[0].id}`);
  const email = await ok('GET', `/emails/receiving/${rich}`);
  assert.deepEqual(
    [email.object, email.cc, email.reply_to],
    ['email', ['bob@outside.example'], ['ada+replies@outside.example']],
  );
  await ok('GET', `/emails/receiving/${rich}?html_format=cid`);
  const attachments = await ok('GET', `/emails/receiving/${rich}/attachments`);
  assertList(attachments, 'GET /emails/receiving/:id/attachments');
  assert.equal(attachments.data.length, 2);
  await ok('GET', `/emails/receiving/${rich}/attachments/${attachments.data[1].id}`);
  check([
    'emails/list-receiving',
    'emails/get-receiving',
    'emails/list-receiving-attachments',
    'emails/get-receiving-attachment',
  ]);
});

test('emails', async () => {
  const { ok, check } = area();
  const htmlOnly = await ok('POST', '/emails', {
    from: `Acme <hello@${org.domain}>`,
    to: ['html-only@example.com'],
    subject: 'Hello',
    html: '<p>Hi</p>',
    tags: [{ name: 'category', value: 'welcome' }],
    attachments: [{ filename: 'a.txt', content: Buffer.from('attached').toString('base64') }],
  });
  const textOnly = await ok('POST', '/emails', {
    from: `hello@${org.domain}`,
    to: 'text-only@example.com',
    subject: 'Plain',
    text: 'plain',
    scheduled_at: new Date(Date.now() + 3600_000).toISOString(),
  });
  // Tags in Mailroom's object form read back in Resend's list form like any others.
  const objectTags = await ok(
    'POST',
    '/emails',
    { from: `hello@${org.domain}`, to: 'tags@example.com', subject: 'Tags', text: 't', tags: { kind: 'receipt' } },
    { notResendsForm: true },
  );
  await ok('POST', '/emails/batch', [
    { from: `hello@${org.domain}`, to: ['one@example.com'], subject: '1', text: 'one' },
    { from: `hello@${org.domain}`, to: ['two@example.com'], subject: '2', html: '<p>two</p>' },
  ]);

  assertList(await ok('GET', '/emails?limit=10'), 'GET /emails');
  const html = await ok('GET', `/emails/${htmlOnly.id}`);
  assert.equal(html.text, null, 'no text: null, as the SDK types it');
  const text = await ok('GET', `/emails/${textOnly.id}`);
  assert.equal(text.html, null, 'no html: null, as the SDK types it');
  assert.deepEqual((await ok('GET', `/emails/${objectTags.id}`)).tags, [{ name: 'kind', value: 'receipt' }]);
  // Taken for its first delivery attempt (what a worker does first; none runs here): last_event sent.
  await takeMessage(t.db, htmlOnly.id);
  assert.equal((await ok('GET', `/emails/${htmlOnly.id}`)).last_event, 'sent');
  await ok('GET', '/emails?last_event=sent');

  await ok('PATCH', `/emails/${textOnly.id}`, { scheduled_at: new Date(Date.now() + 7200_000).toISOString() });
  // Resend takes scheduled_at in plain English too.
  await ok('PATCH', `/emails/${textOnly.id}`, { scheduled_at: 'in 3 hours' });
  const metrics = await ok('GET', '/emails/metrics');
  assert.equal(metrics.object, 'metrics');
  await ok('POST', `/emails/${textOnly.id}/cancel`);
  assert.equal((await ok('GET', `/emails/${textOnly.id}`)).last_event, 'canceled');
  const attachments = await ok('GET', `/emails/${htmlOnly.id}/attachments`);
  assertList(attachments, 'GET /emails/:id/attachments');
  await ok('GET', `/emails/${htmlOnly.id}/attachments/${attachments.data[0].id}`);
  check([
    'emails/send',
    'emails/send-batch',
    'emails/list',
    'emails/get',
    'emails/update',
    'emails/cancel',
    'emails/list-attachments',
    'emails/get-attachment',
    'emails/metrics',
  ]);
});

test('api-keys', async () => {
  const { ok, check } = area();
  const key = await ok('POST', '/api-keys', { name: 'Production', permission: 'sending_access' });
  assert.match(key.token, /^mr_/);
  assertList(await ok('GET', '/api-keys'), 'GET /api-keys');
  const page = await ok('GET', '/api-keys?limit=1');
  assert.equal(page.has_more, true, 'three keys, one a page');
  await ok('PATCH', `/api-keys/${key.id}`, { name: 'Production (web)' });
  const renamed = (await ok('GET', '/api-keys')).data.find((each: { id: string }) => each.id === key.id);
  assert.equal(renamed.name, 'Production (web)');
  assert.ok('last_used_at' in renamed);
  await ok('DELETE', `/api-keys/${key.id}`);
  check(['api-keys/create', 'api-keys/list', 'api-keys/update', 'api-keys/remove']);
});

test('templates', async () => {
  const { ok, check } = area();
  // No subject and no text: both read null, as the SDK types them.
  const template = await ok('POST', '/templates', { name: 'welcome', html: '<p>Hi {{{NAME}}}</p>' });
  const read = await ok('GET', `/templates/${template.id}`);
  assert.deepEqual([read.subject, read.text], [null, null]);
  assertList(await ok('GET', '/templates'), 'GET /templates');
  await ok('GET', '/templates?limit=1');
  await ok('PATCH', `/templates/${template.id}`, { name: 'welcome-2', subject: 'Welcome', text: 'Hi' });
  await ok('POST', `/templates/${template.id}/publish`);
  assert.equal((await ok('GET', `/templates/${template.id}`)).status, 'published');
  const copy = await ok('POST', `/templates/${template.id}/duplicate`);
  assert.equal((await ok('GET', `/templates/${copy.id}`)).status, 'draft');
  await ok('DELETE', `/templates/${copy.id}`);
  await ok('DELETE', `/templates/${template.id}`);
  check([
    'templates/create',
    'templates/get',
    'templates/list',
    'templates/update',
    'templates/publish',
    'templates/duplicate',
    'templates/remove',
  ]);
});

test('topics and contacts', async () => {
  const { ok, check } = area();
  const topic = await ok('POST', '/topics', { name: 'News', default_subscription: 'opt_in' });
  const described = await ok('POST', '/topics', {
    name: 'Digest',
    default_subscription: 'opt_out',
    description: 'Weekly',
  });
  // No description: the field is left out (the SDK types it description?: string).
  assert.ok(!('description' in (await ok('GET', `/topics/${topic.id}`))));
  const topics = await ok('GET', '/topics');
  assertList(topics, 'GET /topics');
  assert.equal((await ok('GET', '/topics?limit=1')).has_more, true);
  await ok('PATCH', `/topics/${topic.id}`, { name: 'Newsletter', description: 'Monthly' });
  await ok('GET', `/topics/${topic.id}`);

  // No last name: null, as the SDK types it.
  const contact = await ok('POST', '/contacts', { email: 'ada@example.com', first_name: 'Ada', unsubscribed: false });
  assertList(await ok('GET', '/contacts'), 'GET /contacts');
  assert.equal((await ok('GET', `/contacts/${contact.id}`)).last_name, null);
  await ok('GET', '/contacts/ada@example.com');
  await ok('PATCH', `/contacts/${contact.id}`, { last_name: 'Lovelace' });
  // A contact's topics: Resend's documented body, and the bare array its Node SDK sends.
  await ok('PATCH', `/contacts/${contact.id}/topics`, { topics: [{ id: topic.id, subscription: 'opt_out' }] });
  await ok('PATCH', `/contacts/${contact.id}/topics`, [{ id: described.id, subscription: 'opt_in' }], {
    notResendsForm: true,
  });
  const choices = await ok('GET', `/contacts/${contact.id}/topics`);
  assertList(choices, 'GET /contacts/:id/topics');
  assert.deepEqual(
    Object.fromEntries(
      choices.data.map((choice: { id: string; subscription: string }) => [choice.id, choice.subscription]),
    ),
    { [topic.id]: 'opt_out', [described.id]: 'opt_in' },
  );
  // The SDK's RemoveContactsResponseSuccess reads the id as `contact`; the document as `id`.
  assert.deepEqual(await ok('DELETE', `/contacts/${contact.id}`), {
    object: 'contact',
    id: contact.id,
    contact: contact.id,
    deleted: true,
  });
  await ok('DELETE', `/topics/${topic.id}`);
  check([
    'topics/create',
    'topics/get',
    'topics/list',
    'topics/update',
    'topics/remove',
    'contacts/create',
    'contacts/list',
    'contacts/get',
    'contacts/update',
    'contacts/remove',
    'contacts/update-topics',
    'contacts/list-topics',
  ]);
});

test('contact properties, segments and audiences', async () => {
  const { ok, check } = area();
  const property = await ok('POST', '/contact-properties', { key: 'company', type: 'string', fallback_value: 'n/a' });
  const seats = await ok('POST', '/contact-properties', { key: 'seats', type: 'number' });
  assertList(await ok('GET', '/contact-properties'), 'GET /contact-properties');
  assert.equal((await ok('GET', '/contact-properties?limit=1')).has_more, true);
  await ok('GET', `/contact-properties/${property.id}`);
  await ok('PATCH', `/contact-properties/${property.id}`, { fallback_value: 'unknown' });

  const segment = await ok('POST', '/segments', { name: 'Customers' });
  await ok('POST', '/segments', { name: 'Trial' });
  assertList(await ok('GET', '/segments'), 'GET /segments');
  assert.equal((await ok('GET', '/segments?limit=1')).has_more, true);
  await ok('GET', `/segments/${segment.id}`);
  const audience = await ok('POST', '/audiences', { name: 'Legacy' });
  await ok('GET', '/audiences');
  await ok('GET', `/audiences/${audience.id}`);

  // Resend's document lists segment ids; its Node SDK sends { id } objects.
  const contact = await ok('POST', '/contacts', {
    email: 'segmented@example.com',
    properties: { company: 'Acme', seats: 3 },
    segments: [segment.id],
  });
  await ok(
    'POST',
    '/contacts',
    { email: 'sdk-form@example.com', segments: [{ id: segment.id }] },
    { notResendsForm: true },
  );
  await ok('POST', '/contacts', { email: 'legacy@example.com', audience_id: audience.id });
  await ok('PATCH', `/contacts/${contact.id}`, { properties: { seats: 4 } });
  const read = await ok('GET', `/contacts/${contact.id}`);
  assert.deepEqual(read.properties, {
    company: { type: 'string', value: 'Acme' },
    seats: { type: 'number', value: 4 },
  });
  assert.equal((await ok('GET', `/contacts?segment_id=${segment.id}`)).data.length, 2);
  await ok('POST', `/contacts/${contact.id}/segments/${audience.id}`);
  assertList(await ok('GET', `/contacts/${contact.id}/segments`), 'GET /contacts/:id/segments');
  await ok('DELETE', `/contacts/${contact.id}/segments/${audience.id}`);

  await ok('DELETE', `/audiences/${audience.id}`);
  await ok('DELETE', `/segments/${segment.id}`);
  await ok('DELETE', `/contact-properties/${property.id}`);
  await ok('DELETE', `/contact-properties/${seats.id}`);
  check([
    'contact-properties/create',
    'contact-properties/list',
    'contact-properties/get',
    'contact-properties/update',
    'contact-properties/remove',
    'segments/create',
    'segments/list',
    'segments/get',
    'segments/remove',
    'audiences/create',
    'audiences/list',
    'audiences/get',
    'audiences/remove',
    'contacts/create',
    'contacts/update',
    'contacts/get',
    'contacts/list',
    'contacts/add-segment',
    'contacts/list-segments',
    'contacts/remove-segment',
  ]);
});

test('segments with a filter', async () => {
  const { ok, check } = area();
  await ok('POST', '/contact-properties', { key: 'plan', type: 'string' });
  await ok('POST', '/contacts', { email: 'pro@filtered.example', properties: { plan: 'pro' } });
  await ok('POST', '/contacts', { email: 'free@filtered.example', properties: { plan: 'free' } });
  const filter = {
    type: 'and',
    rules: [
      { type: 'rule', field: 'email', operator: 'ends_with', value: '@filtered.example' },
      { type: 'rule', field: 'properties.plan', operator: 'eq', value: 'pro' },
    ],
  };
  const segment = await ok('POST', '/segments', { name: 'Pro', filter });
  assert.deepEqual((await ok('GET', `/segments/${segment.id}`)).filter, filter);
  const members = await ok('GET', `/contacts?segment_id=${segment.id}`);
  assert.deepEqual(
    members.data.map((contact: { email: string }) => contact.email),
    ['pro@filtered.example'],
  );
  // The filter changed, then removed: Mailroom's own PATCH (Resend's SDK has segments.update, its
  // document does not); what GET answers after each stays Resend's shape.
  const widened = { type: 'rule', field: 'email', operator: 'ends_with', value: '@filtered.example' };
  await ok('PATCH', `/segments/${segment.id}`, { filter: widened }, { mailroomsOwn: true });
  assert.deepEqual((await ok('GET', `/segments/${segment.id}`)).filter, widened);
  assert.equal((await ok('GET', `/contacts?segment_id=${segment.id}`)).data.length, 2);
  await ok('PATCH', `/segments/${segment.id}`, { name: 'Everyone filtered', filter: null }, { mailroomsOwn: true });
  const plain = await ok('GET', `/segments/${segment.id}`);
  assert.deepEqual([plain.name, 'filter' in plain], ['Everyone filtered', false]);
  assertList(await ok('GET', '/segments'), 'GET /segments');
  await ok('DELETE', `/segments/${segment.id}`);
  check([
    'contact-properties/create',
    'contacts/create',
    'segments/create',
    'segments/get',
    'contacts/list',
    'segments/list',
    'segments/remove',
  ]);
});

test('contact imports', async () => {
  const { ok, check } = area();
  const segment = await ok('POST', '/segments', { name: 'Imported' });
  /** Resend's multipart form: the file, and the options as JSON text. */
  const form = (csv: string, fields: Record<string, string> = {}) => {
    const body = new FormData();
    body.append('file', new Blob([csv], { type: 'text/csv' }), 'contacts.csv');
    for (const [name, value] of Object.entries(fields)) body.append(name, value);
    return body;
  };
  const mapped = await ok(
    'POST',
    '/contacts/imports',
    form('Email,First Name\r\nann@imported.example,Ann\r\nnot-an-address,Bad\r\n', {
      column_map: JSON.stringify({ email: 'Email', first_name: 'First Name' }),
      on_conflict: 'upsert',
      segments: JSON.stringify([{ id: segment.id }]),
    }),
  );
  // Queued (no worker runs in this file), then run to the end as the worker would.
  assert.equal((await ok('GET', `/contacts/imports/${mapped.id}`)).status, 'queued');
  assert.equal(await runImport(t.db, mapped.id), 'finished');
  const done = await ok('GET', `/contacts/imports/${mapped.id}`);
  assert.deepEqual(
    [done.status, done.counts],
    ['completed', { total: 2, created: 1, updated: 0, skipped: 0, failed: 1 }],
  );
  await ok('POST', '/contacts/imports', form('email\nben@imported.example\n'));
  const list = await ok('GET', '/contacts/imports');
  assertList(list, 'GET /contacts/imports');
  assert.equal((await ok('GET', '/contacts/imports?limit=1')).has_more, true);
  check(['segments/create', 'contacts/create-import', 'contacts/get-import', 'contacts/list-imports']);
});

test('broadcasts', async () => {
  const { ok, check } = area();
  const segment = await ok('POST', '/segments', { name: 'Readers' });
  const topic = await ok('POST', '/topics', { name: 'Announcements', default_subscription: 'opt_in' });
  const from = `Acme <news@${org.domain}>`;
  const full = await ok('POST', '/broadcasts', {
    name: 'November',
    segment_id: segment.id,
    from,
    subject: 'November news',
    reply_to: ['replies@example.com'],
    preview_text: 'What is new',
    html: '<p>Hi {{{FIRST_NAME}}}</p>',
    text: 'Hi {{{FIRST_NAME}}}',
    topic_id: topic.id,
  });
  // Resend's older audience_id; no name, reply-to, preview text, topic or time: each reads as the SDK
  // types it.
  // (The document requires segment_id; the SDK still sends audienceId alone.)
  const bare = await ok(
    'POST',
    '/broadcasts',
    { audience_id: segment.id, from, subject: 'Bare', text: 'Hello' },
    { notResendsForm: true },
  );
  const read = await ok('GET', `/broadcasts/${bare.id}`);
  assert.deepEqual(
    [read.name, read.reply_to, read.preview_text, read.topic_id, read.scheduled_at, read.sent_at],
    ['', null, null, null, null, null],
  );
  await ok('GET', `/broadcasts/${full.id}`);
  assertList(await ok('GET', '/broadcasts'), 'GET /broadcasts');
  const page = await ok('GET', '/broadcasts?limit=1');
  assert.equal(page.has_more, true, 'two broadcasts, one a page');
  await ok('GET', `/broadcasts?limit=1&after=${page.data[0].id}`);
  await ok('PATCH', `/broadcasts/${full.id}`, { subject: 'November news, again', reply_to: ['desk@example.com'] });

  // Scheduled, then canceled back to a draft; then sent at once (queued: no worker runs here).
  await ok('POST', `/broadcasts/${full.id}/send`, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() });
  assert.equal((await ok('GET', `/broadcasts/${full.id}`)).status, 'scheduled');
  await ok('POST', `/broadcasts/${full.id}/cancel`);
  assert.equal((await ok('GET', `/broadcasts/${full.id}`)).status, 'draft');
  await ok('POST', `/broadcasts/${full.id}/send`, {});
  const sending = await ok('GET', `/broadcasts/${full.id}`);
  assert.notEqual(sending.status, 'draft');
  await ok('GET', '/broadcasts');

  // The read side over a copy made as the fan-out makes one (an ordinary email marked with the
  // broadcast), clicked, and a contact left out as suppressed.
  await t.db.query(`UPDATE broadcasts SET status = 'sent', sent_at = now(), completed_at = now() WHERE id = $1`, [
    bare.id,
  ]);
  const reader = await ok('POST', '/contacts', { email: 'reader@broadcast.example', segments: [segment.id] });
  const left = await ok('POST', '/contacts', { email: 'left@broadcast.example', segments: [segment.id] });
  const copy = await ok('POST', '/emails', {
    from,
    to: 'reader@broadcast.example',
    subject: 'Bare',
    html: '<a href="https://example.com/one">one</a>',
  });
  await t.db.query('UPDATE emails SET broadcast_id = $1 WHERE id = $2', [bare.id, copy.id]);
  await t.db.query(
    `INSERT INTO broadcast_recipients (broadcast_id, contact_id, email, status, email_id)
     VALUES ($1, $2, 'reader@broadcast.example', 'queued', $3)`,
    [bare.id, reader.id, copy.id],
  );
  await t.db.query(
    `INSERT INTO broadcast_recipients (broadcast_id, contact_id, email, status, skip_reason)
     VALUES ($1, $2, 'left@broadcast.example', 'skipped', 'suppressed')`,
    [bare.id, left.id],
  );
  await t.db.query('UPDATE organizations SET click_tracking = true WHERE id = $1', [org.id]);
  try {
    const click = { ipAddress: '192.0.2.1', userAgent: 'test' };
    const recipient = 'reader@broadcast.example';
    assert.ok(await recordClick(t.db, { emailId: copy.id, recipient, url: 'https://example.com/one', ...click }));
  } finally {
    await t.db.query('UPDATE organizations SET click_tracking = false WHERE id = $1', [org.id]);
  }
  const clicked = await ok('GET', `/broadcasts/${bare.id}/recipients?type=clicked`);
  assertList(clicked, 'GET /broadcasts/:id/recipients');
  assert.deepEqual(
    clicked.data.map((row: { email: string; count: number }) => [row.email, row.count]),
    [['reader@broadcast.example', 1]],
  );
  const suppressed = await ok('GET', `/broadcasts/${bare.id}/recipients?type=suppressed&limit=1`);
  assert.deepEqual(
    suppressed.data.map((row: { email: string }) => row.email),
    ['left@broadcast.example'],
  );
  const links = await ok('GET', `/broadcasts/${bare.id}/clicked-links`);
  assertList(links, 'GET /broadcasts/:id/clicked-links');
  assert.deepEqual(
    links.data.map((row: { url: string; clicks: number }) => [row.url, row.clicks]),
    [['https://example.com/one', 1]],
  );
  assert.equal((await ok('GET', `/broadcasts/${bare.id}`)).stats?.clicked, 1);

  // A draft is removed; a sent one stays as the record of its copies.
  const removable = await ok('POST', '/broadcasts', { segment_id: segment.id, from, subject: 'Gone', text: 'x' });
  await ok('DELETE', `/broadcasts/${removable.id}`);
  check([
    'segments/create',
    'topics/create',
    'broadcasts/create',
    'broadcasts/get',
    'broadcasts/list',
    'broadcasts/update',
    'broadcasts/send',
    'broadcasts/cancel',
    'broadcasts/recipients',
    'broadcasts/list-clicked-links',
    'broadcasts/remove',
    'contacts/create',
    'emails/send',
  ]);
});

test('webhooks', async () => {
  const { ok, call, check } = area();
  const hook = await ok('POST', '/webhooks', {
    endpoint: 'http://127.0.0.1:9/hook',
    events: ['email.sent', 'email.delivered', 'email.received'],
  });
  assert.match(hook.signing_secret, /^whsec_/);
  await ok('POST', '/webhooks', { endpoint: 'http://127.0.0.1:9/other', events: ['email.bounced'] });
  await ok('PATCH', `/webhooks/${hook.id}`, { status: 'disabled' });
  assert.equal((await ok('GET', `/webhooks/${hook.id}`)).status, 'disabled');
  await ok('PATCH', `/webhooks/${hook.id}`, { status: 'enabled', events: ['email.sent'] });
  // Listing and deleting endpoints need a dashboard session; a plain API key is refused in the envelope.
  const refused = await call('GET', '/webhooks');
  assert.deepEqual([refused.status, (refused.body as { name: string }).name], [401, 'session_required']);
  assertList(await ok('GET', '/webhooks', undefined, { token: org.session }), 'GET /webhooks');
  assert.equal((await ok('GET', '/webhooks?limit=1', undefined, { token: org.session })).has_more, true);
  await ok('DELETE', `/webhooks/${hook.id}`, undefined, { token: org.session });
  check(['webhooks/create', 'webhooks/get', 'webhooks/update', 'webhooks/list', 'webhooks/remove']);
});

test('suppressions', async () => {
  const { ok, check } = area();
  const added = await ok('POST', '/suppressions', { email: 'blocked@example.com' });
  await ok('GET', '/suppressions');
  await ok('GET', '/suppressions/blocked@example.com');
  assert.equal((await ok('GET', `/suppressions/${added.id}`)).email, 'blocked@example.com');
  await ok('DELETE', `/suppressions/${added.id}`);
  await ok('POST', '/suppressions/batch/add', { emails: ['one@example.com', 'two@example.com'] });
  await ok('POST', '/suppressions/batch/remove', { emails: ['one@example.com', 'two@example.com'] });
  check([
    'suppressions/add',
    'suppressions/list',
    'suppressions/get',
    'suppressions/remove',
    'suppressions/batch-add',
    'suppressions/batch-remove',
  ]);
});

test('logs', async () => {
  const { ok, check } = area();
  // The request log is written a moment after the answer: wait for this test's own request to be there
  // (earlier tests' requests, POST /topics among them, are in the log already).
  const topic = await ok('POST', '/topics', { name: 'Logged', default_subscription: 'opt_in' });
  let logged: { id: string; response_body: { id?: string } | null } | undefined;
  for (let tries = 0; tries < 100 && logged === undefined; tries += 1) {
    const list = await ok('GET', '/logs?limit=100');
    assertList(list, 'GET /logs');
    const entries = list.data as { id: string; method: string; endpoint: string }[];
    const newest = entries.find((entry) => entry.method === 'POST' && entry.endpoint === '/topics');
    const entry = newest && (await ok('GET', `/logs/${newest.id}`));
    if (entry?.response_body?.id === topic.id) logged = entry;
    else await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(logged, "the log has this test's POST /topics");
  check(['topics/create', 'logs/list', 'logs/get']);
});

test('events', async () => {
  const { ok, check } = area();
  const created = await ok('POST', '/events', { name: 'conformance.signed_up', schema: { plan: 'string' } });
  await ok('GET', '/events');
  await ok('GET', '/events?limit=1');
  await ok('GET', `/events/${created.id}`);
  await ok('GET', '/events/conformance.signed_up');
  await ok('PATCH', `/events/${created.id}`, { schema: { plan: 'string', seats: 'number' } });
  const payload = { plan: 'pro', seats: 2 };
  await ok('POST', '/events/send', { event: 'conformance.signed_up', email: 'signed-up@example.com', payload });
  const contact = await ok('POST', '/contacts', { email: 'events-contact@example.com' });
  await ok('POST', '/events/send', { event: 'conformance.signed_up', contact_id: contact.id, payload });
  await ok('PATCH', '/events/conformance.signed_up', { schema: null });
  await ok('DELETE', `/events/${created.id}`);
  check([
    'events/create',
    'events/list',
    'events/get',
    'events/update',
    'events/send',
    'events/remove',
    'contacts/create',
  ]);
});

test('automations', async () => {
  const { ok, call, check } = area();
  const template = await ok('POST', '/templates', { name: 'automation', html: '<p>Welcome</p>' });
  await ok('POST', `/templates/${template.id}/publish`);
  const created = await ok('POST', '/automations', {
    name: 'Welcome series',
    status: 'disabled',
    steps: [
      { key: 'start', type: 'trigger', config: { event_name: 'user.created' } },
      { key: 'welcome', type: 'send_email', config: { template: { id: template.id }, subject: 'Welcome' } },
      { key: 'pause', type: 'delay', config: { duration: '30 minutes' } },
      {
        key: 'wait_pay',
        type: 'wait_for_event',
        config: { event_name: 'payment.done', timeout: '1 hour' },
      },
      { key: 'paid', type: 'condition', config: { type: 'rule', field: 'event.plan', operator: 'eq', value: 'pro' } },
      { key: 'update', type: 'contact_update', config: { first_name: { var: 'first_name' }, unsubscribed: false } },
      { key: 'forget', type: 'contact_delete', config: {} },
    ],
    connections: [
      { from: 'start', to: 'welcome' },
      { from: 'welcome', to: 'pause', type: 'default' },
      { from: 'pause', to: 'wait_pay' },
      { from: 'wait_pay', to: 'paid', type: 'event_received' },
      { from: 'wait_pay', to: 'forget', type: 'timeout' },
      { from: 'paid', to: 'update', type: 'condition_met' },
    ],
  });
  assertList(await ok('GET', '/automations'), 'GET /automations');
  await ok('GET', '/automations?status=disabled&limit=1');
  assert.equal((await ok('GET', `/automations/${created.id}`)).steps.length, 7);
  await ok('PATCH', `/automations/${created.id}`, { name: 'Welcome series 2', status: 'enabled' });
  await ok('PATCH', `/automations/${created.id}`, {
    steps: [
      { key: 'start', type: 'trigger', config: { event_name: 'user.created' } },
      { key: 'pause', type: 'delay', config: { duration: '1 hour' } },
    ],
    connections: [{ from: 'start', to: 'pause' }],
  });
  // A run as the engine writes one, with a step.
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO automation_runs (organization_id, automation_id, version, event_id, contact_id, contact_email,
                                  started_at)
     VALUES ($1, $2, 2, gen_random_uuid(), gen_random_uuid(), 'someone@example.com', now()) RETURNING id, contact_id`,
    [org.id, created.id],
  );
  await t.db.query(
    `INSERT INTO automation_run_steps (run_id, seq, organization_id, automation_id, contact_id, step_key, step_type,
                                       status, started_at, completed_at)
     SELECT id, 1, organization_id, automation_id, contact_id, 'start', 'trigger', 'completed', now(), now()
       FROM automation_runs WHERE id = $1`,
    [rows[0]!.id],
  );
  assertList(await ok('GET', `/automations/${created.id}/runs`), 'GET /automations/:id/runs');
  await ok('GET', `/automations/${created.id}/runs?status=running,failed&limit=10`);
  await ok('GET', `/automations/${created.id}/runs/${rows[0]!.id}`);
  await ok('GET', `/automations/${created.id}/step-counts`, undefined, { mailroomsOwn: true });
  const copy = await ok('POST', `/automations/${created.id}/duplicate`);
  await ok('POST', `/automations/${created.id}/stop`);
  await ok('DELETE', `/automations/${copy.id}`);
  await ok('DELETE', `/automations/${created.id}`);
  assert.equal((await call('GET', `/automations/${created.id}`)).status, 404);
  check([
    'templates/create',
    'templates/publish',
    'automations/create',
    'automations/list',
    'automations/get',
    'automations/update',
    'automations/list-runs',
    'automations/get-run',
    'automations/duplicate',
    'automations/stop',
    'automations/remove',
  ]);
});
