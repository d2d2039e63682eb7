import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Resend } from 'resend';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import type { TopicView } from '../src/contacts/topics.ts';

describe('topics', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;

  before(async () => {
    // The webhook endpoint the events fan out to is on loopback; nothing delivers to it in this file.
    t = await buildTestApp({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
    org = await createTestOrganization(t.db, t.config, 'topics');
    other = await createTestOrganization(t.db, t.config, 'other');
    await observeWebhookEvents(t.app, org);
  });

  after(async () => {
    await t?.close();
  });

  const create = (payload: object, key = org.fullKey) =>
    t.app.inject({ method: 'POST', url: '/topics', headers: bearer(key), payload });
  const get = (id: string, key = org.fullKey) =>
    t.app.inject({ method: 'GET', url: `/topics/${id}`, headers: bearer(key) });
  const list = (key = org.fullKey) => t.app.inject({ method: 'GET', url: '/topics', headers: bearer(key) });
  const patch = (id: string, payload: object, key = org.fullKey) =>
    t.app.inject({ method: 'PATCH', url: `/topics/${id}`, headers: bearer(key), payload });
  const remove = (id: string, key = org.fullKey) =>
    t.app.inject({ method: 'DELETE', url: `/topics/${id}`, headers: bearer(key) });

  async function created(payload: object, key = org.fullKey): Promise<string> {
    const response = await create(payload, key);
    assert.equal(response.statusCode, 201, response.body);
    return response.json().id;
  }

  async function read(id: string): Promise<TopicView> {
    const response = await get(id);
    assert.equal(response.statusCode, 200, response.body);
    return response.json();
  }

  function assertRefused(response: { statusCode: number; body: string }, name: string, field: string | undefined) {
    assert.equal(response.statusCode, 400, response.body);
    const body = JSON.parse(response.body);
    assert.equal(body.name, name, response.body);
    assert.equal(body.field, field, response.body);
  }

  /** The webhook payloads of this type written for the topic, oldest first. */
  const events = (type: string, id: string) => queuedEvents(t.db, org.id, type, { id });

  test('create, read, update, delete', async () => {
    const response = await create({ name: 'Newsletter', description: 'Monthly news', default_subscription: 'opt_in' });
    assert.equal(response.statusCode, 201, response.body);
    assert.deepEqual(Object.keys(response.json()).sort(), ['id', 'object']);
    const { object, id } = response.json();
    assert.equal(object, 'topic');

    const topic = await read(id);
    assert.deepEqual(
      { ...topic, created_at: undefined, updated_at: undefined },
      {
        object: 'topic',
        id,
        name: 'Newsletter',
        description: 'Monthly news',
        default_subscription: 'opt_in',
        visibility: 'private',
        created_at: undefined,
        updated_at: undefined,
      },
    );
    assert.equal(new Date(topic.created_at).toISOString(), topic.created_at);
    assert.equal(topic.updated_at, topic.created_at);

    const updated = await patch(id, { name: 'News' });
    assert.equal(updated.statusCode, 200, updated.body);
    assert.deepEqual(updated.json(), { object: 'topic', id });
    assert.equal((await read(id)).name, 'News');

    const deleted = await remove(id);
    assert.equal(deleted.statusCode, 200, deleted.body);
    assert.deepEqual(deleted.json(), { object: 'topic', id, deleted: true });
    assert.equal((await get(id)).statusCode, 404);
    assert.equal((await remove(id)).statusCode, 404);
  });

  test('description is optional: a topic without one has no description field (Resend SDK: description?: string)', async () => {
    const id = await created({ name: 'Bare', default_subscription: 'opt_out' });
    const topic = await read(id);
    assert.ok(!('description' in topic), JSON.stringify(topic));
    assert.equal(topic.default_subscription, 'opt_out');
    assert.ok(
      !(
        'description' in
        (await read(await created({ name: 'Null', description: null, default_subscription: 'opt_in' })))
      ),
    );
  });

  test('the list is oldest first and holds only the caller organization’s topics', async () => {
    const owner = await createTestOrganization(t.db, t.config, 'lister');
    const first = await created({ name: 'first', default_subscription: 'opt_in' }, owner.fullKey);
    const second = await created({ name: 'second', default_subscription: 'opt_out' }, owner.fullKey);
    const third = await created({ name: 'third', default_subscription: 'opt_in' }, owner.fullKey);
    await created({ name: 'not theirs', default_subscription: 'opt_in' }, other.fullKey);
    // Creation times in the reverse of creation order: the list must follow created_at, not insertion.
    await t.db.query(
      `UPDATE topics SET created_at = now() - make_interval(mins => CASE id WHEN $1 THEN 1 WHEN $2 THEN 2 ELSE 3 END)
        WHERE id IN ($1, $2, $3)`,
      [first, second, third],
    );
    const response = await list(owner.fullKey);
    assert.equal(response.statusCode, 200, response.body);
    const body = response.json();
    assert.equal(body.object, 'list');
    assert.deepEqual(
      body.data.map((topic: TopicView) => topic.name),
      ['third', 'second', 'first'],
    );
    assert.equal(body.data[1].object, 'topic');
    assert.equal(body.data[1].default_subscription, 'opt_out');
  });

  test('PATCH changes only the fields it names and moves updated_at; null clears the description', async () => {
    const id = await created({ name: 'Partial', description: 'About', default_subscription: 'opt_in' });
    await t.db.query(
      `UPDATE topics SET created_at = now() - interval '1 hour', updated_at = now() - interval '1 hour' WHERE id = $1`,
      [id],
    );
    const before = await read(id);

    assert.equal((await patch(id, { default_subscription: 'opt_out' })).statusCode, 200);
    const after = await read(id);
    assert.deepEqual(
      { ...after, default_subscription: undefined, updated_at: undefined },
      { ...before, default_subscription: undefined, updated_at: undefined },
    );
    assert.equal(after.default_subscription, 'opt_out');
    assert.ok(after.updated_at > before.updated_at, `${after.updated_at} > ${before.updated_at}`);

    assert.equal((await patch(id, { description: null })).statusCode, 200);
    const cleared = await read(id);
    assert.ok(!('description' in cleared), JSON.stringify(cleared));
    assert.equal(cleared.name, 'Partial');

    assert.equal((await patch(id, { description: 'Back', name: 'Renamed' })).statusCode, 200);
    assert.deepEqual([(await read(id)).description, (await read(id)).name], ['Back', 'Renamed']);
  });

  test('an empty PATCH is a validation_error and changes nothing', async () => {
    const id = await created({ name: 'Untouched', default_subscription: 'opt_in' });
    const before = await read(id);
    assertRefused(await patch(id, {}), 'validation_error', undefined);
    assert.deepEqual(await read(id), before);
  });

  test('visibility: private unless given, set by POST and PATCH, listed and read', async () => {
    const defaulted = await created({ name: 'Quiet', default_subscription: 'opt_in' });
    const open = await created({ name: 'Open', default_subscription: 'opt_out', visibility: 'public' });
    assert.equal((await read(defaulted)).visibility, 'private');
    assert.equal((await read(open)).visibility, 'public');
    const listed = (await list()).json().data as TopicView[];
    assert.equal(listed.find((topic) => topic.id === open)?.visibility, 'public');
    assert.equal(listed.find((topic) => topic.id === defaulted)?.visibility, 'private');

    assert.equal((await patch(defaulted, { visibility: 'public' })).statusCode, 200);
    assert.equal((await read(defaulted)).visibility, 'public');
    // A PATCH without visibility keeps it.
    assert.equal((await patch(defaulted, { name: 'Still open' })).statusCode, 200);
    assert.equal((await read(defaulted)).visibility, 'public');

    assertRefused(
      await create({ name: 'Bad', default_subscription: 'opt_in', visibility: 'secret' }),
      'validation_error',
      'visibility',
    );
    assertRefused(await patch(open, { visibility: 'hidden' }), 'validation_error', 'visibility');
    assert.equal((await read(open)).visibility, 'public');
  });

  test('PATCH may repeat the path id in the body, as Resend’s SDK does; another id is refused', async () => {
    const id = await created({ name: 'Echo', default_subscription: 'opt_in' });
    assert.equal((await patch(id, { id, visibility: 'public' })).statusCode, 200);
    assert.equal((await read(id)).visibility, 'public');
    assertRefused(await patch(id, { id: randomUUID(), name: 'Elsewhere' }), 'validation_error', 'id');
    assertRefused(await patch(id, { id }), 'validation_error', undefined);
    assert.equal((await read(id)).name, 'Echo');
  });

  test('through the unmodified Resend SDK: create with visibility, update it (the SDK repeats the id in the body), read it', async () => {
    const resend = new Resend(org.fullKey, { baseUrl: await t.app.listen({ port: 0, host: '127.0.0.1' }) });
    // The SDK's option types predate visibility; it sends every field it is given.
    const options = { name: 'Public news', defaultSubscription: 'opt_in' as const, visibility: 'public' };
    const created = await resend.topics.create(options);
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;
    assert.equal(((await resend.topics.get(id)).data as { visibility?: string }).visibility, 'public');

    const change = { id, visibility: 'private' };
    const updated = await resend.topics.update(change);
    assert.equal(updated.error, null, JSON.stringify(updated.error));
    assert.equal((await read(id)).visibility, 'private');
    const listed = (await resend.topics.list()).data!.data as Array<{ id: string; visibility?: string }>;
    assert.equal(listed.find((topic) => topic.id === id)?.visibility, 'private');
  });

  test('validation', async () => {
    assertRefused(await create({ default_subscription: 'opt_in' }), 'missing_required_field', 'name');
    assertRefused(await create({ name: 'No default' }), 'missing_required_field', 'default_subscription');
    assertRefused(await create({ name: '', default_subscription: 'opt_in' }), 'validation_error', 'name');
    assertRefused(await create({ name: 'x'.repeat(201), default_subscription: 'opt_in' }), 'validation_error', 'name');
    assert.equal((await create({ name: 'x'.repeat(200), default_subscription: 'opt_in' })).statusCode, 201);
    assertRefused(
      await create({ name: 'Long', description: 'x'.repeat(1001), default_subscription: 'opt_in' }),
      'validation_error',
      'description',
    );
    assert.equal(
      (await create({ name: 'Long', description: 'x'.repeat(1000), default_subscription: 'opt_in' })).statusCode,
      201,
    );
    assertRefused(
      await create({ name: 'Bad', default_subscription: 'maybe' }),
      'validation_error',
      'default_subscription',
    );
    assertRefused(
      await create({ name: 'Typo', default_subscription: 'opt_in', descripton: 'x' }),
      'validation_error',
      'descripton',
    );

    const id = await created({ name: 'Checked', default_subscription: 'opt_in' });
    assertRefused(await patch(id, { name: '' }), 'validation_error', 'name');
    assertRefused(await patch(id, { default_subscription: 'opt_maybe' }), 'validation_error', 'default_subscription');
    assertRefused(await patch(id, { description: 'x'.repeat(1001) }), 'validation_error', 'description');
    assertRefused(await patch(id, { nmae: 'typo' }), 'validation_error', 'nmae');
    assert.equal((await read(id)).name, 'Checked');
  });

  test('another organization’s topic is 404 for GET, PATCH and DELETE, and survives', async () => {
    const id = await created({ name: 'Theirs', default_subscription: 'opt_in' }, other.fullKey);
    for (const response of [await get(id), await patch(id, { name: 'mine now' }), await remove(id)]) {
      assert.equal(response.statusCode, 404, response.body);
      assert.equal(response.json().name, 'not_found');
    }
    const theirs = await t.app.inject({ method: 'GET', url: `/topics/${id}`, headers: bearer(other.fullKey) });
    assert.equal(theirs.json().name, 'Theirs');
    assert.ok(!(await list()).json().data.some((topic: TopicView) => topic.id === id));
  });

  test('a malformed or unknown id is 404', async () => {
    for (const id of ['not-a-uuid', '123', randomUUID()]) {
      for (const response of [await get(id), await patch(id, { name: 'x' }), await remove(id)]) {
        assert.equal(response.statusCode, 404, response.body);
        assert.equal(response.json().name, 'not_found');
      }
    }
  });

  test('a session may manage topics; a sending_access key may not', async () => {
    assert.equal(
      (await create({ name: 'From the dashboard', default_subscription: 'opt_in' }, org.session)).statusCode,
      201,
    );
    const refused = await create({ name: 'x', default_subscription: 'opt_in' }, org.sendingKey);
    assert.equal(refused.statusCode, 401);
    assert.equal(refused.json().name, 'restricted_api_key');
    assert.equal((await list(org.sendingKey)).statusCode, 401);
  });

  test('deleting a topic deletes the contacts’ choices for it, not the contacts', async () => {
    const id = await created({ name: 'Going away', default_subscription: 'opt_out' });
    const kept = await created({ name: 'Staying', default_subscription: 'opt_out' });
    const contact = await t.app.inject({
      method: 'POST',
      url: '/contacts',
      headers: bearer(org.fullKey),
      payload: {
        email: 'chooser@example.com',
        topics: [
          { id, subscription: 'opt_in' },
          { id: kept, subscription: 'opt_in' },
        ],
      },
    });
    assert.equal(contact.statusCode, 201, contact.body);
    assert.equal((await remove(id)).statusCode, 200);
    const { rows } = await t.db.query('SELECT topic_id FROM contact_topics WHERE contact_id = $1', [contact.json().id]);
    assert.deepEqual(rows, [{ topic_id: kept }]);
    const read = await t.app.inject({
      method: 'GET',
      url: `/contacts/${contact.json().id}`,
      headers: bearer(org.fullKey),
    });
    assert.deepEqual(read.json().topics, [{ id: kept, subscription: 'opt_in' }]);
  });

  test('each change writes its webhook event; a refused change writes none', async () => {
    const id = await created({ name: 'Evented', default_subscription: 'opt_in' });
    assert.equal((await patch(id, { name: 'Evented 2', default_subscription: 'opt_out' })).statusCode, 200);
    assert.equal((await remove(id)).statusCode, 200);

    const [createdEvent] = await events('topic.created', id);
    assert.ok(createdEvent, 'topic.created');
    assert.equal(createdEvent.type, 'topic.created');
    assert.match(createdEvent.id, /^evt_/);
    // The SDK's topic event data, without the times (checked on their own).
    const withoutTimes = ({ created_at, updated_at, ...data }: Record<string, unknown>) => {
      assert.ok(!Number.isNaN(Date.parse(String(created_at))) && !Number.isNaN(Date.parse(String(updated_at))));
      return data;
    };
    const described = { description: null };
    assert.deepEqual(withoutTimes(createdEvent.data), {
      id,
      name: 'Evented',
      ...described,
      default_subscription: 'opt_in',
      deleted: false,
    });
    assert.deepEqual(
      (await events('topic.updated', id)).map((event) => withoutTimes(event.data)),
      [{ id, name: 'Evented 2', ...described, default_subscription: 'opt_out', deleted: false }],
    );
    assert.deepEqual(
      (await events('topic.deleted', id)).map((event) => withoutTimes(event.data)),
      [{ id, name: 'Evented 2', ...described, default_subscription: 'opt_out', deleted: true }],
    );

    // A 404 update or delete, or a refused create, emits nothing.
    const unknown = randomUUID();
    await patch(unknown, { name: 'x' });
    await remove(unknown);
    await create({ name: '', default_subscription: 'opt_in' });
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_deliveries
        WHERE organization_id = $1 AND event_type LIKE 'topic.%' AND (payload #>> '{data,id}' = $2 OR payload #>> '{data,name}' = '')`,
      [org.id, unknown],
    );
    assert.equal(rows[0]!.n, 0);
  });
});
