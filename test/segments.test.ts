import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Resend } from 'resend';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { requestProblems, webhookProblems } from './helpers/resend-openapi.ts';
import { assertRefused, checkedCaller } from './helpers/checked-calls.ts';

// Segments (/segments), their older name (/audiences), and contacts' membership in them, through real
// HTTP and the unmodified Resend SDK; every answer of an operation Resend documents is checked against
// its schema, and the contact events against Resend's webhook schema.

describe('segments', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let base: string;
  let resend: Resend;

  before(async () => {
    // The webhook endpoint the events fan out to is on loopback; nothing delivers to it in this file.
    t = await buildTestApp({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
    org = await createTestOrganization(t.db, t.config, 'segments');
    other = await createTestOrganization(t.db, t.config, 'other');
    await observeWebhookEvents(t.app, org);
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

  async function segment(name: string, key = org.fullKey): Promise<string> {
    const answer = await call('POST', '/segments', { name }, key);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    return answer.body.id;
  }

  async function contact(payload: object, key = org.fullKey): Promise<string> {
    const answer = await call('POST', '/contacts', payload, key);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    return answer.body.id;
  }

  const idsOf = (list: { data: Array<{ id: string }> }) => list.data.map((item) => item.id);
  const memberIds = async (segmentId: string) => idsOf((await call('GET', `/contacts?segment_id=${segmentId}`)).body);

  test('through the unmodified Resend SDK: create, get, list, rename, remove', async () => {
    const created = await resend.segments.create({ name: 'Registered users' });
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;
    assert.deepEqual(created.data, { object: 'segment', id, name: 'Registered users' });

    const read = await resend.segments.get(id);
    assert.deepEqual(
      { ...read.data, created_at: undefined },
      { object: 'segment', id, name: 'Registered users', created_at: undefined, contacts_count: 0 },
    );
    assert.equal(new Date(read.data!.created_at).toISOString(), read.data!.created_at);
    await call('GET', `/segments/${id}`);

    const second = await segment('Trial users');
    const listed = await resend.segments.list();
    assert.equal(listed.error, null, JSON.stringify(listed.error));
    assert.deepEqual(
      listed.data!.data.filter((item) => [id, second].includes(item.id)).map((item) => item.id),
      [id, second],
      'oldest first',
    );
    const page = (await call('GET', '/segments?limit=1')).body;
    assert.deepEqual([page.data.length, page.has_more], [1, true]);
    assert.deepEqual(idsOf((await call('GET', `/segments?limit=1&after=${id}`)).body), [second]);
    assert.deepEqual(idsOf((await call('GET', `/segments?limit=1&before=${second}`)).body), [id]);

    const renamed = await resend.segments.update(id, { name: 'Customers' });
    assert.deepEqual(renamed.data, { object: 'segment', id });
    assert.equal((await call('GET', `/segments/${id}`)).body.name, 'Customers');

    const removed = await resend.segments.remove(id);
    assert.deepEqual(removed.data, { object: 'segment', id, deleted: true });
    assertRefused(await call('GET', `/segments/${id}`), 404, 'not_found');
    assert.equal((await resend.segments.remove(second)).error, null);
  });

  test('contacts join segments on create (ids, or the SDK’s { id }), and through contacts.segments add, list and remove', async () => {
    const news = await segment('News');
    const beta = await segment('Beta');

    const created = await resend.contacts.create({ email: 'ada@example.com', segments: [{ id: news }] });
    assert.equal(created.error, null, JSON.stringify(created.error));
    const ada = created.data!.id;
    const grace = await contact({ email: 'grace@example.com', segments: [news, beta.toUpperCase()] });

    const listed = await resend.contacts.segments.list({ contactId: grace });
    assert.equal(listed.error, null, JSON.stringify(listed.error));
    assert.deepEqual(
      listed.data!.data.map((item) => [item.id, item.name]),
      [
        [news, 'News'],
        [beta, 'Beta'],
      ],
    );
    assert.deepEqual(Object.keys(listed.data!.data[0]!).sort(), ['created_at', 'id', 'name']);
    assert.deepEqual(idsOf((await call('GET', `/contacts/${grace}/segments?limit=1`)).body), [news]);
    assert.equal((await call('GET', `/contacts/${grace}/segments?limit=1`)).body.has_more, true);
    assert.deepEqual(idsOf((await call('GET', `/contacts/grace@example.com/segments?after=${news}`)).body), [beta]);

    const added = await resend.contacts.segments.add({ email: 'ada@example.com', segmentId: beta });
    assert.equal(added.error, null, JSON.stringify(added.error));
    assert.equal(added.data!.id, beta);
    // Adding again changes nothing.
    const again = await call('POST', `/contacts/${ada}/segments/${beta}`);
    assert.deepEqual(again.body, { object: 'contact_segment', id: beta, contact_id: ada, segment_id: beta });
    assert.deepEqual(idsOf((await call('GET', `/contacts/${ada}/segments`)).body), [news, beta]);
    assert.equal((await call('GET', `/segments/${beta}`)).body.contacts_count, 2);

    // The members of a segment: the SDK's contacts.list({ segmentId }), and GET /contacts?segment_id=.
    const members = await resend.contacts.list({ segmentId: beta });
    assert.equal(members.error, null, JSON.stringify(members.error));
    assert.deepEqual(idsOf(members.data!), [ada, grace]);
    assert.deepEqual(await memberIds(news), [ada, grace]);
    assert.deepEqual(idsOf((await call('GET', `/contacts?segment_id=${news}&limit=1&after=${ada}`)).body), [grace]);

    const removed = await resend.contacts.segments.remove({ contactId: ada, segmentId: news });
    assert.equal(removed.error, null, JSON.stringify(removed.error));
    assert.deepEqual([removed.data!.id, removed.data!.deleted], [news, true]);
    assert.deepEqual(await memberIds(news), [grace]);
    assertRefused(await call('DELETE', `/contacts/${ada}/segments/${news}`), 404, 'not_found');
    const raw = await call('DELETE', `/contacts/${grace}/segments/${news}`);
    assert.deepEqual(
      [raw.body.object, raw.body.contact_id, raw.body.segment_id, raw.body.deleted],
      ['contact_segment', grace, news, true],
    );
  });

  test('deleting a segment deletes its memberships, not its contacts', async () => {
    const doomed = await segment('Doomed');
    const kept = await segment('Kept');
    const id = await contact({ email: 'member@example.com', segments: [doomed, kept] });
    assert.equal((await call('DELETE', `/segments/${doomed}`)).status, 200);
    assert.equal((await call('GET', `/contacts/${id}`)).status, 200);
    assert.deepEqual(idsOf((await call('GET', `/contacts/${id}/segments`)).body), [kept]);
    const { rows } = await t.db.query('SELECT 1 FROM contact_segments WHERE segment_id = $1', [doomed]);
    assert.equal(rows.length, 0);
    assertRefused(await call('GET', `/contacts?segment_id=${doomed}`), 404, 'not_found');
  });

  test('audiences are segments under their older name: same ids, same rows', async () => {
    // The installed SDK's audiences are its segments (resend.audiences === resend.segments).
    const viaSdk = await resend.audiences.create({ name: 'Via SDK' });
    assert.equal(viaSdk.error, null, JSON.stringify(viaSdk.error));
    assert.equal((await call('GET', `/audiences/${viaSdk.data!.id}`)).body.name, 'Via SDK');

    // Older SDKs call /audiences itself.
    const created = await call('POST', '/audiences', { name: 'Legacy' });
    assert.equal(created.status, 201);
    assert.deepEqual(created.body, { object: 'audience', id: created.body.id, name: 'Legacy' });
    const id = created.body.id as string;
    const read = await call('GET', `/audiences/${id}`);
    assert.deepEqual([read.body.object, read.body.name], ['audience', 'Legacy']);
    assert.equal((await call('GET', `/segments/${id}`)).body.name, 'Legacy');
    const listed = await call('GET', '/audiences');
    assert.ok(idsOf(listed.body).includes(id));
    assert.ok(idsOf((await call('GET', '/segments')).body).includes(id));

    // audience_id on POST /contacts, and an older SDK's POST /audiences/:id/contacts, add to that segment.
    const ada = await contact({ email: 'legacy-ada@example.com', audience_id: id });
    const older = await call('POST', `/audiences/${id}/contacts`, {
      email: 'legacy-grace@example.com',
      first_name: 'Grace',
    });
    assert.equal(older.status, 201, JSON.stringify(older.body));
    assert.deepEqual(await memberIds(id), [ada, older.body.id]);
    assert.deepEqual(idsOf((await call('GET', `/audiences/${id}/contacts`)).body), [ada, older.body.id]);
    assert.deepEqual(idsOf((await call('GET', `/segments/${id}/contacts`)).body), [ada, older.body.id]);

    const removed = await call('DELETE', `/audiences/${id}`);
    assert.deepEqual(removed.body, { object: 'audience', id, deleted: true });
    assertRefused(await call('GET', `/segments/${id}`), 404, 'not_found');
    assertRefused(await call('GET', `/audiences/${id}`), 404, 'not_found');
    assert.equal((await call('GET', `/contacts/${ada}`)).status, 200);
  });

  test('contact events carry the contact’s segment_ids, and audience_id the first of them', async () => {
    const first = await segment('First');
    const second = await segment('Second');
    const id = await contact({ email: 'evented@example.com', segments: [second, first] });
    const bySegmentOrder = [first, second].sort();
    const createdEvent = (await queuedEvents(t.db, org.id, 'contact.created', { id }))[0]!;
    assert.deepEqual(createdEvent.data.segment_ids, bySegmentOrder);
    assert.equal(createdEvent.data.audience_id, bySegmentOrder[0]);
    assert.deepEqual(webhookProblems(createdEvent), []);

    await call('DELETE', `/contacts/${id}/segments/${bySegmentOrder[0]}`);
    await call('PATCH', `/contacts/${id}`, { first_name: 'Eve' });
    const updatedEvent = (await queuedEvents(t.db, org.id, 'contact.updated', { id }))[0]!;
    assert.deepEqual(updatedEvent.data.segment_ids, [bySegmentOrder[1]]);
    assert.equal(updatedEvent.data.audience_id, bySegmentOrder[1]);
    assert.deepEqual(webhookProblems(updatedEvent), []);

    await call('DELETE', `/contacts/${id}`);
    const deletedEvent = (await queuedEvents(t.db, org.id, 'contact.deleted', { id }))[0]!;
    assert.deepEqual(deletedEvent.data.segment_ids, [bySegmentOrder[1]]);
    assert.deepEqual(webhookProblems(deletedEvent), []);

    const loner = await contact({ email: 'loner@example.com' });
    const lonerEvent = (await queuedEvents(t.db, org.id, 'contact.created', { id: loner }))[0]!;
    assert.deepEqual(lonerEvent.data.segment_ids, []);
    assert.equal('audience_id' in lonerEvent.data, false);
  });

  test('refusals: filter, an unknown, malformed or other organization’s segment; nothing is written', async () => {
    assertRefused(
      await call('POST', '/segments', { name: 'Filtered', filter: { and: [] } }),
      400,
      'validation_error',
      'filter',
    );
    assertRefused(
      await call('POST', '/segments', { name: 'Inside', audience_id: randomUUID() }),
      400,
      'validation_error',
      'audience_id',
    );
    assertRefused(
      await call('POST', '/segments', { name: 'Inside', audience_id: 'not-an-id' }),
      400,
      'validation_error',
      'audience_id',
    );
    // Resend's deprecated audience_id naming one of the organization's segments is accepted, and nests nothing.
    const outer = await segment('Outer');
    const inner = await call('POST', '/segments', { name: 'Inner', audience_id: outer });
    assert.equal(inner.status, 201, JSON.stringify(inner.body));
    assert.deepEqual(requestProblems('POST', '/segments', { name: 'Inner', audience_id: outer }), []);
    assertRefused(await call('POST', '/segments', { name: '' }), 400, 'validation_error', 'name');
    assertRefused(await call('POST', '/segments', {}), 400, 'missing_required_field', 'name');
    assertRefused(await call('POST', '/audiences', { name: 'x'.repeat(201) }), 400, 'validation_error', 'name');

    const theirs = await segment('Theirs', other.fullKey);
    const mine = await segment('Mine');
    const refusedCreates: Array<[object, string]> = [
      [{ segments: [randomUUID()] }, 'segments'],
      [{ segments: [theirs] }, 'segments'],
      [{ segments: [mine, theirs] }, 'segments'],
      [{ segments: ['not-an-id'] }, 'segments'],
      [{ segments: [{ id: 'not-an-id' }] }, 'segments'],
      [{ audience_id: theirs }, 'audience_id'],
      [{ audience_id: 'nope' }, 'audience_id'],
    ];
    for (const [fields, field] of refusedCreates) {
      assertRefused(
        await call('POST', '/contacts', { email: 'nobody@example.com', ...fields }),
        400,
        'validation_error',
        field,
      );
    }
    const { rows } = await t.db.query(
      "SELECT 1 FROM contacts WHERE organization_id = $1 AND email = 'nobody@example.com'",
      [org.id],
    );
    assert.equal(rows.length, 0);
    assert.equal((await call('GET', `/segments/${mine}`)).body.contacts_count, 0);
    // The SDK's older create (audienceId) posts to /audiences/:id/contacts: another organization's is 404.
    const sdk = await resend.contacts.create({ email: 'nobody@example.com', audienceId: theirs });
    assert.deepEqual([sdk.error?.statusCode, sdk.error?.name], [404, 'not_found']);

    const id = await contact({ email: 'somebody@example.com' });
    for (const answer of [
      await call('POST', `/contacts/${id}/segments/${theirs}`),
      await call('POST', `/contacts/${id}/segments/${randomUUID()}`),
      await call('POST', `/contacts/${id}/segments/not-an-id`),
      await call('DELETE', `/contacts/${id}/segments/${theirs}`),
      await call('POST', `/contacts/${randomUUID()}/segments/${mine}`),
      await call('GET', `/contacts/${randomUUID()}/segments`),
      await call('GET', `/segments/${theirs}`),
      await call('PATCH', `/segments/${theirs}`, { name: 'mine now' }),
      await call('DELETE', `/segments/${theirs}`),
      await call('GET', `/audiences/${theirs}`),
      await call('DELETE', `/audiences/${theirs}`),
      await call('GET', `/contacts?segment_id=${theirs}`),
      await call('GET', `/segments/${theirs}/contacts`),
    ]) {
      assertRefused(answer, 404, 'not_found');
    }
    // Another organization's contact is not reachable through a segment of this one.
    const theirContact = await contact({ email: 'theirs@example.com' }, other.fullKey);
    assertRefused(await call('POST', `/contacts/${theirContact}/segments/${mine}`), 404, 'not_found');
    assert.equal((await call('GET', `/segments/${theirs}`, undefined, other.fullKey)).body.name, 'Theirs');
    assert.ok(!idsOf((await call('GET', '/segments')).body).includes(theirs));
  });

  test('a session may manage segments; a sending_access key may not', async () => {
    const id = await segment('From a session', org.session);
    assert.equal((await call('GET', `/segments/${id}`, undefined, org.session)).status, 200);
    assertRefused(await call('GET', `/segments/${id}`, undefined, org.sendingKey), 401, 'restricted_api_key');
  });
});
