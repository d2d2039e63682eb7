import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import type { ContactView } from '../src/contacts/contacts.ts';
import { subscribedAddresses } from '../src/contacts/subscriptions.ts';

describe('contacts', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;

  before(async () => {
    // The webhook endpoint the events fan out to is on loopback; nothing delivers to it in this file.
    t = await buildTestApp({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
    org = await createTestOrganization(t.db, t.config, 'contacts');
    other = await createTestOrganization(t.db, t.config, 'other');
    await observeWebhookEvents(t.app, org);
  });

  after(async () => {
    await t?.close();
  });

  const create = (payload: object, key = org.fullKey) =>
    t.app.inject({ method: 'POST', url: '/contacts', headers: bearer(key), payload });
  const get = (idOrEmail: string, key = org.fullKey) =>
    t.app.inject({ method: 'GET', url: `/contacts/${encodeURIComponent(idOrEmail)}`, headers: bearer(key) });
  const list = (query = '', key = org.fullKey) =>
    t.app.inject({ method: 'GET', url: `/contacts${query}`, headers: bearer(key) });
  const patch = (idOrEmail: string, payload: object, key = org.fullKey) =>
    t.app.inject({
      method: 'PATCH',
      url: `/contacts/${encodeURIComponent(idOrEmail)}`,
      headers: bearer(key),
      payload,
    });
  const remove = (idOrEmail: string, key = org.fullKey) =>
    t.app.inject({ method: 'DELETE', url: `/contacts/${encodeURIComponent(idOrEmail)}`, headers: bearer(key) });

  async function created(payload: object, key = org.fullKey): Promise<string> {
    const response = await create(payload, key);
    assert.equal(response.statusCode, 201, response.body);
    return response.json().id;
  }

  async function read(idOrEmail: string, key = org.fullKey): Promise<ContactView> {
    const response = await get(idOrEmail, key);
    assert.equal(response.statusCode, 200, response.body);
    return response.json();
  }

  async function topic(defaultSubscription: 'opt_in' | 'opt_out', key = org.fullKey): Promise<string> {
    const response = await t.app.inject({
      method: 'POST',
      url: '/topics',
      headers: bearer(key),
      payload: { name: `Topic ${defaultSubscription}`, default_subscription: defaultSubscription },
    });
    assert.equal(response.statusCode, 201, response.body);
    return response.json().id;
  }

  function assertError(
    response: { statusCode: number; body: string },
    status: number,
    name: string,
    field?: string,
  ): { message: string } {
    assert.equal(response.statusCode, status, response.body);
    const body = JSON.parse(response.body);
    assert.equal(body.name, name, response.body);
    if (field !== undefined) assert.equal(body.field, field, response.body);
    return body;
  }

  async function contactCount(email: string): Promise<number> {
    const { rows } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM contacts WHERE organization_id = $1 AND lower(email) = lower($2)',
      [org.id, email],
    );
    return rows[0]!.n;
  }

  /** The webhook payloads of this type written for the contact, oldest first. */
  const events = (type: string, id: string) => queuedEvents(t.db, org.id, type, { id });

  test('create, read by id and by email, update, delete', async () => {
    const response = await create({ email: 'ada@example.com', first_name: 'Ada', last_name: 'Lovelace' });
    assert.equal(response.statusCode, 201, response.body);
    assert.deepEqual(Object.keys(response.json()).sort(), ['id', 'object']);
    const { object, id } = response.json();
    assert.equal(object, 'contact');

    const contact = await read(id);
    assert.deepEqual(
      { ...contact, created_at: undefined, updated_at: undefined },
      {
        object: 'contact',
        id,
        email: 'ada@example.com',
        first_name: 'Ada',
        last_name: 'Lovelace',
        unsubscribed: false,
        topics: [],
        properties: {},
        created_at: undefined,
        updated_at: undefined,
      },
    );
    assert.equal(new Date(contact.created_at).toISOString(), contact.created_at);
    assert.equal(contact.updated_at, contact.created_at);
    assert.deepEqual(await read('ADA@Example.COM'), contact);

    const updated = await patch('Ada@example.com', { first_name: 'Augusta', unsubscribed: true });
    assert.equal(updated.statusCode, 200, updated.body);
    assert.deepEqual(updated.json(), { object: 'contact', id });
    const after = await read(id);
    assert.equal(after.first_name, 'Augusta');
    assert.equal(after.last_name, 'Lovelace');
    assert.equal(after.unsubscribed, true);

    const deleted = await remove('ada@EXAMPLE.com');
    assert.equal(deleted.statusCode, 200, deleted.body);
    assert.deepEqual(deleted.json(), { object: 'contact', id, contact: id, deleted: true });
    assertError(await get(id), 404, 'not_found');
    assertError(await remove(id), 404, 'not_found');
  });

  test('the address is stored bare and normalised, and found however it is written', async () => {
    const id = await created({ email: '  Grace@Bücher.Example ' });
    const contact = await read(id);
    assert.equal(contact.email, 'Grace@xn--bcher-kva.example');
    assert.equal(contact.first_name, null);
    assert.equal(contact.last_name, null);
    assert.equal((await read('grace@bücher.example')).id, id);
    assert.equal((await read('GRACE@XN--BCHER-KVA.EXAMPLE')).id, id);
    // Characters of an address that mean something in a URL, URL-encoded in the path (see get()).
    const odd = await created({ email: "o'neil+news/x?y#z%@example.com" });
    assert.equal((await read("O'Neil+News/x?y#z%@example.com")).id, odd);
    // A + in the path is a plus, not a space.
    await created({ email: 'o+neil@example.com' });
    assert.equal(
      (await t.app.inject({ method: 'GET', url: '/contacts/o+neil@example.com', headers: bearer(org.fullKey) }))
        .statusCode,
      200,
    );
  });

  test('an address with a name, or not an address, is refused on the email field', async () => {
    for (const email of ['Ada <ada2@example.com>', '"Ada" <ada2@example.com>', 'not an address', 'ada@', '']) {
      assertError(await create({ email }), 400, 'validation_error', 'email');
    }
    assertError(await create({ first_name: 'Nobody' }), 400, 'missing_required_field', 'email');
    assertError(await create({ email: 42 }), 400, 'validation_error', 'email');
    const id = await created({ email: 'renamed@example.com' });
    assertError(await patch(id, { email: 'Someone <renamed@example.com>' }), 400, 'validation_error', 'email');
    assert.equal((await read(id)).email, 'renamed@example.com');
  });

  test('other fields are checked: names up to 200, unsubscribed a boolean, no unknown fields', async () => {
    assertError(
      await create({ email: 'f1@example.com', first_name: 'x'.repeat(201) }),
      400,
      'validation_error',
      'first_name',
    );
    assertError(
      await create({ email: 'f1@example.com', last_name: 'x'.repeat(201) }),
      400,
      'validation_error',
      'last_name',
    );
    assertError(
      await create({ email: 'f1@example.com', unsubscribed: 'yes' }),
      400,
      'validation_error',
      'unsubscribed',
    );
    assertError(await create({ email: 'f1@example.com', firstname: 'typo' }), 400, 'validation_error', 'firstname');
    assert.equal(await contactCount('f1@example.com'), 0);
    const id = await created({ email: 'f1@example.com', first_name: 'x'.repeat(200), last_name: null });
    assertError(await patch(id, {}), 400, 'validation_error');
    assertError(await patch(id, { last_name: 'x'.repeat(201) }), 400, 'validation_error', 'last_name');
  });

  test('the same address twice in one organization is 409 conflict, whatever its case', async () => {
    await created({ email: 'twice@example.com' });
    assertError(await create({ email: 'twice@example.com' }), 409, 'conflict', 'email');
    assertError(await create({ email: 'TWICE@Example.com' }), 409, 'conflict', 'email');
    assert.equal(await contactCount('twice@example.com'), 1);
    // Another organization has its own contacts.
    assert.equal((await create({ email: 'twice@example.com' }, other.fullKey)).statusCode, 201);

    const id = await created({ email: 'mover@example.com' });
    assertError(await patch(id, { email: 'Twice@example.com', first_name: 'Clash' }), 409, 'conflict', 'email');
    const unchanged = await read(id);
    assert.equal(unchanged.email, 'mover@example.com');
    assert.equal(unchanged.first_name, null);
    // Changing the case of one's own address is no clash.
    assert.equal((await patch(id, { email: 'Mover@example.com' })).statusCode, 200);
    assert.equal((await read(id)).email, 'Mover@example.com');
  });

  test('topic choices are written with the contact, listed by topic id, and PATCH overwrites only those it lists', async () => {
    const [a, b, c] = [await topic('opt_in'), await topic('opt_out'), await topic('opt_in')];
    const id = await created({
      email: 'chooser@example.com',
      topics: [
        { id: a, subscription: 'opt_out' },
        { id: b.toUpperCase(), subscription: 'opt_in' },
      ],
    });
    const byId = (x: { id: string }, y: { id: string }) => (x.id < y.id ? -1 : 1);
    assert.deepEqual(
      (await read(id)).topics,
      [
        { id: a, subscription: 'opt_out' },
        { id: b, subscription: 'opt_in' },
      ].sort(byId),
    );

    assert.equal(
      (
        await patch(id, {
          topics: [
            { id: a, subscription: 'opt_in' },
            { id: c, subscription: 'opt_out' },
          ],
        })
      ).statusCode,
      200,
    );
    assert.deepEqual(
      (await read(id)).topics,
      [
        { id: a, subscription: 'opt_in' },
        { id: b, subscription: 'opt_in' },
        { id: c, subscription: 'opt_out' },
      ].sort(byId),
    );
  });

  test('a topic that is not one of the organization’s is a validation_error on topics, and nothing is written', async () => {
    const mine = await topic('opt_in');
    const theirs = await topic('opt_in', other.fullKey);
    const cases = [
      [{ id: randomUUID(), subscription: 'opt_in' }],
      [{ id: theirs, subscription: 'opt_in' }],
      [{ id: 'not-a-uuid', subscription: 'opt_in' }],
      [
        { id: mine, subscription: 'opt_in' },
        { id: mine.toUpperCase(), subscription: 'opt_out' },
      ],
      [
        { id: mine, subscription: 'opt_in' },
        { id: randomUUID(), subscription: 'opt_in' },
      ],
    ];
    for (const topics of cases) {
      assertError(await create({ email: 'badtopic@example.com', topics }), 400, 'validation_error', 'topics');
    }
    assertError(
      await create({ email: 'badtopic@example.com', topics: [{ id: mine, subscription: 'maybe' }] }),
      400,
      'validation_error',
      'topics.0.subscription',
    );
    const tooMany = Array.from({ length: 101 }, () => ({ id: randomUUID(), subscription: 'opt_in' }));
    assertError(await create({ email: 'badtopic@example.com', topics: tooMany }), 400, 'validation_error', 'topics');
    // The contact row was rolled back with its choices, and no contact.created went out.
    assert.equal(await contactCount('badtopic@example.com'), 0);
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_deliveries WHERE organization_id = $1 AND payload #>> '{data,email}' = $2`,
      [org.id, 'badtopic@example.com'],
    );
    assert.equal(rows[0]!.n, 0);

    // PATCH: the whole update is undone, fields included.
    const id = await created({ email: 'patched@example.com', topics: [{ id: mine, subscription: 'opt_out' }] });
    for (const topics of cases) {
      assertError(await patch(id, { first_name: 'Changed', topics }), 400, 'validation_error', 'topics');
    }
    const contact = await read(id);
    assert.equal(contact.first_name, null);
    assert.deepEqual(contact.topics, [{ id: mine, subscription: 'opt_out' }]);
    assert.equal((await events('contact.updated', id)).length, 0);
  });

  test('another organization’s contact is 404 by id and by email, and survives', async () => {
    const id = await created({ email: 'theirs@example.com', first_name: 'Theirs' }, other.fullKey);
    for (const key of [id, 'theirs@example.com']) {
      for (const response of [await get(key), await patch(key, { first_name: 'mine now' }), await remove(key)]) {
        assertError(response, 404, 'not_found');
      }
    }
    assert.equal((await read(id, other.fullKey)).first_name, 'Theirs');
  });

  test('a malformed or unknown id or address is 404', async () => {
    for (const key of ['not-a-uuid', '123', randomUUID(), 'nobody@example.com', 'Name <x@example.com>', '@', 'a@b@']) {
      for (const response of [await get(key), await patch(key, { first_name: 'x' }), await remove(key)]) {
        assertError(response, 404, 'not_found');
      }
    }
  });

  test('the list is oldest first, paginated with limit and after', async () => {
    const owner = await createTestOrganization(t.db, t.config, 'lister');
    const ids: string[] = [];
    for (const n of [1, 2, 3, 4, 5]) ids.push(await created({ email: `p${n}@example.com` }, owner.fullKey));
    await created({ email: 'p1@example.com' }, other.fullKey);
    // Creation times in the reverse of creation order: the list must follow created_at.
    await t.db.query(
      `UPDATE contacts SET created_at = now() - make_interval(mins => array_position($1::uuid[], id))
        WHERE id = ANY ($1::uuid[])`,
      [ids],
    );
    const expected = ['p5', 'p4', 'p3', 'p2', 'p1'].map((local) => `${local}@example.com`);

    const all = await list('', owner.fullKey);
    assert.equal(all.statusCode, 200, all.body);
    assert.equal(all.json().object, 'list');
    assert.equal(all.json().has_more, false);
    assert.deepEqual(
      all.json().data.map((contact: ContactView) => contact.email),
      expected,
    );
    assert.equal(all.json().data[0].object, 'contact');
    assert.deepEqual(all.json().data[0].topics, []);

    const first = (await list('?limit=2', owner.fullKey)).json();
    assert.equal(first.has_more, true);
    assert.deepEqual(
      first.data.map((contact: ContactView) => contact.email),
      expected.slice(0, 2),
    );
    const second = (await list(`?limit=2&after=${first.data[1].id}`, owner.fullKey)).json();
    assert.equal(second.has_more, true);
    assert.deepEqual(
      second.data.map((contact: ContactView) => contact.email),
      expected.slice(2, 4),
    );
    const last = (await list(`?limit=2&after=${second.data[1].id}`, owner.fullKey)).json();
    assert.equal(last.has_more, false);
    assert.deepEqual(
      last.data.map((contact: ContactView) => contact.email),
      expected.slice(4),
    );
    const exact = (await list(`?limit=5`, owner.fullKey)).json();
    assert.equal(exact.has_more, false);
    assert.equal(exact.data.length, 5);
    // `before` (Resend's SDK sends it too): the page just before a contact, oldest first like the others.
    const back = (await list(`?limit=2&before=${last.data[0].id}`, owner.fullKey)).json();
    assert.equal(back.has_more, true);
    assert.deepEqual(
      back.data.map((contact: ContactView) => contact.email),
      expected.slice(2, 4),
    );
  });

  test('a bad limit or after is a validation_error', async () => {
    const theirs = await created({ email: 'cursor@example.com' }, other.fullKey);
    for (const [query, field] of [
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=abc', 'limit'],
      ['?limit=1.5', 'limit'],
      ['?after=not-a-uuid', 'after'],
      [`?after=${randomUUID()}`, 'after'],
      [`?after=${theirs}`, 'after'],
      ['?before=x', 'before'],
      [`?before=${theirs}`, 'before'],
      [`?after=${theirs}&before=${theirs}`, 'before'],
    ]) {
      assertError(await list(query), 400, 'validation_error', field);
    }
  });

  test('a session may manage contacts; a sending_access key may not', async () => {
    assert.equal((await create({ email: 'dashboard@example.com' }, org.session)).statusCode, 201);
    assertError(await create({ email: 'sender@example.com' }, org.sendingKey), 401, 'restricted_api_key');
    assertError(await list('', org.sendingKey), 401, 'restricted_api_key');
  });

  test('each change writes its webhook event', async () => {
    const id = await created({ email: 'evented@example.com', first_name: 'Eve' });
    assert.equal((await patch(id, { last_name: 'Ented', unsubscribed: true })).statusCode, 200);
    assert.equal((await remove(id)).statusCode, 200);

    const [createdEvent] = await events('contact.created', id);
    assert.ok(createdEvent, 'contact.created');
    assert.equal(createdEvent.type, 'contact.created');
    assert.match(createdEvent.id, /^evt_/);
    // Resend's contact event data: a name not set is left out; the times are the contact's.
    const { created_at: createdAt, updated_at: firstUpdate, ...createdData } = createdEvent.data;
    assert.deepEqual(createdData, {
      id,
      email: 'evented@example.com',
      first_name: 'Eve',
      unsubscribed: false,
      segment_ids: [],
    });
    assert.equal(createdAt, firstUpdate);
    assert.ok(!Number.isNaN(Date.parse(String(createdAt))));
    const final = {
      id,
      email: 'evented@example.com',
      first_name: 'Eve',
      last_name: 'Ented',
      unsubscribed: true,
      segment_ids: [],
    };
    const [updated] = await events('contact.updated', id);
    const { created_at: updatedCreatedAt, updated_at: updatedAt, ...updatedData } = updated!.data;
    assert.deepEqual(updatedData, final);
    assert.equal(updatedCreatedAt, createdAt);
    assert.ok(String(updatedAt) >= String(createdAt));
    assert.deepEqual(
      (await events('contact.deleted', id)).map((event) => event.data),
      [updated!.data],
    );
    // A refused duplicate emits nothing.
    await created({ email: 'once@example.com' });
    await create({ email: 'ONCE@example.com' });
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_deliveries WHERE organization_id = $1 AND lower(payload #>> '{data,email}') = $2`,
      [org.id, 'once@example.com'],
    );
    assert.equal(rows[0]!.n, 1);
  });

  describe('the subscription rule (subscribedAddresses)', () => {
    test('contacts only; their own choice, else the topic’s default; never when unsubscribed from everything', async () => {
      const optIn = await topic('opt_in');
      const optOut = await topic('opt_out');
      await created({ email: 'silent@rule.example' });
      await created({
        email: 'Chooser@Rule.example',
        topics: [
          { id: optIn, subscription: 'opt_out' },
          { id: optOut, subscription: 'opt_in' },
        ],
      });
      await created({
        email: 'gone@rule.example',
        unsubscribed: true,
        topics: [{ id: optOut, subscription: 'opt_in' }],
      });
      // Another organization's contact with the same address is not this organization's audience.
      await created({ email: 'stranger@rule.example' }, other.fullKey);

      const addresses = [
        'silent@rule.example',
        'chooser@rule.example',
        'gone@rule.example',
        'stranger@rule.example',
        'nobody@rule.example',
      ];
      const optInAudience = await subscribedAddresses(t.db, org.id, optIn, addresses);
      const optOutAudience = await subscribedAddresses(t.db, org.id, optOut, addresses);
      // opt_in topic: a contact with no choice is subscribed; one who opted out is not.
      assert.deepEqual([...optInAudience].sort(), ['silent@rule.example']);
      // opt_out topic: a contact with no choice is not subscribed; one who opted in is.
      assert.deepEqual([...optOutAudience].sort(), ['chooser@rule.example']);
      // Either way the globally unsubscribed contact and the non-contacts are out.
      for (const audience of [optInAudience, optOutAudience]) {
        assert.ok(!audience.has('gone@rule.example'));
        assert.ok(!audience.has('nobody@rule.example'));
        assert.ok(!audience.has('stranger@rule.example'));
      }

      // A choice made later through the API takes effect; so does unsubscribing from everything.
      assert.equal(
        (await patch('chooser@rule.example', { topics: [{ id: optIn, subscription: 'opt_in' }] })).statusCode,
        200,
      );
      assert.ok((await subscribedAddresses(t.db, org.id, optIn, ['chooser@rule.example'])).has('chooser@rule.example'));
      assert.equal((await patch('silent@rule.example', { unsubscribed: true })).statusCode, 200);
      assert.equal((await subscribedAddresses(t.db, org.id, optIn, ['silent@rule.example'])).size, 0);
    });
  });
});
