import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Resend } from 'resend';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { assertRefused, checkedCaller } from './helpers/checked-calls.ts';

// Contact properties (/contact-properties) and contacts' values for them, through real HTTP and the
// unmodified Resend SDK; every answer of an operation Resend documents is checked against its schema.

describe('contact properties', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let base: string;
  let resend: Resend;

  before(async () => {
    t = await buildTestApp();
    org = await createTestOrganization(t.db, t.config, 'props');
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

  async function property(key: string, type: 'string' | 'number', fallback?: string | number, token = org.fullKey) {
    const answer = await call('POST', '/contact-properties', { key, type, fallback_value: fallback }, token);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    return answer.body.id as string;
  }

  async function contact(payload: object, token = org.fullKey): Promise<string> {
    const answer = await call('POST', '/contacts', payload, token);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    return answer.body.id;
  }

  test('through the unmodified Resend SDK: create, list, get, update the fallback, remove', async () => {
    const created = await resend.contactProperties.create({
      key: 'company_name',
      type: 'string',
      fallbackValue: 'Acme',
    });
    assert.equal(created.error, null, JSON.stringify(created.error));
    assert.equal(created.data!.object, 'contact_property');
    const id = created.data!.id;

    const read = await resend.contactProperties.get(id);
    assert.equal(read.error, null, JSON.stringify(read.error));
    assert.deepEqual(
      { ...read.data, createdAt: undefined },
      {
        object: 'contact_property',
        id,
        key: 'company_name',
        type: 'string',
        fallbackValue: 'Acme',
        createdAt: undefined,
      },
    );
    assert.ok(!Number.isNaN(Date.parse(read.data!.createdAt)));
    assert.equal((await call('GET', `/contact-properties/${id}`)).body.fallback_value, 'Acme');

    const updated = await resend.contactProperties.update({ id, fallbackValue: 'Initech' });
    assert.deepEqual(updated.data, { object: 'contact_property', id });
    assert.equal((await resend.contactProperties.get(id)).data!.fallbackValue, 'Initech');
    assert.equal((await resend.contactProperties.update({ id, fallbackValue: null })).error, null);
    assert.equal((await call('GET', `/contact-properties/${id}`)).body.fallback_value, null);

    const seats = await resend.contactProperties.create({ key: 'seats', type: 'number', fallbackValue: 1 });
    const listed = await resend.contactProperties.list();
    assert.equal(listed.error, null, JSON.stringify(listed.error));
    const mine = listed.data!.data.filter((item) => [id, seats.data!.id].includes(item.id));
    assert.deepEqual(
      mine.map((item) => [item.key, item.type, item.fallbackValue]),
      [
        ['company_name', 'string', null],
        ['seats', 'number', 1],
      ],
      'oldest first',
    );
    assert.equal((await call('GET', '/contact-properties')).body.object, 'list');

    const removed = await resend.contactProperties.remove(id);
    assert.deepEqual(removed.data, { object: 'contact_property', id, deleted: true });
    assertRefused(await call('GET', `/contact-properties/${id}`), 404, 'not_found');
    assert.equal((await resend.contactProperties.remove(seats.data!.id)).error, null);
  });

  test('the list pages with limit, after and before', async () => {
    const ids = [
      await property('page_a', 'string'),
      await property('page_b', 'string'),
      await property('page_c', 'string'),
    ];
    const first = await call('GET', '/contact-properties?limit=1');
    assert.deepEqual([first.body.data.length, first.body.has_more], [1, true]);
    const second = await call('GET', `/contact-properties?limit=1&after=${ids[0]}`);
    assert.deepEqual(
      second.body.data.map((item: { id: string }) => item.id),
      [ids[1]],
    );
    const back = await call('GET', `/contact-properties?limit=1&before=${ids[2]}`);
    assert.deepEqual(
      back.body.data.map((item: { id: string }) => item.id),
      [ids[1]],
    );
    assertRefused(await call('GET', `/contact-properties?after=${randomUUID()}`), 400, 'validation_error', 'after');
    for (const id of ids) assert.equal((await call('DELETE', `/contact-properties/${id}`)).status, 200);
  });

  test('keys: letters, digits and underscores, at most 50, unique without regard to case; key and type are fixed', async () => {
    for (const key of ['', '1st', 'has-dash', 'has space', 'ü', 'x'.repeat(51)]) {
      assertRefused(await call('POST', '/contact-properties', { key, type: 'string' }), 400, 'validation_error', 'key');
    }
    for (const key of ['email', 'First_Name', 'last_name', 'unsubscribed', '__proto__']) {
      assertRefused(await call('POST', '/contact-properties', { key, type: 'string' }), 400, 'validation_error', 'key');
    }
    const id = await property(`_${'x'.repeat(49)}`, 'string');
    await call('DELETE', `/contact-properties/${id}`);

    const plan = await property('Plan', 'string', 'free');
    assertRefused(await call('POST', '/contact-properties', { key: 'plan', type: 'number' }), 409, 'conflict', 'key');
    assertRefused(await call('POST', '/contact-properties', { key: 'Plan', type: 'string' }), 409, 'conflict', 'key');
    // Another organization has keys of its own.
    await property('plan', 'number', undefined, other.fullKey);

    assertRefused(
      await call('POST', '/contact-properties', { key: 'kind', type: 'boolean' }),
      400,
      'validation_error',
      'type',
    );
    assertRefused(await call('POST', '/contact-properties', { key: 'kind' }), 400, 'missing_required_field', 'type');
    assertRefused(
      await call('POST', '/contact-properties', { key: 'age', type: 'number', fallback_value: 'ten' }),
      400,
      'validation_error',
      'fallback_value',
    );
    assertRefused(
      await call('POST', '/contact-properties', { key: 'age', type: 'string', fallback_value: 10 }),
      400,
      'validation_error',
      'fallback_value',
    );
    assertRefused(
      await call('POST', '/contact-properties', { key: 'age', type: 'string', fallback_value: 'x'.repeat(2001) }),
      400,
      'validation_error',
      'fallback_value',
    );

    assertRefused(await call('PATCH', `/contact-properties/${plan}`, { key: 'tier' }), 400, 'validation_error', 'key');
    assertRefused(
      await call('PATCH', `/contact-properties/${plan}`, { type: 'number', fallback_value: 1 }),
      400,
      'validation_error',
      'type',
    );
    assertRefused(await call('PATCH', `/contact-properties/${plan}`, {}), 400, 'validation_error');
    assertRefused(
      await call('PATCH', `/contact-properties/${plan}`, { fallback_value: 3 }),
      400,
      'validation_error',
      'fallback_value',
    );
    assert.deepEqual(
      [
        (await call('GET', `/contact-properties/${plan}`)).body.key,
        (await call('GET', `/contact-properties/${plan}`)).body.fallback_value,
      ],
      ['Plan', 'free'],
    );
    await call('DELETE', `/contact-properties/${plan}`);
  });

  test('contacts carry values of the defined properties; GET gives each with its type, the fallback where the contact has none', async () => {
    await property('company', 'string', 'n/a');
    await property('seats', 'number');
    await property('nickname', 'string');

    // The SDK's create and update (properties as given).
    const created = await resend.contacts.create({
      email: 'ada@example.com',
      properties: { company: 'Acme', seats: 3 },
    });
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;
    const read = await resend.contacts.get(id);
    assert.deepEqual(read.data!.properties, {
      company: { type: 'string', value: 'Acme' },
      seats: { type: 'number', value: 3 },
    });
    assert.deepEqual((await call('GET', `/contacts/${id}`)).body.properties, read.data!.properties);

    const bare = await contact({ email: 'grace@example.com' });
    assert.deepEqual((await call('GET', `/contacts/${bare}`)).body.properties, {
      company: { type: 'string', value: 'n/a' },
    });

    // null removes a value (the fallback shows again); keys not given keep theirs.
    const updated = await resend.contacts.update({
      id,
      properties: { company: null, seats: 4.5, nickname: 'Countess' },
    });
    assert.equal(updated.error, null, JSON.stringify(updated.error));
    assert.deepEqual((await call('GET', `/contacts/ada@example.com`)).body.properties, {
      company: { type: 'string', value: 'n/a' },
      seats: { type: 'number', value: 4.5 },
      nickname: { type: 'string', value: 'Countess' },
    });
    assert.equal((await call('PATCH', `/contacts/${id}`, { first_name: 'Ada' })).status, 200);
    const { rows } = await t.db.query<{ properties: object }>('SELECT properties FROM contacts WHERE id = $1', [id]);
    assert.deepEqual(rows[0]!.properties, { seats: 4.5, nickname: 'Countess' });
  });

  test('an undefined key, or a value of another type, is a 400 naming properties.<key>, and nothing is written', async () => {
    await property('city', 'string');
    await property('age', 'number');
    // Another organization's property is not this one's.
    await property('shoe_size', 'number', undefined, other.fullKey);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ shoe_size: 42 }, 'properties.shoe_size'],
      [{ City: 'Paris' }, 'properties.City'],
      [{ city: 5 }, 'properties.city'],
      [{ city: true }, 'properties.city'],
      [{ city: 'x'.repeat(2001) }, 'properties.city'],
      [{ age: '30' }, 'properties.age'],
      [{ age: false }, 'properties.age'],
      [{ age: { value: 3 } }, 'properties.age'],
    ];
    for (const [properties, field] of cases) {
      assertRefused(
        await call('POST', '/contacts', { email: 'refused@example.com', properties }),
        400,
        'validation_error',
        field,
      );
    }
    const { rows } = await t.db.query(
      "SELECT 1 FROM contacts WHERE organization_id = $1 AND email = 'refused@example.com'",
      [org.id],
    );
    assert.equal(rows.length, 0);

    const id = await contact({ email: 'kept@example.com', properties: { city: 'Oslo' } });
    for (const [properties, field] of cases) {
      assertRefused(
        await call('PATCH', `/contacts/${id}`, { properties, first_name: 'Changed' }),
        400,
        'validation_error',
        field,
      );
    }
    const read = (await call('GET', `/contacts/${id}`)).body;
    assert.deepEqual([read.first_name, read.properties.city], [null, { type: 'string', value: 'Oslo' }]);

    const sdk = await resend.contacts.create({ email: 'sdk@example.com', properties: { nope: 'x' } });
    assert.deepEqual([sdk.error?.statusCode, sdk.error?.name], [400, 'validation_error']);
  });

  test('deleting a property deletes every contact’s value for it; a new property of that key starts empty', async () => {
    const id = await property('tier', 'number', 0);
    const member = await contact({ email: 'tiered@example.com', properties: { tier: 2 } });
    assert.equal((await call('DELETE', `/contact-properties/${id}`)).status, 200);
    const { rows } = await t.db.query<{ properties: Record<string, unknown> }>(
      'SELECT properties FROM contacts WHERE id = $1',
      [member],
    );
    assert.equal('tier' in rows[0]!.properties, false);
    await property('tier', 'string');
    assert.equal('tier' in (await call('GET', `/contacts/${member}`)).body.properties, false);
  });

  test('another organization’s property is 404 for GET, PATCH and DELETE, and survives', async () => {
    const theirs = await property('region', 'string', 'eu', other.fullKey);
    assertRefused(await call('GET', `/contact-properties/${theirs}`), 404, 'not_found');
    assertRefused(await call('PATCH', `/contact-properties/${theirs}`, { fallback_value: 'us' }), 404, 'not_found');
    assertRefused(await call('DELETE', `/contact-properties/${theirs}`), 404, 'not_found');
    assertRefused(await call('GET', '/contact-properties/not-an-id'), 404, 'not_found');
    const listed = (await call('GET', '/contact-properties')).body.data.map((item: { id: string }) => item.id);
    assert.equal(listed.includes(theirs), false);
    assert.equal(
      (await call('GET', `/contact-properties/${theirs}`, undefined, other.fullKey)).body.fallback_value,
      'eu',
    );
  });

  test('a session may manage properties; a sending_access key may not', async () => {
    const id = await property('from_session', 'string', undefined, org.session);
    assert.equal((await call('GET', `/contact-properties/${id}`, undefined, org.session)).status, 200);
    const refused = await call('GET', `/contact-properties/${id}`, undefined, org.sendingKey);
    assert.equal(refused.status, 401, JSON.stringify(refused.body));
  });
});
