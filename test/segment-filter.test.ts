import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Resend } from 'resend';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { assertRefused, checkedCaller } from './helpers/checked-calls.ts';
import type { SegmentFilter } from '../src/contacts/segment-filter.ts';
import { segmentAudienceCondition } from '../src/contacts/segment-filter-sql.ts';

// Segment filters (docs/audience.md): the grammar and its refusals, each operator evaluated by the
// database (directly through segmentAudienceCondition, and through the API's lists and counts), the
// union with the contacts added by hand, properties with fallbacks, topics with defaults, and what a
// deleted property or topic leaves. Through real HTTP and the unmodified Resend SDK.

describe('segment filters', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let base: string;
  let resend: Resend;
  const ids: Record<string, string> = {};
  let news: string; // default opt_in
  let promo: string; // default opt_out

  const call = checkedCaller(
    () => base,
    () => org.fullKey,
  );

  before(async () => {
    t = await buildTestApp();
    org = await createTestOrganization(t.db, t.config, 'filters');
    other = await createTestOrganization(t.db, t.config, 'other');
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
    resend = new Resend(org.fullKey, { baseUrl: base });

    for (const property of [
      { key: 'plan', type: 'string', fallback_value: 'free' },
      { key: 'seats', type: 'number', fallback_value: 1 },
      { key: 'company', type: 'string' },
    ]) {
      assert.equal((await call('POST', '/contact-properties', property)).status, 201);
    }
    news = (await call('POST', '/topics', { name: 'News', default_subscription: 'opt_in' })).body.id;
    promo = (await call('POST', '/topics', { name: 'Promotions', default_subscription: 'opt_out' })).body.id;

    const people: Array<[string, object]> = [
      [
        'ada',
        {
          email: 'Ada@Example.com',
          first_name: 'Ada',
          last_name: 'Lovelace',
          properties: { plan: 'pro', seats: 10, company: 'Acme' },
          topics: [{ id: news, subscription: 'opt_out' }],
        },
      ],
      [
        'grace',
        {
          email: 'grace@navy.mil',
          first_name: 'Grace',
          last_name: 'Hopper',
          properties: { seats: 3 },
          topics: [{ id: promo, subscription: 'opt_in' }],
        },
      ],
      ['linus', { email: 'linus@kernel.org', unsubscribed: true }],
      [
        'margaret',
        { email: 'margaret@nasa.gov', first_name: 'Margaret', properties: { plan: 'enterprise', company: 'NASA' } },
      ],
    ];
    for (const [name, payload] of people) {
      const answer = await call('POST', '/contacts', payload);
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
      ids[name] = answer.body.id;
    }
    // Another organization's contact, which no filter of this one may reach.
    await call('POST', '/contacts', { email: 'ada@other.example', first_name: 'Ada' }, other.fullKey);
  });

  after(async () => {
    await t?.close();
  });

  const nameOf = (id: string) => Object.keys(ids).find((name) => ids[name] === id) ?? id;

  async function createFiltered(filter: unknown, name = 'Filtered'): Promise<string> {
    const answer = await call('POST', '/segments', { name, filter });
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    return answer.body.id;
  }

  /** The segment's contacts as the database evaluates its condition, by name, sorted. */
  async function evaluated(segmentId: string, filter: SegmentFilter | null): Promise<string[]> {
    const params: unknown[] = [org.id];
    const condition = segmentAudienceCondition({ id: segmentId, filter }, params);
    const { rows } = await t.db.query<{ id: string }>(
      `SELECT c.id FROM contacts c WHERE c.organization_id = $1 AND ${condition}`,
      params,
    );
    return rows.map((row) => nameOf(row.id)).sort();
  }

  /** The segment's contacts as GET /segments/:id/contacts lists them, checked against its count. */
  async function listed(segmentId: string): Promise<string[]> {
    const list = await call('GET', `/segments/${segmentId}/contacts`);
    assert.equal(list.status, 200, JSON.stringify(list.body));
    const names = (list.body.data as Array<{ id: string }>).map((contact) => nameOf(contact.id)).sort();
    assert.equal((await call('GET', `/segments/${segmentId}`)).body.contacts_count, names.length);
    return names;
  }

  /** Who a filter matches, both ways; they must agree. */
  async function matches(filter: SegmentFilter): Promise<string[]> {
    const id = await createFiltered(filter);
    const direct = await evaluated(id, filter);
    assert.deepEqual(await listed(id), direct, JSON.stringify(filter));
    return direct;
  }

  const rule = (field: string, operator: string, value?: unknown) =>
    ({ type: 'rule', field, operator, ...(value === undefined ? {} : { value }) }) as SegmentFilter;

  test('through the unmodified Resend SDK: create with a filter, read it back, list its contacts', async () => {
    const filter = { type: 'and', rules: [rule('properties.plan', 'neq', 'free'), rule('unsubscribed', 'eq', false)] };
    // The SDK's CreateSegmentOptions names only `name`, and sends the payload as given.
    const payload = { name: 'Paying', filter };
    const created = await resend.segments.create(payload);
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;
    const read = await resend.segments.get(id);
    assert.equal(read.error, null, JSON.stringify(read.error));
    assert.deepEqual((read.data as unknown as { filter: unknown }).filter, filter);
    assert.equal((read.data as unknown as { contacts_count: number }).contacts_count, 2);
    const contacts = await resend.contacts.list({ segmentId: id });
    assert.equal(contacts.error, null, JSON.stringify(contacts.error));
    assert.deepEqual(contacts.data!.data.map((contact) => nameOf(contact.id)).sort(), ['ada', 'margaret']);
    // The same list at GET /contacts?segment_id=, paged.
    const first = (await call('GET', `/contacts?segment_id=${id}&limit=1`)).body;
    assert.deepEqual([first.data.length, first.has_more], [1, true]);
    const second = (await call('GET', `/contacts?segment_id=${id}&limit=1&after=${first.data[0].id}`)).body;
    assert.deepEqual([second.data.length, second.has_more], [1, false]);
    assert.deepEqual([nameOf(first.data[0].id), nameOf(second.data[0].id)], ['ada', 'margaret']);

    // A segment without a filter shows none.
    const plain = await resend.segments.create({ name: 'Plain' });
    assert.equal('filter' in (await call('GET', `/segments/${plain.data!.id}`)).body, false);
    const all = (await call('GET', '/segments')).body.data as Array<{ id: string; filter?: unknown }>;
    assert.deepEqual(all.find((segment) => segment.id === id)!.filter, filter);
  });

  test('contact fields: each operator', async () => {
    assert.deepEqual(await matches(rule('email', 'eq', 'ADA@example.COM')), ['ada']);
    assert.deepEqual(await matches(rule('email', 'neq', 'ada@example.com')), ['grace', 'linus', 'margaret']);
    assert.deepEqual(await matches(rule('email', 'contains', 'A')), ['ada', 'grace', 'margaret']);
    assert.deepEqual(await matches(rule('email', 'not_contains', 'a')), ['linus']);
    assert.deepEqual(await matches(rule('email', 'starts_with', 'GR')), ['grace']);
    assert.deepEqual(await matches(rule('email', 'ends_with', '.GOV')), ['margaret']);
    assert.deepEqual(await matches(rule('email', 'in', ['LINUS@kernel.org', 'nobody@x.org'])), ['linus']);
    // Names compare as written; a contact without one is not equal to anything and contains nothing.
    assert.deepEqual(await matches(rule('first_name', 'eq', 'Ada')), ['ada']);
    assert.deepEqual(await matches(rule('first_name', 'eq', 'ada')), []);
    assert.deepEqual(await matches(rule('first_name', 'neq', 'Ada')), ['grace', 'linus', 'margaret']);
    assert.deepEqual(await matches(rule('first_name', 'contains', 'a')), ['ada', 'grace', 'margaret']);
    assert.deepEqual(await matches(rule('first_name', 'not_contains', 'r')), ['ada', 'linus']);
    assert.deepEqual(await matches(rule('last_name', 'starts_with', 'Hop')), ['grace']);
    assert.deepEqual(await matches(rule('last_name', 'ends_with', 'lace')), ['ada']);
    assert.deepEqual(await matches(rule('last_name', 'is_set')), ['ada', 'grace']);
    assert.deepEqual(await matches(rule('last_name', 'is_not_set')), ['linus', 'margaret']);
    assert.deepEqual(await matches(rule('first_name', 'in', ['Grace', 'Margaret'])), ['grace', 'margaret']);
    assert.deepEqual(await matches(rule('unsubscribed', 'eq', true)), ['linus']);
    assert.deepEqual(await matches(rule('unsubscribed', 'neq', true)), ['ada', 'grace', 'margaret']);

    // created_at: the contacts were made in order, ada first.
    // To the microsecond, which a JavaScript Date would drop.
    const { rows } = await t.db.query<{ made: string }>(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS made FROM contacts WHERE id = $1`,
      [ids.grace],
    );
    const graceMade = rows[0]!.made;
    assert.deepEqual(await matches(rule('created_at', 'gte', graceMade)), ['grace', 'linus', 'margaret']);
    assert.deepEqual(await matches(rule('created_at', 'gt', graceMade)), ['linus', 'margaret']);
    assert.deepEqual(await matches(rule('created_at', 'lt', graceMade)), ['ada']);
    assert.deepEqual(await matches(rule('created_at', 'lte', graceMade)), ['ada', 'grace']);
    assert.deepEqual(await matches(rule('created_at', 'gt', '2000-01-01')), ['ada', 'grace', 'linus', 'margaret']);
    assert.deepEqual(await matches(rule('created_at', 'lt', '2000-01-01T00:00:00+02:00')), []);
  });

  test('properties: the fallback counts for a contact without a value', async () => {
    // plan: ada pro, margaret enterprise, grace and linus the fallback free.
    assert.deepEqual(await matches(rule('properties.plan', 'eq', 'free')), ['grace', 'linus']);
    assert.deepEqual(await matches(rule('properties.plan', 'neq', 'free')), ['ada', 'margaret']);
    assert.deepEqual(await matches(rule('properties.plan', 'in', ['pro', 'enterprise'])), ['ada', 'margaret']);
    assert.deepEqual(await matches(rule('properties.plan', 'contains', 'er')), ['margaret']);
    assert.deepEqual(await matches(rule('properties.plan', 'not_contains', 'p')), ['grace', 'linus']);
    assert.deepEqual(await matches(rule('properties.plan', 'starts_with', 'p')), ['ada']);
    assert.deepEqual(await matches(rule('properties.plan', 'ends_with', 'ee')), ['grace', 'linus']);
    // With a fallback, every contact has a value.
    assert.deepEqual(await matches(rule('properties.plan', 'is_not_set')), []);
    // seats: ada 10, grace 3, the others the fallback 1.
    assert.deepEqual(await matches(rule('properties.seats', 'eq', 1)), ['linus', 'margaret']);
    assert.deepEqual(await matches(rule('properties.seats', 'neq', 1)), ['ada', 'grace']);
    assert.deepEqual(await matches(rule('properties.seats', 'gt', 3)), ['ada']);
    assert.deepEqual(await matches(rule('properties.seats', 'gte', 3)), ['ada', 'grace']);
    assert.deepEqual(await matches(rule('properties.seats', 'lt', 3)), ['linus', 'margaret']);
    assert.deepEqual(await matches(rule('properties.seats', 'lte', 3.5)), ['grace', 'linus', 'margaret']);
    assert.deepEqual(await matches(rule('properties.seats', 'in', [3, 10])), ['ada', 'grace']);
    // company has no fallback.
    assert.deepEqual(await matches(rule('properties.company', 'is_set')), ['ada', 'margaret']);
    assert.deepEqual(await matches(rule('properties.company', 'is_not_set')), ['grace', 'linus']);
    assert.deepEqual(await matches(rule('properties.company', 'neq', 'Acme')), ['grace', 'linus', 'margaret']);

    // A new fallback applies at once: the filter is evaluated when asked.
    const id = await createFiltered(rule('properties.seats', 'gte', 5));
    assert.deepEqual(await listed(id), ['ada']);
    const seats = ((await call('GET', '/contact-properties')).body.data as Array<{ id: string; key: string }>).find(
      (property) => property.key === 'seats',
    )!;
    await call('PATCH', `/contact-properties/${seats.id}`, { fallback_value: 5 });
    assert.deepEqual(await listed(id), ['ada', 'linus', 'margaret']);
    await call('PATCH', `/contact-properties/${seats.id}`, { fallback_value: 1 });
  });

  test('topics: the contact’s choice, else the topic’s default', async () => {
    // news is opt_in by default, ada opted out; promo is opt_out by default, grace opted in.
    assert.deepEqual(await matches(rule(`topics.${news}`, 'eq', 'opt_in')), ['grace', 'linus', 'margaret']);
    assert.deepEqual(await matches(rule(`topics.${news}`, 'eq', 'opt_out')), ['ada']);
    assert.deepEqual(await matches(rule(`topics.${news}`, 'neq', 'opt_in')), ['ada']);
    assert.deepEqual(await matches(rule(`topics.${promo}`, 'eq', 'opt_in')), ['grace']);
    assert.deepEqual(await matches(rule(`topics.${promo}`, 'neq', 'opt_in')), ['ada', 'linus', 'margaret']);
    assert.deepEqual(await matches(rule(`topics.${promo}`, 'in', ['opt_in', 'opt_out'])), [
      'ada',
      'grace',
      'linus',
      'margaret',
    ]);
    assert.deepEqual(await matches(rule(`topics.${promo.toUpperCase()}`, 'in', ['opt_out'])), [
      'ada',
      'linus',
      'margaret',
    ]);
    // The subscription compared with is a bound parameter, as every value is, never SQL text.
    for (const subscription of ['opt_in', 'opt_out']) {
      const params: unknown[] = [];
      const condition = segmentAudienceCondition(
        { id: randomUUID(), filter: rule(`topics.${news}`, 'eq', subscription) },
        params,
      );
      assert.doesNotMatch(condition, /'/, condition);
      assert.ok(params.includes(subscription), JSON.stringify(params));
    }
  });

  test('and, or, not, nested', async () => {
    const gov = rule('email', 'ends_with', '.gov');
    const paying = rule('properties.plan', 'neq', 'free');
    assert.deepEqual(await matches({ type: 'and', rules: [paying, gov] }), ['margaret']);
    assert.deepEqual(await matches({ type: 'or', rules: [rule('unsubscribed', 'eq', true), gov] }), [
      'linus',
      'margaret',
    ]);
    assert.deepEqual(await matches({ type: 'not', rule: paying }), ['grace', 'linus']);
    // not over a rule a contact has no value for: company is_set is false for grace and linus.
    assert.deepEqual(await matches({ type: 'not', rule: rule('properties.company', 'eq', 'Acme') }), [
      'grace',
      'linus',
      'margaret',
    ]);
    assert.deepEqual(
      await matches({
        type: 'or',
        rules: [
          { type: 'and', rules: [paying, { type: 'not', rule: gov }] },
          { type: 'and', rules: [rule(`topics.${promo}`, 'eq', 'opt_in'), rule('properties.seats', 'gt', 2)] },
        ],
      }),
      ['ada', 'grace'],
    );
    // Five levels of groups are allowed.
    let deep: SegmentFilter = gov;
    for (let level = 0; level < 5; level += 1) deep = { type: 'and', rules: [deep] };
    assert.deepEqual(await matches(deep), ['margaret']);
  });

  test('a segment’s contacts: those added by hand, and those its filter matches; PATCH changes or removes the filter', async () => {
    const id = await createFiltered(rule('email', 'ends_with', '.gov'), 'Union');
    assert.deepEqual(await listed(id), ['margaret']);
    // Added by hand though the filter does not match; added by hand and matched: counted once.
    assert.equal((await call('POST', `/contacts/${ids.linus}/segments/${id}`)).status, 200);
    assert.equal((await call('POST', `/contacts/${ids.margaret}/segments/${id}`)).status, 200);
    assert.deepEqual(await listed(id), ['linus', 'margaret']);
    assert.deepEqual(await evaluated(id, rule('email', 'ends_with', '.gov')), ['linus', 'margaret']);
    const members = (await call('GET', `/contacts?segment_id=${id}`)).body.data as Array<{ id: string }>;
    assert.deepEqual(
      members.map((contact) => nameOf(contact.id)),
      ['linus', 'margaret'],
    );
    // A contact's segments: those it was added to and those whose filter matches it.
    const segmentsOf = async (name: string) =>
      ((await call('GET', `/contacts/${ids[name]}/segments`)).body.data as Array<{ id: string }>).map(
        (segment) => segment.id,
      );
    assert.ok((await segmentsOf('margaret')).includes(id));
    assert.ok((await segmentsOf('linus')).includes(id));
    assert.ok(!(await segmentsOf('grace')).includes(id));
    const sdkList = await resend.contacts.segments.list({ contactId: ids.margaret! });
    assert.ok(sdkList.data!.data.some((segment) => segment.id === id));
    // Removing takes back what was added: margaret stays, as the filter matches her; linus leaves.
    assert.equal((await call('DELETE', `/contacts/${ids.margaret}/segments/${id}`)).status, 200);
    assert.equal((await call('DELETE', `/contacts/${ids.linus}/segments/${id}`)).status, 200);
    assert.deepEqual(await listed(id), ['margaret']);
    assertRefused(await call('DELETE', `/contacts/${ids.margaret}/segments/${id}`), 404, 'not_found');
    await call('POST', `/contacts/${ids.linus}/segments/${id}`);
    await call('POST', `/contacts/${ids.margaret}/segments/${id}`);

    // A new filter; the name stays.
    const changed = await call('PATCH', `/segments/${id}`, { filter: rule('first_name', 'eq', 'Ada') });
    assert.deepEqual(changed.body, { object: 'segment', id });
    assert.deepEqual(await listed(id), ['ada', 'linus', 'margaret']);
    assert.equal((await call('GET', `/segments/${id}`)).body.name, 'Union');
    // A new name; the filter stays.
    await call('PATCH', `/segments/${id}`, { name: 'Renamed' });
    const read = (await call('GET', `/segments/${id}`)).body;
    assert.deepEqual([read.name, read.filter], ['Renamed', rule('first_name', 'eq', 'Ada')]);
    // null removes the filter: only those added by hand are left.
    await call('PATCH', `/segments/${id}`, { filter: null });
    assert.equal('filter' in (await call('GET', `/segments/${id}`)).body, false);
    assert.deepEqual(await listed(id), ['linus', 'margaret']);
    // Through the SDK's segments.update, a name alone.
    const renamed = await resend.segments.update(id, { name: 'Again' });
    assert.equal(renamed.error, null, JSON.stringify(renamed.error));
    assertRefused(await call('PATCH', `/segments/${id}`, {}), 400, 'validation_error');
    assertRefused(
      await call('PATCH', `/segments/${id}`, { filter: { type: 'rule' } }),
      400,
      'validation_error',
      'filter.field',
    );
    // Another organization's segment is not there.
    const theirs = (await call('POST', '/segments', { name: 'Theirs' }, other.fullKey)).body.id;
    assertRefused(await call('PATCH', `/segments/${theirs}`, { filter: null }), 404, 'not_found');
  });

  test('a property or topic deleted after the filter was saved: its rule matches nobody', async () => {
    assert.equal((await call('POST', '/contact-properties', { key: 'team', type: 'string' })).status, 201);
    const team = (await call('GET', '/contact-properties')).body.data.find(
      (property: { key: string }) => property.key === 'team',
    ).id;
    await call('PATCH', `/contacts/${ids.grace}`, { properties: { team: 'Navy' } });
    const temporary = (await call('POST', '/topics', { name: 'Temporary', default_subscription: 'opt_in' })).body.id;

    const onProperty = await createFiltered({ type: 'not', rule: rule('properties.team', 'eq', 'Navy') });
    const unset = await createFiltered(rule('properties.team', 'is_not_set'));
    const onTopic = await createFiltered(rule(`topics.${temporary}`, 'eq', 'opt_in'));
    const notOnTopic = await createFiltered({ type: 'not', rule: rule(`topics.${temporary}`, 'eq', 'opt_out') });
    const either = await createFiltered({
      type: 'or',
      rules: [rule('properties.team', 'is_not_set'), rule('email', 'starts_with', 'ada')],
    });
    assert.deepEqual(await listed(onProperty), ['ada', 'linus', 'margaret']);
    assert.deepEqual(await listed(unset), ['ada', 'linus', 'margaret']);
    assert.deepEqual(await listed(onTopic), ['ada', 'grace', 'linus', 'margaret']);
    assert.deepEqual(await listed(notOnTopic), ['ada', 'grace', 'linus', 'margaret']);

    assert.equal((await call('DELETE', `/contact-properties/${team}`)).status, 200);
    assert.equal((await call('DELETE', `/topics/${temporary}`)).status, 200);
    assert.deepEqual(await listed(unset), []);
    assert.deepEqual(await listed(onTopic), []);
    // A negated rule on what is gone matches nobody either side: `not` of nobody is everybody.
    assert.deepEqual(await listed(onProperty), ['ada', 'grace', 'linus', 'margaret']);
    assert.deepEqual(await listed(notOnTopic), ['ada', 'grace', 'linus', 'margaret']);
    assert.deepEqual(await listed(either), ['ada']);
    // Made again with the other type: the string rule still matches nobody.
    assert.equal((await call('POST', '/contact-properties', { key: 'team', type: 'number' })).status, 201);
    await call('PATCH', `/contacts/${ids.grace}`, { properties: { team: 7 } });
    assert.deepEqual(await listed(onProperty), ['ada', 'grace', 'linus', 'margaret']);
    assert.equal((await call('GET', `/segments/${onProperty}`)).status, 200);
    assert.equal((await call('GET', '/segments')).status, 200);
  });

  test('refusals name the rule at fault and why; nothing is written', async () => {
    const cases: Array<[unknown, string, RegExp]> = [
      [{ and: [] }, 'filter', /type/],
      ['email = x', 'filter', /object/],
      [[], 'filter', /object/],
      [{ type: 'xor', rules: [] }, 'filter', /type/],
      [{ type: 'and', rules: [] }, 'filter.rules', /1 to 50/],
      [{ type: 'and', rules: Array(51).fill(rule('email', 'contains', 'a')) }, 'filter.rules', /1 to 50/],
      [
        { type: 'and', rules: [rule('email', 'eq', 'a'), { type: 'rule', field: 'email' }] },
        'filter.rules[1].operator',
        /one of/,
      ],
      [
        { type: 'or', rules: [rule('email', 'eq', 'a'), rule('email', 'eq', 'b'), rule('phone', 'eq', '1')] },
        'filter.rules[2].field',
        /unknown field "phone"/,
      ],
      [{ type: 'not' }, 'filter.rule', /negates/],
      [{ type: 'not', rule: rule('email', 'eq', 'a'), rules: [] }, 'filter.rules', /only type, rule/],
      [{ ...rule('email', 'eq', 'a'), extra: 1 }, 'filter.extra', /only type, field, operator, value/],
      [rule('email', 'gt', 'a'), 'filter.operator', /gt does not apply to email/],
      [rule('email', 'is_set'), 'filter.operator', /does not apply/],
      [rule('email', 'eq', 3), 'filter.value', /must be a string/],
      [rule('email', 'eq'), 'filter.value', /needs a value/],
      [rule('email', 'contains', ''), 'filter.value', /non-empty/],
      [rule('first_name', 'eq', 'x'.repeat(2001)), 'filter.value', /2000/],
      [rule('first_name', 'is_set', 'x'), 'filter.value', /takes no value/],
      [rule('first_name', 'in', 'x'), 'filter.value', /array/],
      [rule('first_name', 'in', []), 'filter.value', /array of 1 to 100/],
      [rule('first_name', 'in', ['a', 2]), 'filter.value[1]', /must be a string/],
      [rule('first_name', 'eq', ['a']), 'filter.value', /one value/],
      [rule('unsubscribed', 'eq', 'yes'), 'filter.value', /true or false/],
      [rule('unsubscribed', 'contains', 'x'), 'filter.operator', /use eq, neq/],
      [rule('created_at', 'eq', '2026-01-01'), 'filter.operator', /gt, gte, lt, lte/],
      [rule('created_at', 'gt', 'yesterday'), 'filter.value', /date/],
      [rule('created_at', 'gt', '2026-01-01T10:00'), 'filter.value', /zone/],
      [rule('created_at', 'gt', '2026-02-30'), 'filter.value', /date/],
      // Year 0 and offsets past ±14:00, which PostgreSQL refuses or the zones in use never have.
      [rule('created_at', 'gt', '0000-01-01'), 'filter.value', /0001 to 9999/],
      [rule('created_at', 'gt', '0000-12-31T23:00:00Z'), 'filter.value', /0001 to 9999/],
      [rule('created_at', 'gt', '2026-01-01T00:00:00+20:00'), 'filter.value', /±14:00/],
      [rule('created_at', 'lt', '2026-01-01T00:00:00-1401'), 'filter.value', /±14:00/],
      [rule('created_at', 'gt', '2026-01-01T00:00:00+15:00'), 'filter.value', /±14:00/],
      [rule('created_at', 'gt', '2026-01-01T00:00:00+01:60'), 'filter.value', /zone/],
      [rule('created_at', 'gt', '2026-01-01T24:00:00Z'), 'filter.value', /date/],
      [rule('created_at', 'gt', '2026-01-01T23:59:60Z'), 'filter.value', /date/],
      [rule('created_at', 'gt', '2025-02-29'), 'filter.value', /date/],
      [
        { type: 'or', rules: [rule('email', 'eq', 'a'), rule('created_at', 'gte', '0000-06-01T00:00Z')] },
        'filter.rules[1].value',
        /0001 to 9999/,
      ],
      [rule('properties.plan', 'eq', 3), 'filter.value', /must be a string: plan is a string property/],
      [rule('properties.plan', 'gt', 3), 'filter.operator', /gt does not apply to properties.plan, a string property/],
      [rule('properties.seats', 'eq', '3'), 'filter.value', /must be a number: seats is a number property/],
      [rule('properties.seats', 'in', [3, '4']), 'filter.value[1]', /must be a number/],
      [rule('properties.seats', 'contains', 3), 'filter.operator', /contains does not apply to properties.seats/],
      [rule('properties.seats', 'contains', 'x'), 'filter.operator', /a number property; use eq, neq, gt/],
      [rule('properties.seats', 'eq', true), 'filter.value', /string or a number/],
      [rule('properties.nothing', 'eq', 'x'), 'filter.field', /no contact property has the key nothing/],
      [rule('properties.bad key', 'eq', 'x'), 'filter.field', /unknown field/],
      [rule(`topics.${randomUUID()}`, 'eq', 'opt_in'), 'filter.field', /no topic has the id/],
      [rule('topics.news', 'eq', 'opt_in'), 'filter.field', /unknown field/],
      [rule(`topics.${news}`, 'eq', 'yes'), 'filter.value', /opt_in or opt_out/],
      [rule(`topics.${news}`, 'is_set'), 'filter.operator', /use eq, neq, in/],
    ];
    // Another organization's property and topic are unknown here.
    await call('POST', '/contact-properties', { key: 'theirs', type: 'string' }, other.fullKey);
    const theirTopic = (await call('POST', '/topics', { name: 'T', default_subscription: 'opt_in' }, other.fullKey))
      .body.id;
    cases.push([rule('properties.theirs', 'is_set'), 'filter.field', /no contact property/]);
    cases.push([rule(`topics.${theirTopic}`, 'eq', 'opt_in'), 'filter.field', /no topic/]);
    // Six levels of groups are too many.
    let deep: SegmentFilter = rule('email', 'contains', 'a');
    for (let level = 0; level < 6; level += 1) deep = { type: 'or', rules: [deep] };
    cases.push([deep, 'filter.rules[0].rules[0].rules[0].rules[0].rules[0]', /at most 5 deep/]);
    // 201 rules in all (five groups of 50 would be 250).
    const fifty = Array(50).fill(rule('email', 'contains', 'a'));
    cases.push([
      { type: 'and', rules: Array(5).fill({ type: 'or', rules: fifty }) },
      'filter.rules[4].rules[0]',
      /200 rules/,
    ]);

    const before = (await t.db.query('SELECT count(*)::int AS n FROM segments')).rows[0];
    for (const [filter, field, message] of cases) {
      const answer = await call('POST', '/segments', { name: 'Refused', filter });
      assert.equal(answer.status, 400, `${JSON.stringify(filter).slice(0, 200)}: ${JSON.stringify(answer.body)}`);
      assertRefused(answer, 400, 'validation_error', field);
      assert.match(answer.body.message, message, JSON.stringify(filter));
      assert.ok(answer.body.message.startsWith(`${field}: `), answer.body.message);
    }
    assert.deepEqual((await t.db.query('SELECT count(*)::int AS n FROM segments')).rows[0], before);
    // The SDK sees the same refusal.
    const payload = { name: 'Refused', filter: rule('phone', 'eq', '1') };
    const refused = await resend.segments.create(payload);
    assert.deepEqual([refused.error?.statusCode, refused.error?.name], [400, 'validation_error']);
  });

  test('created_at: the years 0001 to 9999 and offsets to ±14:00 work on every route; a stored value PostgreSQL refuses matches nobody', async () => {
    const stamps = await createTestOrganization(t.db, t.config, 'stamps');
    const stampsCall = (method: string, path: string, body?: unknown) => call(method, path, body, stamps.fullKey);
    const contact = (await stampsCall('POST', '/contacts', { email: 'early@example.com' })).body.id as string;
    const names: Record<string, string> = {};
    const segment = async (name: string, filter: SegmentFilter) => {
      const answer = await stampsCall('POST', '/segments', { name, filter });
      assert.equal(answer.status, 201, `${name}: ${JSON.stringify(answer.body)}`);
      names[answer.body.id] = name;
      return answer.body.id as string;
    };
    // Every contact was made after the first instant of year 1 (10:00 on 31 December 1 BC in UTC) and
    // before the last of 9999 (13:59:59 on 1 January 10000 in UTC).
    const matchAll = [
      await segment('year 1, +14:00', rule('created_at', 'gt', '0001-01-01T00:00:00+14:00')),
      await segment('year 1, date', rule('created_at', 'gte', '0001-01-01')),
      await segment('year 9999, -14:00', rule('created_at', 'lt', '9999-12-31T23:59:59.999999-14:00')),
      await segment('year 9999, -1400', rule('created_at', 'lte', '9999-12-31 23:59-1400')),
      await segment('lower case', rule('created_at', 'gt', '2000-01-01t10:00:00.5z')),
      await segment('leap day', rule('created_at', 'gt', '2024-02-29T12:00+05:30')),
    ];
    const matchNone = [await segment('the future', rule('created_at', 'gt', '9999-01-01T00:00:00Z'))];
    // A filter stored before the check was this strict: its rule matches nobody, and nothing fails.
    const { rows } = await t.db.query<{ id: string }>(
      `INSERT INTO segments (organization_id, name, filter) VALUES ($1, 'stored year 0', $2::jsonb), ($1, 'stored +20:00', $3::jsonb)
       RETURNING id`,
      [
        stamps.id,
        JSON.stringify(rule('created_at', 'gt', '0000-01-01')),
        JSON.stringify({ type: 'not', rule: rule('created_at', 'gt', '2026-01-01T00:00:00+20:00') }),
      ],
    );
    const [storedYearZero, storedNegated] = rows.map((row) => row.id) as [string, string];
    matchNone.push(storedYearZero);
    matchAll.push(storedNegated);

    const list = await stampsCall('GET', '/segments');
    assert.equal(list.status, 200, JSON.stringify(list.body));
    const counts = Object.fromEntries(
      (list.body.data as Array<{ id: string; contacts_count: number }>).map((s) => [s.id, s.contacts_count]),
    );
    for (const id of matchAll) {
      assert.equal(counts[id], 1, names[id] ?? id);
      const one = await stampsCall('GET', `/segments/${id}`);
      assert.equal(one.status, 200, JSON.stringify(one.body));
      assert.equal(one.body.contacts_count, 1);
      const members = await stampsCall('GET', `/contacts?segment_id=${id}`);
      assert.equal(members.status, 200, JSON.stringify(members.body));
      assert.deepEqual(
        members.body.data.map((c: { id: string }) => c.id),
        [contact],
      );
    }
    for (const id of matchNone) {
      assert.equal(counts[id], 0, names[id] ?? id);
      assert.equal((await stampsCall('GET', `/segments/${id}`)).body.contacts_count, 0);
      const members = await stampsCall('GET', `/contacts?segment_id=${id}`);
      assert.equal(members.status, 200, JSON.stringify(members.body));
      assert.deepEqual(members.body.data, []);
    }
    const ofContact = await stampsCall('GET', `/contacts/${contact}/segments`);
    assert.equal(ofContact.status, 200, JSON.stringify(ofContact.body));
    assert.deepEqual(ofContact.body.data.map((s: { id: string }) => s.id).sort(), [...matchAll].sort());
    // The filter reads back as written.
    assert.deepEqual(
      (await stampsCall('GET', `/segments/${matchAll[4]}`)).body.filter,
      rule('created_at', 'gt', '2000-01-01t10:00:00.5z'),
    );
  });

  test('an organization whose filters together bind more than 65,535 parameters: every route answers', async (context) => {
    const many = await createTestOrganization(t.db, t.config, 'many');
    const manyCall = (method: string, path: string, body?: unknown) => call(method, path, body, many.fullKey);
    assert.equal((await manyCall('POST', '/contact-properties', { key: 'score', type: 'number' })).status, 201);
    const high = (await manyCall('POST', '/contacts', { email: 'high@example.com', properties: { score: 500 } })).body
      .id as string;
    const low = (await manyCall('POST', '/contacts', { email: 'low@example.com', properties: { score: 5 } })).body
      .id as string;
    // Filters of the largest size, 200 rules in four groups of 50. On email, a parameter each (cheap to
    // plan): the given addresses among others. On a property, some three each (key, type and value) and
    // some 1,200 subqueries in all: above 100 (high only) or above 0 (both).
    const groups = (make: (index: number) => SegmentFilter): SegmentFilter => ({
      type: 'or',
      rules: Array.from({ length: 4 }, (_, group) => ({
        type: 'or' as const,
        rules: Array.from({ length: 50 }, (_, index) => make(group * 50 + index)),
      })),
    });
    const emailIn = (...addresses: string[]) =>
      groups((index) => rule('email', 'eq', addresses[index - 200 + addresses.length] ?? `nobody${index}@example.com`));
    const scoreAbove = (floor: number): SegmentFilter => ({
      type: 'and',
      rules: Array.from({ length: 4 }, (_, group) => ({
        type: 'or' as const,
        rules: Array.from({ length: 50 }, (_, index) => rule('properties.score', 'gt', floor - group * 50 - index)),
      })),
    });
    // Through the API, the checks pass; the rest stored directly. 330 on email (some 66,000 parameters)
    // and 4 on the property (2,400 more): even n matches high only, odd n both.
    const largest = await manyCall('POST', '/segments', { name: 'Many 0', filter: emailIn('high@example.com') });
    assert.equal(largest.status, 201, JSON.stringify(largest.body));
    const segments = 334;
    await t.db.query(
      `INSERT INTO segments (organization_id, name, filter)
       SELECT $1, 'Many ' || n,
              CASE WHEN n <= 4 THEN CASE WHEN n % 2 = 0 THEN $4::jsonb ELSE $5::jsonb END
                   WHEN n % 2 = 0 THEN $2::jsonb ELSE $3::jsonb END
         FROM generate_series(1, $6::int - 1) AS n`,
      [
        many.id,
        JSON.stringify(emailIn('high@example.com')),
        JSON.stringify(emailIn('high@example.com', 'low@example.com')),
        JSON.stringify(scoreAbove(100)),
        JSON.stringify(scoreAbove(1)),
        segments,
      ],
    );
    let started = performance.now();
    const list = await manyCall('GET', '/segments');
    const listMs = performance.now() - started;
    assert.equal(list.status, 200, JSON.stringify(list.body).slice(0, 500));
    const data = list.body.data as Array<{ name: string; contacts_count: number }>;
    assert.equal(data.length, segments);
    for (const segment of data) {
      const n = Number(segment.name.slice('Many '.length));
      assert.equal(segment.contacts_count, n % 2 === 0 ? 1 : 2, segment.name);
    }
    started = performance.now();
    const ofHigh = await manyCall('GET', `/contacts/${high}/segments`);
    const ofHighMs = performance.now() - started;
    assert.equal(ofHigh.status, 200, JSON.stringify(ofHigh.body).slice(0, 500));
    assert.equal(ofHigh.body.data.length, segments);
    const ofLow = await manyCall('GET', `/contacts/${low}/segments?limit=100`);
    assert.equal(ofLow.status, 200, JSON.stringify(ofLow.body).slice(0, 500));
    assert.deepEqual([ofLow.body.data.length, ofLow.body.has_more], [100, true]);
    context.diagnostic(
      `${segments} filters of 200 rules: GET /segments ${listMs.toFixed(0)} ms, ` +
        `GET /contacts/:id/segments ${ofHighMs.toFixed(0)} ms`,
    );
  });

  test('POST /contacts takes segments as ids or as { id }, and the membership answers carry both shapes', async () => {
    const segment = await createFiltered(rule('email', 'eq', 'none@example.com'), 'Both shapes');
    const asObjects = await resend.contacts.create({ email: 'objects@example.com', segments: [{ id: segment }] });
    assert.equal(asObjects.error, null, JSON.stringify(asObjects.error));
    const asIds = await call('POST', '/contacts', { email: 'ids@example.com', segments: [segment] });
    assert.equal(asIds.status, 201);
    ids.objects = asObjects.data!.id;
    ids.ids = asIds.body.id;
    assert.deepEqual(await listed(segment), ['ids', 'objects']);
    const added = await call('POST', `/contacts/${ids.ada}/segments/${segment}`);
    assert.deepEqual(added.body, { object: 'contact_segment', id: segment, contact_id: ids.ada, segment_id: segment });
    const removed = await resend.contacts.segments.remove({ contactId: ids.ada!, segmentId: segment });
    assert.equal(removed.error, null, JSON.stringify(removed.error));
    assert.deepEqual([removed.data!.id, removed.data!.deleted], [segment, true]);
    await call('DELETE', `/contacts/${ids.objects}`);
    await call('DELETE', `/contacts/${ids.ids}`);
    delete ids.objects;
    delete ids.ids;
  });

  test('speed: a filter over 20,000 contacts (reported, not asserted)', async (context) => {
    const bulk = await createTestOrganization(t.db, t.config, 'bulk');
    const bulkCall = (method: string, path: string, body?: unknown) => call(method, path, body, bulk.fullKey);
    await bulkCall('POST', '/contact-properties', { key: 'score', type: 'number', fallback_value: 0 });
    await bulkCall('POST', '/contact-properties', { key: 'tier', type: 'string' });
    const topic = (await bulkCall('POST', '/topics', { name: 'Digest', default_subscription: 'opt_out' })).body.id;
    await t.db.query(
      `INSERT INTO contacts (organization_id, email, first_name, unsubscribed, properties)
       SELECT $1, 'person' || n || '@example' || (n % 10) || '.com', 'P' || n, n % 50 = 0,
              CASE WHEN n % 3 = 0 THEN jsonb_build_object('score', n % 100, 'tier', 'gold')
                   ELSE '{}'::jsonb END
         FROM generate_series(1, 20000) AS n`,
      [bulk.id],
    );
    await t.db.query(
      `INSERT INTO contact_topics (contact_id, topic_id, subscription)
       SELECT id, $2, 'opt_in' FROM contacts WHERE organization_id = $1 AND first_name LIKE '%7'`,
      [bulk.id, topic],
    );
    const filter: SegmentFilter = {
      type: 'and',
      rules: [
        rule('unsubscribed', 'eq', false),
        rule('email', 'ends_with', '@example3.com'),
        {
          type: 'or',
          rules: [rule('properties.score', 'gte', 50), rule(`topics.${topic}`, 'eq', 'opt_in')],
        },
        { type: 'not', rule: rule('properties.tier', 'eq', 'silver') },
      ],
    };
    const created = await bulkCall('POST', '/segments', { name: 'Big', filter });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    // Expected, computed here: n ends in 3 and not divisible by 50; n % 3 = 0 with n % 100 >= 50, or n ends in 7 (never with 3).
    let expected = 0;
    for (let n = 1; n <= 20000; n += 1) {
      if (n % 10 !== 3 || n % 50 === 0) continue;
      if (n % 3 === 0 && n % 100 >= 50) expected += 1;
    }
    let started = performance.now();
    const read = await bulkCall('GET', `/segments/${id}`);
    const countMs = performance.now() - started;
    assert.equal(read.body.contacts_count, expected);
    started = performance.now();
    const page = await bulkCall('GET', `/segments/${id}/contacts?limit=100`);
    const pageMs = performance.now() - started;
    assert.equal(page.body.data.length, Math.min(100, expected));
    const params: unknown[] = [bulk.id];
    const condition = segmentAudienceCondition({ id, filter }, params);
    started = performance.now();
    const { rows } = await t.db.query<{ id: string }>(
      `SELECT c.id FROM contacts c WHERE c.organization_id = $1 AND ${condition}`,
      params,
    );
    const selectMs = performance.now() - started;
    assert.equal(rows.length, expected);
    context.diagnostic(
      `20,000 contacts, ${expected} matched: count ${countMs.toFixed(0)} ms, first page ${pageMs.toFixed(0)} ms, ` +
        `whole audience ${selectMs.toFixed(0)} ms`,
    );
  });
});
