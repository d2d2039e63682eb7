import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Resend } from 'resend';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { assertRefused, checkedCaller } from './helpers/checked-calls.ts';

// Resend's /events (event definitions with a payload schema, POST /events/send) and Mailroom's own
// GET /received-events, through real HTTP and the unmodified Resend SDK; every answer of an operation
// Resend documents is checked against its schema. No worker runs here: an event sent stays as stored,
// with its job waiting.

describe('events', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let base: string;
  let resend: Resend;

  before(async () => {
    t = await buildTestApp();
    org = await createTestOrganization(t.db, t.config, 'events');
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

  /** POST /events/send with headers of its own (an Idempotency-Key). */
  async function send(body: unknown, headers: Record<string, string> = {}, key = org.fullKey) {
    const res = await fetch(`${base}/events/send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, read field by field
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  }

  async function contact(email: string, token = org.fullKey): Promise<string> {
    const answer = await call('POST', '/contacts', { email }, token);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    return answer.body.id as string;
  }

  async function receivedEvent(id: string) {
    const { rows } = await t.db.query<{
      organization_id: string;
      name: string;
      contact_id: string | null;
      email: string | null;
      payload: unknown;
      processed_at: Date | null;
    }>('SELECT organization_id, name, contact_id, email, payload, processed_at FROM received_events WHERE id = $1', [
      id,
    ]);
    return rows[0];
  }

  async function jobsOf(eventId: string) {
    const { rows } = await t.db.query<{ queue: string; payload: unknown; share_key: string }>(
      `SELECT queue, payload, share_key FROM jobs WHERE payload ->> 'event_id' = $1`,
      [eventId],
    );
    return rows;
  }

  test('through the unmodified Resend SDK: create, get by id and by name, list, update, send, remove', async () => {
    const created = await resend.events.create({ name: 'user.signed_up', schema: { plan: 'string', seats: 'number' } });
    assert.equal(created.error, null, JSON.stringify(created.error));
    assert.equal(created.data!.object, 'event');
    const id = created.data!.id;

    const byId = await resend.events.get(id);
    assert.equal(byId.error, null, JSON.stringify(byId.error));
    assert.deepEqual(
      { ...byId.data, created_at: undefined },
      {
        object: 'event',
        id,
        name: 'user.signed_up',
        schema: { plan: 'string', seats: 'number' },
        created_at: undefined,
        updated_at: null,
      },
    );
    assert.ok(!Number.isNaN(Date.parse(byId.data!.created_at)));
    const byName = await resend.events.get('user.signed_up');
    assert.deepEqual(byName.data, byId.data);

    const listed = await resend.events.list();
    assert.equal(listed.error, null, JSON.stringify(listed.error));
    assert.equal(listed.data!.object, 'list');
    assert.ok(listed.data!.data.some((event) => event.id === id && event.name === 'user.signed_up'));

    const updated = await resend.events.update('user.signed_up', { schema: { plan: 'string', trial_ends: 'date' } });
    assert.deepEqual(updated.data, { object: 'event', id });
    const read = await resend.events.get(id);
    assert.deepEqual(read.data!.schema, { plan: 'string', trial_ends: 'date' });
    assert.ok(!Number.isNaN(Date.parse(read.data!.updated_at!)));

    const sentByEmail = await resend.events.send({
      event: 'user.signed_up',
      email: 'New.Person@Example.COM',
      payload: { plan: 'pro', trial_ends: '2026-12-31' },
    });
    assert.equal(sentByEmail.error, null, JSON.stringify(sentByEmail.error));
    assert.equal(sentByEmail.data!.object, 'event');
    assert.equal(sentByEmail.data!.event, 'user.signed_up');

    const contactId = await contact('known@example.com');
    const sentById = await resend.events.send({
      event: 'user.signed_up',
      contactId,
      payload: { plan: 'free', trial_ends: '2027-01-01T00:00:00Z' },
    });
    assert.equal(sentById.error, null, JSON.stringify(sentById.error));

    const refused = await resend.events.send({ event: 'user.signed_up', contactId, payload: { plan: 'free' } });
    assert.equal(refused.data, null);
    assert.equal(refused.error?.name, 'missing_required_field');

    // A name with a slash or a space, as the SDK puts it in the path (encoded).
    const slashed = await resend.events.create({ name: 'billing/invoice paid' });
    assert.equal((await resend.events.get('billing/invoice paid')).data?.id, slashed.data!.id);
    assert.equal((await resend.events.remove('billing/invoice paid')).data?.deleted, true);

    const removed = await resend.events.remove(id);
    assert.deepEqual(removed.data, { object: 'event', id, deleted: true });
    const gone = await resend.events.get(id);
    assert.equal(gone.error?.name, 'not_found');
  });

  test('a definition: its name and schema are checked, and a name is taken once per organization', async () => {
    assertRefused(await call('POST', '/events', {}), 400, 'missing_required_field', 'name');
    assertRefused(await call('POST', '/events', { name: '' }), 400, 'validation_error', 'name');
    assertRefused(await call('POST', '/events', { name: 'x'.repeat(201) }), 400, 'validation_error', 'name');
    assert.equal((await call('POST', '/events', { name: 'y'.repeat(200) })).status, 201);
    const reserved = await call('POST', '/events', { name: 'resend:contact.created' });
    assertRefused(reserved, 400, 'validation_error', 'name');
    assert.match(reserved.body.message, /resend:/);
    assertRefused(await call('POST', '/events', { name: 'a', schema: ['string'] }), 400, 'validation_error', 'schema');
    assertRefused(await call('POST', '/events', { name: 'a', schema: 'string' }), 400, 'validation_error', 'schema');
    assertRefused(
      await call('POST', '/events', { name: 'a', schema: { plan: 'text' } }),
      400,
      'validation_error',
      'schema.plan',
    );
    assertRefused(
      await call('POST', '/events', { name: 'a', schema: { plan: { type: 'string' } } }),
      400,
      'validation_error',
      'schema.plan',
    );
    assertRefused(await call('POST', '/events', { name: 'a', extra: 1 }), 400, 'validation_error', 'extra');

    const first = await call('POST', '/events', { name: 'order.placed', schema: null });
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal((await call('GET', `/events/${first.body.id}`)).body.schema, null);
    assertRefused(await call('POST', '/events', { name: 'order.placed' }), 409, 'conflict', 'name');
    // Names are the organization's own.
    assert.equal((await call('POST', '/events', { name: 'order.placed' }, other.fullKey)).status, 201);

    assertRefused(await call('PATCH', '/events/order.placed', {}), 400, 'missing_required_field', 'schema');
    assertRefused(
      await call('PATCH', '/events/order.placed', { schema: { total: 'money' } }),
      400,
      'validation_error',
      'schema.total',
    );
    assert.equal((await call('PATCH', '/events/order.placed', { schema: { total: 'number' } })).status, 200);
    assert.equal((await call('PATCH', `/events/${first.body.id}`, { schema: null })).status, 200);
    const cleared = await call('GET', '/events/order.placed');
    assert.equal(cleared.body.schema, null);
    assert.notEqual(cleared.body.updated_at, null);
  });

  test("unknown definitions, and another organization's by id or by name, are 404", async () => {
    const theirs = await call('POST', '/events', { name: 'theirs.only' }, other.fullKey);
    assert.equal(theirs.status, 201);
    for (const identifier of [theirs.body.id, 'theirs.only', randomUUID(), 'never.defined']) {
      assertRefused(await call('GET', `/events/${identifier}`), 404, 'not_found');
      assertRefused(await call('PATCH', `/events/${identifier}`, { schema: null }), 404, 'not_found');
      assertRefused(await call('DELETE', `/events/${identifier}`), 404, 'not_found');
    }
    assert.equal((await call('GET', '/events/theirs.only', undefined, other.fullKey)).status, 200);
    const listed = await call('GET', '/events');
    assert.ok(!listed.body.data.some((event: { name: string }) => event.name === 'theirs.only'));
  });

  test('GET /events: newest first, a page at a time', async () => {
    const pager = await createTestOrganization(t.db, t.config, 'pager');
    const names = ['p.one', 'p.two', 'p.three'];
    for (const name of names) assert.equal((await call('POST', '/events', { name }, pager.fullKey)).status, 201);
    const all = await call('GET', '/events', undefined, pager.fullKey);
    assert.deepEqual(
      all.body.data.map((event: { name: string }) => event.name),
      [...names].reverse(),
    );
    assert.equal(all.body.has_more, false);
    const first = await call('GET', '/events?limit=2', undefined, pager.fullKey);
    assert.deepEqual(
      first.body.data.map((event: { name: string }) => event.name),
      ['p.three', 'p.two'],
    );
    assert.equal(first.body.has_more, true);
    const next = await call('GET', `/events?limit=2&after=${first.body.data[1].id}`, undefined, pager.fullKey);
    assert.deepEqual(
      next.body.data.map((event: { name: string }) => event.name),
      ['p.one'],
    );
    assert.equal(next.body.has_more, false);
  });

  test('an event sent is stored with its job, in one commit; an address is not made a contact here', async () => {
    const sent = await send({ event: 'cart.abandoned', email: 'Shopper@Example.COM', payload: { items: 3 } });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    assert.equal(sent.body.object, 'event');
    assert.equal(sent.body.event, 'cart.abandoned');
    const stored = await receivedEvent(sent.body.id);
    assert.deepEqual(stored, {
      organization_id: org.id,
      name: 'cart.abandoned',
      contact_id: null,
      email: 'Shopper@example.com',
      payload: { items: 3 },
      processed_at: null,
    });
    assert.deepEqual(await jobsOf(sent.body.id), [
      { queue: 'automation-event', payload: { event_id: sent.body.id }, share_key: org.id },
    ]);
    const { rows } = await t.db.query('SELECT 1 FROM contacts WHERE organization_id = $1 AND lower(email) = $2', [
      org.id,
      'shopper@example.com',
    ]);
    assert.equal(rows.length, 0, 'the worker creates the contact when it processes the event');

    const contactId = await contact('buyer@example.com');
    const byId = await send({ event: 'cart.abandoned', contact_id: contactId });
    assert.equal(byId.status, 202, JSON.stringify(byId.body));
    assert.deepEqual(
      { ...(await receivedEvent(byId.body.id)), organization_id: undefined },
      {
        organization_id: undefined,
        name: 'cart.abandoned',
        contact_id: contactId,
        email: null,
        payload: {},
        processed_at: null,
      },
    );
    assert.equal((await jobsOf(byId.body.id)).length, 1);
  });

  test('POST /events/send refuses what it cannot take, and stores nothing for it', async () => {
    const before = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM received_events');
    const contactId = await contact('refusals@example.com');
    const theirContact = await contact('theirs@example.com', other.fullKey);
    assertRefused(await send({ email: 'a@example.com' }), 400, 'missing_required_field', 'event');
    assertRefused(await send({ event: '', email: 'a@example.com' }), 400, 'validation_error', 'event');
    assertRefused(await send({ event: 'x'.repeat(201), email: 'a@example.com' }), 400, 'validation_error', 'event');
    assertRefused(await send({ event: 'resend:email.sent', email: 'a@example.com' }), 400, 'validation_error', 'event');
    assertRefused(await send({ event: 'e' }), 400, 'missing_required_field');
    assertRefused(await send({ event: 'e', email: 'a@example.com', contact_id: contactId }), 400, 'validation_error');
    assertRefused(await send({ event: 'e', email: 'not an address' }), 400, 'validation_error', 'email');
    assertRefused(await send({ event: 'e', email: 'A <a@example.com>' }), 400, 'validation_error', 'email');
    assertRefused(await send({ event: 'e', contact_id: 'nope' }), 400, 'validation_error', 'contact_id');
    assertRefused(await send({ event: 'e', contact_id: randomUUID() }), 404, 'not_found');
    assertRefused(await send({ event: 'e', contact_id: theirContact }), 404, 'not_found');
    assertRefused(await send({ event: 'e', email: 'a@example.com', payload: [1] }), 400, 'validation_error', 'payload');
    assertRefused(await send({ event: 'e', email: 'a@example.com', payload: 'x' }), 400, 'validation_error', 'payload');
    assertRefused(await send({ event: 'e', email: 'a@example.com', extra: 1 }), 400, 'validation_error', 'extra');
    const big = { blob: 'x'.repeat(32 * 1024) };
    assertRefused(
      await send({ event: 'e', email: 'a@example.com', payload: big }),
      413,
      'payload_too_large',
      'payload',
    );
    const justFits = { b: 'x'.repeat(32 * 1024 - '{"b":""}'.length) };
    assert.equal((await send({ event: 'e', email: 'a@example.com', payload: justFits })).status, 202);
    const afterwards = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM received_events');
    assert.equal(afterwards.rows[0]!.n, before.rows[0]!.n + 1);
  });

  test("a payload is checked against its event's schema: declared keys with their types, extra keys let through", async () => {
    assert.equal(
      (
        await call('POST', '/events', {
          name: 'trial.started',
          schema: { plan: 'string', seats: 'number', annual: 'boolean', ends: 'date' },
        })
      ).status,
      201,
    );
    const good = { plan: 'pro', seats: 3, annual: false, ends: '2026-12-31T10:00:00.000Z' };
    const ok = await send({ event: 'trial.started', email: 'trial@example.com', payload: { ...good, extra: [1, 2] } });
    assert.equal(ok.status, 202, JSON.stringify(ok.body));
    assert.deepEqual((await receivedEvent(ok.body.id))!.payload, { ...good, extra: [1, 2] });
    assert.equal(
      (await send({ event: 'trial.started', email: 't@example.com', payload: { ...good, ends: '2026-12-31' } })).status,
      202,
    );

    const { seats: _, ...withoutSeats } = good;
    assertRefused(
      await send({ event: 'trial.started', email: 't@example.com', payload: withoutSeats }),
      400,
      'missing_required_field',
      'payload.seats',
    );
    // Keys are checked in the order of their names.
    assertRefused(
      await send({ event: 'trial.started', email: 't@example.com' }),
      400,
      'missing_required_field',
      'payload.annual',
    );
    const wrong: Array<[string, unknown]> = [
      ['plan', 1],
      ['plan', null],
      ['seats', '3'],
      ['annual', 'false'],
      ['ends', 'tomorrow'],
      ['ends', 'Dec 31 2026'],
      ['ends', '2026-13-45'],
      ['ends', 1767225600000],
    ];
    for (const [key, value] of wrong) {
      assertRefused(
        await send({ event: 'trial.started', email: 't@example.com', payload: { ...good, [key]: value } }),
        400,
        'validation_error',
        `payload.${key}`,
      );
    }

    // A change to the definition applies to the next event at once.
    assert.equal((await call('PATCH', '/events/trial.started', { schema: null })).status, 200);
    assert.equal((await send({ event: 'trial.started', email: 't@example.com', payload: { plan: 1 } })).status, 202);
    assert.equal((await call('PATCH', '/events/trial.started', { schema: { plan: 'string' } })).status, 200);
    assertRefused(
      await send({ event: 'trial.started', email: 't@example.com', payload: { plan: 1 } }),
      400,
      'validation_error',
      'payload.plan',
    );
    assert.equal((await call('DELETE', '/events/trial.started')).status, 200);
    assert.equal((await send({ event: 'trial.started', email: 't@example.com', payload: { plan: 1 } })).status, 202);
    // Another organization's definition of the name does not apply.
    assert.equal(
      (await call('POST', '/events', { name: 'their.schema', schema: { plan: 'string' } }, other.fullKey)).status,
      201,
    );
    assert.equal((await send({ event: 'their.schema', email: 't@example.com' })).status, 202);
  });

  test('a sending key may send events, and nothing else here', async () => {
    const sent = await send({ event: 'from.sending.key', email: 'a@example.com' }, {}, org.sendingKey);
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    const definition = await call('POST', '/events', { name: 'for.sending.key' });
    const refusals: Array<[string, string, unknown?]> = [
      ['POST', '/events', { name: 'by.sending.key' }],
      ['GET', '/events'],
      ['GET', `/events/${definition.body.id}`],
      ['PATCH', `/events/${definition.body.id}`, { schema: null }],
      ['DELETE', `/events/${definition.body.id}`],
      ['GET', '/received-events'],
    ];
    for (const [method, path, body] of refusals) {
      assertRefused(await call(method, path, body, org.sendingKey), 401, 'restricted_api_key');
    }
  });

  test('an Idempotency-Key replays the answer, refuses another request, and remembers a refusal', async () => {
    const body = { event: 'invoice.paid', email: 'payer@example.com', payload: { amount: 10 } };
    const first = await send(body, { 'idempotency-key': 'pay-1' });
    assert.equal(first.status, 202, JSON.stringify(first.body));
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const again = await send(body, { 'idempotency-key': 'pay-1' });
    assert.equal(again.status, 202);
    assert.deepEqual(again.body, first.body);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM received_events WHERE organization_id = $1 AND name = 'invoice.paid'`,
      [org.id],
    );
    assert.equal(rows[0]!.n, 1);
    assert.equal((await jobsOf(first.body.id)).length, 1);

    assertRefused(
      await send({ ...body, payload: { amount: 11 } }, { 'idempotency-key': 'pay-1' }),
      409,
      'invalid_idempotent_request',
    );
    // The same key is another organization's own.
    assert.equal((await send(body, { 'idempotency-key': 'pay-1' }, other.fullKey)).status, 202);

    const missing = { event: 'invoice.paid', contact_id: randomUUID() };
    assertRefused(await send(missing, { 'idempotency-key': 'pay-2' }), 404, 'not_found');
    const replayed = await send(missing, { 'idempotency-key': 'pay-2' });
    assertRefused(replayed, 404, 'not_found');
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true');
    const invalid = { event: 'invoice.paid' };
    assertRefused(await send(invalid, { 'idempotency-key': 'pay-3' }), 400, 'missing_required_field');
    assert.equal((await send(invalid, { 'idempotency-key': 'pay-3' })).headers.get('idempotent-replayed'), 'true');
    assertRefused(
      await send(body, { 'idempotency-key': 'k'.repeat(257) }),
      400,
      'invalid_idempotency_key',
      'Idempotency-Key',
    );
  });

  test('events sent at the same time are each stored with their job; one naming no contact fails alone', async () => {
    const contactId = await contact('burst@example.com');
    const bodies = Array.from({ length: 30 }, (_, i) =>
      i === 7
        ? { event: 'burst', contact_id: randomUUID() }
        : i % 2 === 0
          ? { event: 'burst', contact_id: contactId, payload: { i } }
          : { event: 'burst', email: `burst${i}@example.com`, payload: { i } },
    );
    const answers = await Promise.all(bodies.map((body) => send(body)));
    answers.forEach((answer, i) => {
      if (i === 7) assertRefused(answer, 404, 'not_found');
      else assert.equal(answer.status, 202, JSON.stringify(answer.body));
    });
    const ids = answers.filter((_, i) => i !== 7).map((answer) => answer.body.id as string);
    assert.equal(new Set(ids).size, 29);
    const { rows } = await t.db.query<{ id: string; payload: { i: number } }>(
      `SELECT id, payload FROM received_events WHERE organization_id = $1 AND name = 'burst'`,
      [org.id],
    );
    assert.deepEqual(rows.map((row) => row.id).sort(), [...ids].sort());
    for (const [i, answer] of answers.entries()) {
      if (i === 7) continue;
      assert.equal(rows.find((row) => row.id === answer.body.id)!.payload.i, i);
    }
    const jobs = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM jobs WHERE queue = 'automation-event' AND payload ->> 'event_id' = ANY($1::text[])`,
      [ids],
    );
    assert.equal(jobs.rows[0]!.n, 29);
  });

  test("GET /received-events: newest first, of one name, a page at a time, the organization's own", async () => {
    const lister = await createTestOrganization(t.db, t.config, 'lister');
    const ids: string[] = [];
    for (const [i, name] of ['seen.a', 'seen.b', 'seen.a', 'seen.a'].entries()) {
      const sent = await send({ event: name, email: `r${i}@example.com`, payload: { i } }, {}, lister.fullKey);
      assert.equal(sent.status, 202);
      ids.push(sent.body.id);
    }
    assert.equal((await send({ event: 'seen.a', email: 'x@example.com' }, {}, org.fullKey)).status, 202);

    const all = await call('GET', '/received-events', undefined, lister.fullKey);
    assert.equal(all.status, 200, JSON.stringify(all.body));
    assert.equal(all.body.object, 'list');
    assert.equal(all.body.has_more, false);
    assert.deepEqual(
      all.body.data.map((e: { id: string }) => e.id),
      [...ids].reverse(),
    );
    const newest = all.body.data[0];
    assert.deepEqual(
      { ...newest, received_at: undefined },
      {
        object: 'received_event',
        id: ids[3],
        event: 'seen.a',
        contact_id: null,
        email: 'r3@example.com',
        payload: { i: 3 },
        received_at: undefined,
        processed_at: null,
      },
    );
    assert.ok(!Number.isNaN(Date.parse(newest.received_at)));

    const onlyA = await call('GET', '/received-events?event=seen.a&limit=2', undefined, lister.fullKey);
    assert.deepEqual(
      onlyA.body.data.map((e: { id: string }) => e.id),
      [ids[3], ids[2]],
    );
    assert.equal(onlyA.body.has_more, true);
    const rest = await call('GET', `/received-events?event=seen.a&limit=2&after=${ids[2]}`, undefined, lister.fullKey);
    assert.deepEqual(
      rest.body.data.map((e: { id: string }) => e.id),
      [ids[0]],
    );
    assert.equal(rest.body.has_more, false);

    assertRefused(
      await call('GET', `/received-events?after=${ids[0]}`, undefined, other.fullKey),
      400,
      'validation_error',
      'after',
    );
    assertRefused(
      await call('GET', '/received-events?after=nope', undefined, lister.fullKey),
      400,
      'validation_error',
      'after',
    );
    assertRefused(
      await call('GET', '/received-events?limit=101', undefined, lister.fullKey),
      400,
      'validation_error',
      'limit',
    );
  });
});
