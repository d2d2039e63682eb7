// Inbound routes: the API (create, list in the order routes are tried, read, change, delete; refusals
// naming the field; organization isolation), the matcher for every recipient kind with priority and
// stop, the RCPT TO decision, and the actions queued with a received message: a forwarded copy that the
// delivery worker sends to a loopback SMTP sink, and an email.received delivery to a route's endpoint.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';
import { databaseForProcesses } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { startInboundServer, type InboundServer } from '../src/inbound/inbound-server.ts';
import { decideRecipient, queueRouteActions, routeMessage } from '../src/receiving/routes.ts';
import { compilePattern, testPattern } from '../src/receiving/route-patterns.ts';
import type { InboundRouteView as RouteView } from '../src/receiving/inbound-routes.ts';

let t: TestApp;
let sink: SmtpSink;
let delivery: TestDelivery;
let org: TestOrganization;
let other: TestOrganization;
const quiet = { error: () => {}, warn: () => {}, info: () => {} };

/** An organization whose domain receives mail. */
async function receivingOrg(label: string): Promise<TestOrganization> {
  const created = await createTestOrganization(t.db, t.config, label);
  await t.db.query('UPDATE domains SET receiving = true WHERE organization_id = $1', [created.id]);
  return created;
}

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  org = await receivingOrg('routes');
  other = await receivingOrg('routesother');
  delivery = await startTestDelivery(t);
});
after(async () => {
  await delivery.stop();
  await t.close();
  await sink.close();
});

const call = (o: TestOrganization, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
  t.app.inject({
    method,
    url,
    headers: bearer(o.fullKey),
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });

async function createRoute(o: TestOrganization, body: Record<string, unknown>): Promise<RouteView> {
  const res = await call(o, 'POST', '/inbound-routes', body);
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

async function refused(
  o: TestOrganization,
  body: unknown,
  field: string,
  status = 400,
  method: 'GET' | 'POST' | 'PATCH' = 'POST',
  url = '/inbound-routes',
) {
  const res = await call(o, method, url, body);
  assert.equal(res.statusCode, status, res.body);
  assert.equal(res.json().field, field, res.body);
  return res.json();
}

async function endpoint(o: TestOrganization, events: string[] = ['email.sent']): Promise<string> {
  const res = await call(o, 'POST', '/webhooks', { endpoint: 'http://127.0.0.1:9/hook', events });
  assert.equal(res.statusCode, 201, res.body);
  return res.json().id;
}

describe('the API', () => {
  test('creates, lists in priority order, reads, changes and deletes a route', async () => {
    const o = await receivingOrg('crud');
    const late = await createRoute(o, { match: { recipient_kind: 'catch_all' }, priority: 20 });
    const first = await createRoute(o, {
      description: 'Orders',
      priority: 10,
      match: {
        recipient: `Orders@${o.domain.toUpperCase()}`,
        recipient_kind: 'exact',
        header: { name: 'X-Shop', pattern: '^acme$' },
      },
      actions: [{ type: 'forward', to: ['ops@example.net', 'OPS@example.net'] }],
      stop: true,
    });
    assert.equal(first.object, 'inbound_route');
    assert.deepEqual(first.match, {
      recipient: `orders@${o.domain}`,
      recipient_kind: 'exact',
      header: { name: 'x-shop', pattern: '^acme$' },
    });
    assert.deepEqual(first.actions, [{ type: 'forward', to: ['ops@example.net'] }]);
    assert.equal(first.stop, true);
    assert.equal(first.enabled, true);
    assert.deepEqual(late.actions, [{ type: 'store' }], 'store is the default action');
    assert.equal(late.match.recipient, '*');
    const sameLate = await createRoute(o, { match: { recipient: '+Sales', recipient_kind: 'plus_tag' }, priority: 20 });
    assert.equal(sameLate.match.recipient, '+sales');

    const listed = (await call(o, 'GET', '/inbound-routes')).json();
    assert.equal(listed.object, 'list');
    assert.equal(listed.has_more, false);
    assert.deepEqual(
      listed.data.map((r: { id: string }) => r.id),
      [first.id, late.id, sameLate.id],
      'priority first, then oldest',
    );
    const page1 = (await call(o, 'GET', '/inbound-routes?limit=2')).json();
    assert.deepEqual(
      page1.data.map((r: { id: string }) => r.id),
      [first.id, late.id],
    );
    assert.equal(page1.has_more, true);
    const page2 = (await call(o, 'GET', `/inbound-routes?limit=2&after=${late.id}`)).json();
    assert.deepEqual(
      page2.data.map((r: { id: string }) => r.id),
      [sameLate.id],
    );
    assert.equal(page2.has_more, false);
    const back = (await call(o, 'GET', `/inbound-routes?limit=1&before=${late.id}`)).json();
    assert.deepEqual(
      back.data.map((r: { id: string }) => r.id),
      [first.id],
    );
    await refused(o, undefined, 'after', 400, 'GET', `/inbound-routes?after=${randomUUID()}`);

    assert.deepEqual((await call(o, 'GET', `/inbound-routes/${first.id}`)).json(), first);

    const changed = await call(o, 'PATCH', `/inbound-routes/${first.id}`, { priority: 30, enabled: false });
    assert.equal(changed.statusCode, 200, changed.body);
    assert.equal(changed.json().priority, 30);
    assert.equal(changed.json().enabled, false);
    assert.deepEqual(changed.json().match, first.match, 'what is not given is kept');
    assert.ok(changed.json().updated_at >= first.updated_at);
    const ids = (await call(o, 'GET', '/inbound-routes')).json().data.map((r: { id: string }) => r.id);
    assert.deepEqual(ids, [late.id, sameLate.id, first.id]);

    const deleted = await call(o, 'DELETE', `/inbound-routes/${first.id}`);
    assert.deepEqual(deleted.json(), { object: 'inbound_route', id: first.id, deleted: true });
    assert.equal((await call(o, 'GET', `/inbound-routes/${first.id}`)).statusCode, 404);
    assert.equal((await call(o, 'DELETE', `/inbound-routes/${first.id}`)).statusCode, 404);
  });

  test('refuses bad patterns and actions with a 400 naming the field, writing nothing', async () => {
    const o = await receivingOrg('refusals');
    const exact = { recipient: `a@${o.domain}`, recipient_kind: 'exact' };
    await refused(o, { match: { recipient_kind: 'regex', recipient: '(' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'regex', recipient: '^(a+)+$' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'regex', recipient: '(a|aa)*@x' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'regex', recipient: '(a)\\1' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'regex', recipient: 'a*b*c*d*' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'regex', recipient: 'a'.repeat(201) } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'exact' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'exact', recipient: 'not an address' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'exact', recipient: 'a@elsewhere.example' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'domain', recipient: o.domain } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'plus_tag', recipient: '+a b' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'catch_all', recipient: '*@x.com' } }, 'match.recipient');
    await refused(o, { match: { recipient_kind: 'anything', recipient: '*' } }, 'match.recipient_kind');
    await refused(o, { match: { ...exact, header: { name: 'Sub:ject', pattern: 'x' } } }, 'match.header.name');
    await refused(
      o,
      { match: { ...exact, header: { name: 'Subject', pattern: '([a-z]+)*' } } },
      'match.header.pattern',
    );
    await refused(o, { match: exact, actions: [] }, 'actions');
    await refused(o, { match: exact, actions: [{ type: 'bounce' }] }, 'actions.0.type');
    await refused(o, { match: exact, actions: [{ type: 'forward' }] }, 'actions.0.to');
    await refused(o, { match: exact, actions: [{ type: 'forward', to: ['a@x.com', 'nope'] }] }, 'actions.0.to.1');
    const eleven = Array.from({ length: 11 }, (_, i) => `r${i}@example.net`);
    await refused(o, { match: exact, actions: [{ type: 'forward', to: eleven }] }, 'actions.0.to');
    await refused(o, { match: exact, actions: [{ type: 'store', to: ['a@x.com'] }] }, 'actions.0.to');
    await refused(
      o,
      { match: exact, actions: [{ type: 'webhook', endpoint_id: randomUUID() }] },
      'actions.0.endpoint_id',
    );
    const theirs = await endpoint(other);
    await refused(o, { match: exact, actions: [{ type: 'webhook', endpoint_id: theirs }] }, 'actions.0.endpoint_id');
    await refused(o, { match: exact, actions: [{ type: 'reject', message: 'no\nway' }] }, 'actions.0.message');
    await refused(o, { match: exact, actions: [{ type: 'store' }, { type: 'reject' }] }, 'actions');
    await refused(o, { match: exact, priority: -1 }, 'priority');
    await refused(o, { match: exact, colour: 'red' }, 'colour');
    assert.equal((await call(o, 'GET', '/inbound-routes')).json().data.length, 0, 'nothing was written');
  });

  test('a route with a header condition cannot reject, on create and on change', async () => {
    const o = await receivingOrg('rejectheader');
    const header = { name: 'Subject', pattern: 'spam' };
    const body = {
      match: { recipient: `a@${o.domain}`, recipient_kind: 'exact', header },
      actions: [{ type: 'reject', message: 'Go away' }],
    };
    const error = await refused(o, body, 'actions.0');
    assert.match(error.message, /header condition cannot reject/);
    const rejecting = await createRoute(o, { ...body, match: { recipient: `a@${o.domain}`, recipient_kind: 'exact' } });
    await refused(
      o,
      { match: { recipient: `a@${o.domain}`, recipient_kind: 'exact', header } },
      'actions.0',
      400,
      'PATCH',
      `/inbound-routes/${rejecting.id}`,
    );
    assert.equal((await call(o, 'GET', `/inbound-routes/${rejecting.id}`)).json().match.header, undefined);
  });

  test("another organization's route is a 404 to every verb, and is not listed", async () => {
    const mine = await createRoute(org, { match: { recipient_kind: 'catch_all' }, priority: 999_999 });
    assert.equal((await call(other, 'GET', `/inbound-routes/${mine.id}`)).statusCode, 404);
    assert.equal((await call(other, 'PATCH', `/inbound-routes/${mine.id}`, { enabled: false })).statusCode, 404);
    assert.equal((await call(other, 'DELETE', `/inbound-routes/${mine.id}`)).statusCode, 404);
    assert.equal((await call(other, 'GET', '/inbound-routes/not-a-uuid')).statusCode, 404);
    const theirs = (await call(other, 'GET', '/inbound-routes')).json().data.map((r: { id: string }) => r.id);
    assert.ok(!theirs.includes(mine.id));
    assert.equal((await call(org, 'GET', `/inbound-routes/${mine.id}`)).json().enabled, true, 'untouched');
    await call(org, 'DELETE', `/inbound-routes/${mine.id}`);
  });

  test('a sending-access key may not use routes', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/inbound-routes', headers: bearer(org.sendingKey) });
    assert.equal(res.statusCode, 401);
  });
});

describe('the matcher', () => {
  test('every recipient kind, in priority order, up to the first matching route with stop', async () => {
    const o = await receivingOrg('matcher');
    const d = o.domain;
    const exact = await createRoute(o, { priority: 1, match: { recipient: `Help@${d}`, recipient_kind: 'exact' } });
    const domain = await createRoute(o, { priority: 2, match: { recipient: `*@${d}`, recipient_kind: 'domain' } });
    const tag = await createRoute(o, { priority: 3, match: { recipient: '+orders', recipient_kind: 'plus_tag' } });
    const regex = await createRoute(o, {
      priority: 4,
      match: { recipient: 'ticket-[0-9]+@.*', recipient_kind: 'regex' },
    });
    const header = await createRoute(o, {
      priority: 5,
      match: { recipient_kind: 'catch_all', header: { name: 'X-Priority', pattern: '^1' } },
    });
    const disabled = await createRoute(o, { priority: 6, match: { recipient_kind: 'catch_all' }, enabled: false });
    const stopper = await createRoute(o, {
      priority: 7,
      match: { recipient: '+stop', recipient_kind: 'plus_tag' },
      stop: true,
    });
    const all = await createRoute(o, { priority: 8, match: { recipient_kind: 'catch_all' } });

    const applied = async (recipients: string[], headers: Record<string, string> = {}) =>
      (await routeMessage(t.db, o.id, recipients, headers)).applied.map((a) => a.route_id);
    assert.deepEqual(await applied([`HELP@${d}`]), [exact.id, domain.id, all.id]);
    assert.deepEqual(await applied([`x+Orders@${d}`]), [domain.id, tag.id, all.id]);
    assert.deepEqual(await applied([`orders@${d}`]), [domain.id, all.id], 'no tag: not a plus_tag match');
    assert.deepEqual(await applied([`ticket-42@${d}`]), [domain.id, regex.id, all.id]);
    assert.deepEqual(await applied([`ticket-42x@${d}`]), [domain.id, all.id], 'the regex is over the whole address');
    assert.deepEqual(await applied([`a@${d}`], { 'x-priority': '1 (Highest)' }), [domain.id, header.id, all.id]);
    assert.deepEqual(await applied([`a@${d}`], { 'X-Priority': '3' }), [domain.id, all.id]);
    assert.deepEqual(await applied([`a+stop@${d}`]), [domain.id, stopper.id], 'stop ends the walk');
    assert.deepEqual(await applied([`a@${d}`, `b+orders@${d}`]), [domain.id, tag.id, all.id], 'any recipient');
    assert.ok(!(await applied([`a@${d}`])).includes(disabled.id));
  });

  test('forwards are gathered once each, with the recipient they are forwarded for; webhooks once each', async () => {
    const o = await receivingOrg('gather');
    const hook = await endpoint(o);
    await createRoute(o, {
      priority: 1,
      match: { recipient: `sales@${o.domain}`, recipient_kind: 'exact' },
      actions: [
        { type: 'forward', to: ['a@example.net'] },
        { type: 'webhook', endpoint_id: hook },
      ],
    });
    await createRoute(o, {
      priority: 2,
      match: { recipient_kind: 'catch_all' },
      actions: [
        { type: 'forward', to: ['A@example.net', 'b@example.net'] },
        { type: 'webhook', endpoint_id: hook },
      ],
    });
    const result = await routeMessage(t.db, o.id, [`info@${o.domain}`, `sales@${o.domain}`], {});
    assert.deepEqual(result.forwardTo, ['a@example.net', 'b@example.net']);
    assert.deepEqual(result.forwardFrom, { 'a@example.net': `sales@${o.domain}`, 'b@example.net': `info@${o.domain}` });
    assert.deepEqual(result.webhookEndpointIds, [hook]);
  });

  test('RCPT TO: unknown domains get 5.1.1, a matching reject route 5.7.1 with its message, stop shields', async () => {
    const o = await receivingOrg('rcpt');
    const d = o.domain;
    assert.deepEqual(await decideRecipient(t.db, 'a@nowhere.example'), {
      accept: false,
      code: 550,
      message: '5.1.1 No such recipient here',
    });
    // A receiving domain not verified (its owner never proved the name) takes nothing either.
    const unproven = await receivingOrg('rcpt-unverified');
    await t.db.query(`UPDATE domains SET status = 'pending' WHERE organization_id = $1`, [unproven.id]);
    assert.deepEqual(await decideRecipient(t.db, `a@${unproven.domain}`), {
      accept: false,
      code: 550,
      message: '5.1.1 No such recipient here',
    });
    await t.db.query(`UPDATE domains SET status = 'verified' WHERE organization_id = $1`, [unproven.id]);
    assert.equal((await decideRecipient(t.db, `a@${unproven.domain}`)).accept, true);
    await createRoute(o, {
      priority: 1,
      match: { recipient: `vip@${d}`, recipient_kind: 'exact' },
      stop: true,
    });
    await createRoute(o, {
      priority: 2,
      match: { recipient_kind: 'catch_all' },
      actions: [{ type: 'reject', message: 'This domain takes mail only for vip' }],
    });
    // A header route is not tried at RCPT TO (headers are not known yet).
    await createRoute(o, {
      priority: 0,
      match: { recipient_kind: 'catch_all', header: { name: 'x', pattern: 'y' } },
      stop: true,
    });
    const accepted = await decideRecipient(t.db, `VIP@${d.toUpperCase()}`);
    assert.equal(accepted.accept, true);
    assert.equal(accepted.accept && accepted.organizationId, o.id);
    assert.deepEqual(await decideRecipient(t.db, `someone@${d}`), {
      accept: false,
      code: 550,
      message: '5.7.1 This domain takes mail only for vip',
    });
  });

  test('patterns: no catastrophic backtracking, and a slow evaluation counts as no match', () => {
    // The worst shapes the checks allow stay fast over the longest address.
    const allowed = compilePattern('.*.*.*x', 'f', true);
    const started = Date.now();
    assert.equal(testPattern(allowed, `${'a'.repeat(300)}@example.com`), false);
    assert.ok(Date.now() - started < 1000);
    // A pattern that backtracks without bound (built here, past the checks) is stopped by the time limit.
    const evil = /^(a+)+$/;
    const t0 = Date.now();
    assert.equal(testPattern(evil, `${'a'.repeat(40)}!`), false);
    assert.ok(Date.now() - t0 < 1000, 'stopped by the time limit');
    assert.throws(() => compilePattern('^(a+)+$', 'f', true), /repeated group/);
    // Not a pattern on its own, though wrapped in ^(?:…)$ it would compile and match anything.
    assert.throws(() => compilePattern('a)|(.*', 'f', true), /not a valid regular expression/);
  });

  test('a header condition on a name Object has (constructor, __proto__) matches only a header of that name', async () => {
    const o = await receivingOrg('proto-header');
    const route = await createRoute(o, {
      match: { recipient_kind: 'catch_all', header: { name: 'constructor', pattern: '.*' } },
    });
    const applied = async (headers: Record<string, string>) =>
      (await routeMessage(t.db, o.id, [`a@${o.domain}`], headers)).applied.map((a) => a.route_id);
    assert.deepEqual(await applied({}), []);
    assert.deepEqual(await applied({ subject: 'x' }), []);
    assert.deepEqual(await applied({ constructor: 'yes' }), [route.id]);
  });
});

describe('actions queued with a received message', () => {
  /** A received message stored as the listener stores one, with one attachment. */
  async function receive(o: TestOrganization, to: string, extra: { headers?: Record<string, string> } = {}) {
    const { rows } = await t.db.query<{ id: string }>(
      `INSERT INTO received_emails (organization_id, store_key, mail_from, received_for, from_address, to_addresses,
         reply_to_addresses, subject, message_id, headers, html, text, size_bytes)
       VALUES ($1, $2, 'jane@sender.example.net', $3, '"Jane Doe" <jane@sender.example.net>', $3, '{}',
               'Order 1234 arrived', '<m1@sender.example.net>', $4, '<p>Hello</p>', 'Hello', 100)
       RETURNING id`,
      [o.id, createHash('sha256').update(randomUUID()).digest(), [to], JSON.stringify(extra.headers ?? {})],
    );
    const id = rows[0]!.id;
    await t.db.query(`INSERT INTO received_email_raw (received_email_id, content) VALUES ($1, 'raw')`, [id]);
    await t.db.query(
      `INSERT INTO received_attachments (received_email_id, position, filename, content_type, content_disposition,
         size_bytes, content) VALUES ($1, 0, 'invoice.txt', 'text/plain', 'attachment', 7, 'invoice')`,
      [id],
    );
    return id;
  }

  async function route(o: TestOrganization, to: string, headers: Record<string, string> = {}) {
    const id = await receive(o, to, { headers });
    const routing = await routeMessage(t.db, o.id, [to], headers);
    await t.db.transaction((tx) => queueRouteActions(tx, o.id, id, routing));
    const { rows } = await t.db.query<{
      routes: Array<{ route_id: string; outcomes?: Array<Record<string, string>> }>;
    }>('SELECT routes FROM received_emails WHERE id = $1', [id]);
    return { id, routes: rows[0]!.routes };
  }

  test('a forward route sends a re-signed copy through the sending pipeline to the forward address', async () => {
    const o = await receivingOrg('forward');
    const support = `support@${o.domain}`;
    await createRoute(o, {
      match: { recipient: support, recipient_kind: 'exact' },
      actions: [{ type: 'store' }, { type: 'forward', to: ['desk@forward.example.net'] }],
    });
    const { routes } = await route(o, support);
    const outcome = routes[0]!.outcomes![0]!;
    assert.equal(outcome.action, 'forward');
    assert.ok(outcome.email_id, JSON.stringify(outcome));
    // A message of the organization, with its own id and timeline.
    const email = await call(o, 'GET', `/emails/${outcome.email_id}`);
    assert.equal(email.statusCode, 200, email.body);
    assert.equal(email.json().from, `Jane Doe via Mailroom <${support}>`);

    await waitFor(() => sink.transactions.some((tx) => tx.rcptTo.includes('desk@forward.example.net')), 15_000);
    const sent = sink.transactions.find((tx) => tx.rcptTo.includes('desk@forward.example.net'))!;
    const parsed = await sent.parse();
    assert.equal(parsed.subject, 'Order 1234 arrived');
    assert.equal(parsed.from?.value[0]?.address, support);
    assert.equal(parsed.from?.value[0]?.name, 'Jane Doe via Mailroom');
    assert.equal(parsed.replyTo?.value[0]?.address, 'jane@sender.example.net');
    assert.equal(parsed.text?.trim(), 'Hello');
    assert.equal(parsed.attachments[0]?.filename, 'invoice.txt');
    assert.equal(parsed.attachments[0]?.content.toString(), 'invoice');
    assert.ok(sent.raw.toString().includes('DKIM-Signature'), 'signed with the domain key');
    assert.equal(parsed.headers.get('x-mailroom-forwarded'), support);
  });

  test('a forwarded copy coming back is not forwarded again', async () => {
    const o = await receivingOrg('loop');
    const support = `support@${o.domain}`;
    await createRoute(o, {
      match: { recipient_kind: 'catch_all' },
      actions: [{ type: 'forward', to: ['desk@forward.example.net'] }],
    });
    const { routes } = await route(o, support, { 'x-mailroom-forwarded': `support@${o.domain}` });
    assert.match(routes[0]!.outcomes![0]!.skipped!, /already forwarded/);
    const { rows } = await t.db.query('SELECT 1 FROM emails WHERE organization_id = $1', [o.id]);
    assert.equal(rows.length, 0);
  });

  test("a webhook route's endpoint is told email.received once, even if not subscribed", async () => {
    const o = await receivingOrg('hook');
    const unsubscribed = await endpoint(o, ['email.sent']);
    const subscribed = await endpoint(o, ['email.received']);
    await createRoute(o, {
      match: { recipient_kind: 'catch_all' },
      actions: [
        { type: 'webhook', endpoint_id: unsubscribed },
        { type: 'webhook', endpoint_id: subscribed },
      ],
    });
    const { id, routes } = await route(o, `info@${o.domain}`);
    const { rows } = await t.db.query<{
      endpoint_id: string;
      payload: { type: string; data: Record<string, unknown> };
    }>(
      "SELECT endpoint_id, payload FROM webhook_deliveries WHERE organization_id = $1 AND event_type = 'email.received'",
      [o.id],
    );
    assert.deepEqual(
      rows.map((r) => r.endpoint_id),
      [unsubscribed],
      'the subscriber is told by the listener fan-out, not twice',
    );
    assert.equal(rows[0]!.payload.data.email_id, id);
    assert.equal(rows[0]!.payload.data.subject, 'Order 1234 arrived');
    const { rows: jobs } = await t.db.query("SELECT 1 FROM jobs WHERE queue = 'deliver-webhook' AND group_key = $1", [
      unsubscribed,
    ]);
    assert.equal(jobs.length, 1, 'its delivery job is queued');
    assert.deepEqual(
      routes[0]!.outcomes!.map((x) => [x.endpoint_id, x.delivery_id !== undefined]),
      [
        [unsubscribed, true],
        [subscribed, false],
      ],
    );
  });

  test('a failure while queueing rolls back the received message with its forwards', async () => {
    const o = await receivingOrg('atomic');
    await createRoute(o, {
      match: { recipient_kind: 'catch_all' },
      actions: [{ type: 'forward', to: ['desk@forward.example.net'] }],
    });
    const to = `info@${o.domain}`;
    const routing = await routeMessage(t.db, o.id, [to], {});
    await assert.rejects(
      t.db.transaction(async (tx) => {
        const { rows } = await tx.query<{ id: string }>(
          `INSERT INTO received_emails (organization_id, store_key, mail_from, received_for, from_address, subject, size_bytes)
           VALUES ($1, $2, 'jane@sender.example.net', $3, 'jane@sender.example.net', 'Hi', 1) RETURNING id`,
          [o.id, createHash('sha256').update(randomUUID()).digest(), [to]],
        );
        await queueRouteActions(tx, o.id, rows[0]!.id, routing);
        throw new Error('the listener failed after queueing');
      }),
      /listener failed/,
    );
    const counts = await t.db.query<{ received: number; emails: number }>(
      `SELECT (SELECT count(*)::int FROM received_emails WHERE organization_id = $1) AS received,
              (SELECT count(*)::int FROM emails WHERE organization_id = $1) AS emails`,
      [o.id],
    );
    assert.deepEqual(counts.rows[0], { received: 0, emails: 0 });
  });
});

test('the CLI adds, lists and removes routes, refusing what the API refuses', async () => {
  const { env, cleanup } = await databaseForProcesses('routes-cli');
  try {
    const cli = async (...args: string[]) => {
      const res = await runCli([...args, '--json'], env);
      assert.equal(res.code, 0, `mailroom ${args.join(' ')}: ${res.stdout}${res.stderr}`);
      return res.json as Record<string, unknown>;
    };
    const orgId = (await cli('org', 'create', '--name', 'Routes')).id as string;
    await cli('domain', 'add', '--org', orgId, 'routes.example');
    const added = await cli(
      'route',
      'add',
      '--org',
      orgId,
      '--kind',
      'exact',
      '--recipient',
      'help@routes.example',
      '--priority',
      '5',
      '--forward',
      'a@example.net',
      '--forward',
      'b@example.net',
      '--stop',
    );
    assert.equal(added.object, 'inbound_route');
    assert.deepEqual(added.actions, [{ type: 'store' }, { type: 'forward', to: ['a@example.net', 'b@example.net'] }]);
    const rejecting = await cli(
      'route',
      'add',
      '--org',
      orgId,
      '--kind',
      'catch_all',
      '--reject',
      'No',
      '--priority',
      '9',
    );
    const listed = (await cli('route', 'list', '--org', orgId)).data as Array<{ id: string }>;
    assert.deepEqual(
      listed.map((r) => r.id),
      [added.id, rejecting.id],
    );
    const plain = await runCli(['route', 'list', '--org', orgId], env);
    assert.match(
      plain.stdout,
      /#5 exact help@routes\.example -> store, forward to a@example\.net, b@example\.net, stop/,
    );

    const bad = await runCli(
      ['route', 'add', '--org', orgId, '--kind', 'regex', '--recipient', '(a+)+', '--json'],
      env,
    );
    assert.equal(bad.code, 1);
    assert.equal((bad.json!.error as { name: string }).name, 'validation_error');

    assert.deepEqual(await cli('route', 'remove', '--org', orgId, added.id as string), { id: added.id, deleted: true });
    assert.equal(((await cli('route', 'list', '--org', orgId)).data as unknown[]).length, 1);
  } finally {
    await cleanup();
  }
});

describe('through the inbound listener over SMTP', () => {
  let inbound: InboundServer;
  let o: TestOrganization;
  before(async () => {
    inbound = await startInboundServer({ db: t.db, signer: t.app.signer, host: '127.0.0.1', port: 0, log: quiet });
    o = await receivingOrg('smtp');
  });
  after(() => inbound.close());

  const client = () => nodemailerTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });

  test('a reject route refuses the recipient at RCPT TO with 550 5.7.1 and its message', async () => {
    await createRoute(o, {
      match: { recipient: `closed@${o.domain}`, recipient_kind: 'exact' },
      actions: [{ type: 'reject', message: 'This desk is closed' }],
    });
    const smtp = client();
    try {
      await assert.rejects(
        smtp.sendMail({ from: 'jane@sender.example.net', to: `closed@${o.domain}`, subject: 'x', text: 'x' }),
        (error: { responseCode?: number; response?: string }) => {
          assert.equal(error.responseCode, 550);
          assert.match(error.response ?? '', /5\.7\.1 This desk is closed/);
          return true;
        },
      );
    } finally {
      smtp.close();
    }
    const { rows } = await t.db.query('SELECT 1 FROM received_emails WHERE organization_id = $1', [o.id]);
    assert.equal(rows.length, 0, 'nothing stored');
  });

  test('a forward route delivers a copy to the sink, and a webhook route queues email.received', async () => {
    const hook = await endpoint(o, ['email.sent']);
    await createRoute(o, {
      match: { recipient: `desk@${o.domain}`, recipient_kind: 'exact' },
      actions: [
        { type: 'forward', to: ['team@forward.example.net'] },
        { type: 'webhook', endpoint_id: hook },
      ],
    });
    const smtp = client();
    try {
      await smtp.sendMail({
        from: 'Jane Doe <jane@sender.example.net>',
        to: `desk@${o.domain}`,
        subject: 'Through the listener',
        text: 'Hello desk',
      });
    } finally {
      smtp.close();
    }
    const received = await t.db.query<{ id: string }>('SELECT id FROM received_emails WHERE organization_id = $1', [
      o.id,
    ]);
    assert.equal(received.rows.length, 1);
    const { rows } = await t.db.query<{ payload: { data: { email_id: string } } }>(
      "SELECT payload FROM webhook_deliveries WHERE endpoint_id = $1 AND event_type = 'email.received'",
      [hook],
    );
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.payload.data.email_id, received.rows[0]!.id);

    const to = 'team@forward.example.net';
    await waitFor(() => sink.transactions.some((tx) => tx.rcptTo.includes(to)), 15_000);
    const parsed = await sink.transactions.find((tx) => tx.rcptTo.includes(to))!.parse();
    assert.equal(parsed.subject, 'Through the listener');
    assert.equal(parsed.replyTo?.value[0]?.address, 'jane@sender.example.net');
    assert.equal(parsed.from?.value[0]?.address, `desk@${o.domain}`);
  });
});
