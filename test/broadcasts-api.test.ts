// Broadcasts through the unmodified Resend SDK pointed at a real Mailroom server on loopback: create (as a
// draft, with Resend's audience_id alias, sent at once or at a time), list (newest first, paged), get
// (Resend's fields, Mailroom's own and the stats), update, remove, send, cancel, and the read side:
// recipients by event type and clicked links, over copies that went through the real delivery worker
// (Resend's test addresses give delivered, bounced and complained outcomes), the real open and click
// recorders and a real suppression. Then Mailroom's own preview and test send, bad input (400s naming
// the field), changes refused once a broadcast is sending (invalid_state), and organizations kept apart.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { assertRefused, checkedCaller } from './helpers/checked-calls.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { waitFor } from './helpers/wait.ts';
import { recordClick, recordOpen } from '../src/tracking/engagement.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let base: string;
let resend: Resend;
let segmentId: string;
let topicId: string;

const call = checkedCaller(
  () => base,
  () => org.fullKey,
);
const from = () => `News <news@${org.domain}>`;

async function ok(method: string, path: string, body?: unknown, key?: string) {
  const answer = await call(method, path, body, key);
  assert.ok(answer.status < 300, `${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

async function createContact(email: string, extra: Record<string, unknown> = {}): Promise<string> {
  return (await ok('POST', '/contacts', { email, segments: [segmentId], ...extra })).id;
}

/** A draft through the SDK; its id. */
async function draft(extra: Record<string, unknown> = {}): Promise<string> {
  const created = await resend.broadcasts.create({
    segmentId,
    from: from(),
    subject: 'Hello',
    html: '<p>Hi</p>',
    ...extra,
  } as Parameters<typeof resend.broadcasts.create>[0]);
  assert.equal(created.error, null, JSON.stringify(created.error));
  return created.data!.id;
}

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'bcast');
  other = await createTestOrganization(t.db, t.config, 'bcastother');
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  resend = new Resend(org.fullKey, { baseUrl: base });
  segmentId = (await ok('POST', '/segments', { name: 'Newsletter' })).id;
  topicId = (await ok('POST', '/topics', { name: 'News', default_subscription: 'opt_in' })).id;
});
after(() => t.close());

describe('the model through the SDK', () => {
  test('create, get, list and update a draft; audience_id is segment_id', async () => {
    const created = await resend.broadcasts.create({
      name: 'November',
      audienceId: segmentId,
      from: from(),
      subject: 'Our news',
      replyTo: ['replies@example.com', 'Team <team@example.com>'],
      previewText: 'All of it',
      html: '<p>Hi {{{contact.first_name|there}}}</p>',
      text: 'Hi {{{contact.first_name|there}}}',
      topicId,
    });
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;

    const read = await resend.broadcasts.get(id);
    assert.equal(read.error, null, JSON.stringify(read.error));
    const broadcast = read.data!;
    assert.deepEqual(
      {
        object: broadcast.object,
        name: broadcast.name,
        segment_id: broadcast.segment_id,
        audience_id: broadcast.audience_id,
        from: broadcast.from,
        subject: broadcast.subject,
        reply_to: broadcast.reply_to,
        preview_text: broadcast.preview_text,
        status: broadcast.status,
        scheduled_at: broadcast.scheduled_at,
        sent_at: broadcast.sent_at,
        topic_id: broadcast.topic_id,
        html: broadcast.html,
        text: broadcast.text,
      },
      {
        object: 'broadcast',
        name: 'November',
        segment_id: segmentId,
        audience_id: segmentId,
        from: from(),
        subject: 'Our news',
        reply_to: ['replies@example.com', 'Team <team@example.com>'],
        preview_text: 'All of it',
        status: 'draft',
        scheduled_at: null,
        sent_at: null,
        topic_id: topicId,
        html: '<p>Hi {{{contact.first_name|there}}}</p>',
        text: 'Hi {{{contact.first_name|there}}}',
      },
    );
    // Resend's shapes (with the SDK's nullable fields), over plain HTTP too.
    await ok('GET', `/broadcasts/${id}`);
    await ok('GET', '/broadcasts');
    await ok('GET', `/broadcasts/${await draft()}`);
    const own = broadcast as unknown as Record<string, unknown>;
    assert.deepEqual([own.completed_at, own.pause_reason, own.failure_reason], [null, null, null]);
    assert.deepEqual(own.stats, {
      audience: 0,
      skipped_unsubscribed: 0,
      skipped_topic: 0,
      skipped_suppressed: 0,
      pending: 0,
      queued: 0,
      sent: 0,
      delivered: 0,
      opened: 0,
      clicked: 0,
      bounced: 0,
      complained: 0,
      unsubscribed: 0,
      failed: 0,
    });

    const updated = await resend.broadcasts.update(id, { subject: 'Our real news', topicId: null, name: 'Dec' });
    assert.equal(updated.error, null, JSON.stringify(updated.error));
    assert.equal(updated.data!.id, id);
    const again = (await resend.broadcasts.get(id)).data!;
    assert.deepEqual(
      [again.subject, again.topic_id, again.name, again.preview_text],
      ['Our real news', null, 'Dec', 'All of it'],
    );
    // One of html and text may go, not both.
    assert.equal((await call('PATCH', `/broadcasts/${id}`, { text: null })).status, 200);
    assertRefused(await call('PATCH', `/broadcasts/${id}`, { html: null }), 400, 'validation_error', 'html');
    assert.equal((await resend.broadcasts.get(id)).data!.text, null);
  });

  test('the list is newest first, paged by limit, after and before', async () => {
    const ids = [await draft({ name: 'a' }), await draft({ name: 'b' }), await draft({ name: 'c' })];
    const first = await resend.broadcasts.list({ limit: 2 });
    assert.equal(first.error, null, JSON.stringify(first.error));
    assert.deepEqual(
      first.data!.data.map((item) => item.id),
      [ids[2], ids[1]],
    );
    assert.equal(first.data!.has_more, true);
    const item = first.data!.data[0]!;
    assert.deepEqual([item.name, item.segment_id, item.audience_id, item.status], ['c', segmentId, segmentId, 'draft']);
    const next = await resend.broadcasts.list({ limit: 2, after: ids[1]! });
    assert.equal(next.data!.data[0]!.id, ids[0]);
    const back = await resend.broadcasts.list({ limit: 1, before: ids[1]! });
    assert.deepEqual(
      back.data!.data.map((entry) => entry.id),
      [ids[2]],
    );
  });

  test('duplicate makes a new draft with the same content, whatever the original status', async () => {
    const id = await draft({ name: 'Original', topicId, text: 'Plain' });
    await t.db.query(`UPDATE broadcasts SET status = 'sent', sent_at = now() WHERE id = $1`, [id]);
    const copied = await resend.broadcasts.duplicate(id);
    assert.equal(copied.error, null, JSON.stringify(copied.error));
    assert.equal(copied.data!.object, 'broadcast');
    assert.notEqual(copied.data!.id, id);
    const copy = (await resend.broadcasts.get(copied.data!.id)).data!;
    assert.deepEqual(
      [
        copy.status,
        copy.name,
        copy.segment_id,
        copy.topic_id,
        copy.from,
        copy.subject,
        copy.html,
        copy.text,
        copy.sent_at,
      ],
      ['draft', 'Original', segmentId, topicId, from(), 'Hello', '<p>Hi</p>', 'Plain', null],
    );
  });

  test('remove deletes a draft; a second remove is 404', async () => {
    const id = await draft();
    const removed = await resend.broadcasts.remove(id);
    assert.equal(removed.error, null, JSON.stringify(removed.error));
    assert.deepEqual(removed.data, { object: 'broadcast', id, deleted: true });
    const gone = await resend.broadcasts.remove(id);
    assert.equal(gone.error?.name, 'not_found');
    assert.equal((await resend.broadcasts.get(id)).error?.name, 'not_found');
  });
});

describe('the read side: stats, recipients and clicked links', () => {
  let delivery: TestDelivery;
  let broadcastId: string;
  const contacts: Record<string, string> = {};
  const copies: Record<string, string> = {};
  const url1 = 'https://example.com/one';
  const url2 = 'https://example.com/two';

  /** A copy of the broadcast for the contact, as the fan-out makes one: an ordinary email marked with it. */
  async function copyFor(key: string, email: string) {
    contacts[key] = await createContact(email);
    const sent = await ok('POST', '/emails', {
      from: from(),
      to: email,
      subject: 'Hello',
      html: `<a href="${url1}">1</a>`,
    });
    copies[key] = sent.id;
    await t.db.query('UPDATE emails SET broadcast_id = $1 WHERE id = $2', [broadcastId, sent.id]);
    await t.db.query(
      `INSERT INTO broadcast_recipients (broadcast_id, contact_id, email, status, email_id) VALUES ($1, $2, $3, 'queued', $4)`,
      [broadcastId, contacts[key], email, sent.id],
    );
  }
  async function left(key: string, email: string, status: 'pending' | 'skipped', reason: string | null) {
    contacts[key] = await createContact(email);
    await t.db.query(
      `INSERT INTO broadcast_recipients (broadcast_id, contact_id, email, status, skip_reason) VALUES ($1, $2, $3, $4, $5)`,
      [broadcastId, contacts[key], email, status, reason],
    );
  }

  before(async () => {
    broadcastId = await draft({ topicId });
    // Sent a minute ago: the snapshot's counts, as send-broadcast.ts stores them.
    await t.db.query(
      `UPDATE broadcasts SET status = 'sent', sent_at = now() - interval '1 minute', completed_at = now(),
              audience_count = 9, skipped_unsubscribed = 1, skipped_topic = 1, skipped_suppressed = 1 WHERE id = $1`,
      [broadcastId],
    );
    await ok('PATCH', '/organization', { open_tracking: true, click_tracking: true });
    await ok('POST', '/suppressions', { email: 'delivered+s@resend.dev' });
    await copyFor('a', 'delivered+a@resend.dev');
    await copyFor('b', 'delivered+b@resend.dev');
    await copyFor('bounced', 'bounced@resend.dev');
    await copyFor('complained', 'complained@resend.dev');
    await copyFor('suppressed', 'delivered+s@resend.dev');
    await left('pending', 'pending@example.com', 'pending', null);
    await left('unsub', 'unsub@example.com', 'skipped', 'unsubscribed');
    await left('topic', 'topic@example.com', 'skipped', 'topic');
    await left('supp', 'supp@example.com', 'skipped', 'suppressed');
    // The copies go through the delivery worker: Resend's test addresses get the outcomes they name.
    delivery = await startTestDelivery(t);
    await waitFor(async () => {
      const { rows } = await t.db.query(
        `SELECT 1 FROM email_recipients WHERE email_id = ANY ($1) AND status = 'pending'`,
        [Object.values(copies)],
      );
      const complained = await t.db.query(`SELECT 1 FROM email_events WHERE email_id = $1 AND type = 'complained'`, [
        copies.complained,
      ]);
      return rows.length === 0 && complained.rows.length === 1;
    }, 15_000);
    await recordOpen(t.db, { emailId: copies.a!, recipient: 'delivered+a@resend.dev' });
    await recordOpen(t.db, { emailId: copies.b!, recipient: 'delivered+b@resend.dev' });
    const click = { ipAddress: '192.0.2.1', userAgent: 'test' };
    await recordClick(t.db, { emailId: copies.a!, recipient: 'delivered+a@resend.dev', url: url1, ...click });
    await recordClick(t.db, { emailId: copies.a!, recipient: 'delivered+a@resend.dev', url: url2, ...click });
    await recordClick(t.db, { emailId: copies.b!, recipient: 'delivered+b@resend.dev', url: url1, ...click });
    // B leaves every broadcast after receiving its copy.
    await ok('PATCH', `/contacts/${contacts.b}`, { unsubscribed: true });
  });
  after(() => delivery.stop());

  test('the stats count the snapshot and what the copies became', async () => {
    const read = await resend.broadcasts.get(broadcastId);
    assert.equal(read.error, null, JSON.stringify(read.error));
    assert.deepEqual((read.data as unknown as { stats: unknown }).stats, {
      audience: 9,
      skipped_unsubscribed: 1,
      skipped_topic: 1,
      skipped_suppressed: 1,
      pending: 1,
      queued: 0,
      sent: 4,
      delivered: 3,
      opened: 2,
      clicked: 2,
      bounced: 1,
      complained: 1,
      unsubscribed: 1,
      failed: 1,
    });
  });

  test('recipients by event type', async () => {
    const listed = async (type: string, query = '') => {
      const body = await ok('GET', `/broadcasts/${broadcastId}/recipients?type=${type}${query}`);
      return body.data as Array<Record<string, unknown>>;
    };
    const emails = async (type: string) => (await listed(type)).map((row) => row.email).sort();
    assert.deepEqual(await emails('sent'), [
      'bounced@resend.dev',
      'complained@resend.dev',
      'delivered+a@resend.dev',
      'delivered+b@resend.dev',
    ]);
    assert.deepEqual(await emails('delivered'), [
      'complained@resend.dev',
      'delivered+a@resend.dev',
      'delivered+b@resend.dev',
    ]);
    assert.deepEqual(await emails('complained'), ['complained@resend.dev']);
    assert.deepEqual(await emails('unsubscribed'), [
      'delivered+b@resend.dev',
      'topic@example.com',
      'unsub@example.com',
    ]);
    assert.deepEqual(await emails('suppressed'), ['delivered+s@resend.dev', 'supp@example.com']);

    const bounced = await listed('bounced');
    assert.deepEqual(
      bounced.map((row) => [row.contact_id, row.email, row.bounce_type]),
      [[contacts.bounced, 'bounced@resend.dev', 'permanent']],
    );
    assert.deepEqual(await listed('bounced', '&bounce_type=transient'), []);

    const opened = await listed('opened');
    assert.deepEqual(opened.map((row) => [row.email, row.count]).sort(), [
      ['delivered+a@resend.dev', 1],
      ['delivered+b@resend.dev', 1],
    ]);
    const clicked = await listed('clicked', '&email=Delivered%2BA@resend.dev');
    assert.deepEqual(
      clicked.map((row) => [row.contact_id, row.count, row.clicked_links]),
      [
        [
          contacts.a,
          2,
          [
            { url: url1, clicks: 1 },
            { url: url2, clicks: 1 },
          ],
        ],
      ],
    );

    // A contact deleted since is still listed, with no contact id.
    await ok('DELETE', `/contacts/${contacts.topic}`);
    const unsubscribed = await listed('unsubscribed', '&email=topic@example.com');
    assert.deepEqual(
      unsubscribed.map((row) => [row.contact_id, row.email]),
      [[null, 'topic@example.com']],
    );

    // Through the SDK, a page at a time.
    const first = await resend.broadcasts.recipients(broadcastId, { type: 'sent', limit: 3 });
    assert.equal(first.error, null, JSON.stringify(first.error));
    assert.equal(first.data!.has_more, true);
    const rest = await resend.broadcasts.recipients(broadcastId, {
      type: 'sent',
      limit: 3,
      after: first.data!.data.at(-1)!.id,
    });
    assert.equal(rest.data!.has_more, false);
    assert.equal(rest.data!.data.length, 1);
    const back = await resend.broadcasts.recipients(broadcastId, {
      type: 'sent',
      limit: 3,
      before: rest.data!.data[0]!.id,
    });
    assert.deepEqual(back.data!.data, first.data!.data);
  });

  test('clicked links, most clicked first, paged', async () => {
    const links = await resend.broadcasts.clickedLinks(broadcastId);
    assert.equal(links.error, null, JSON.stringify(links.error));
    assert.deepEqual(
      links.data!.data.map(({ url, clicks, unique_clicks }) => ({ url, clicks, unique_clicks })),
      [
        { url: url1, clicks: 2, unique_clicks: 2 },
        { url: url2, clicks: 1, unique_clicks: 1 },
      ],
    );
    const first = await resend.broadcasts.clickedLinks(broadcastId, { limit: 1 });
    assert.deepEqual([first.data!.has_more, first.data!.data[0]!.url], [true, url1]);
    const second = await resend.broadcasts.clickedLinks(broadcastId, { limit: 1, after: first.data!.data[0]!.id });
    assert.deepEqual([second.data!.has_more, second.data!.data[0]!.url], [false, url2]);
    const back = await resend.broadcasts.clickedLinks(broadcastId, { limit: 1, before: second.data!.data[0]!.id });
    assert.equal(back.data!.data[0]!.url, url1);
  });

  test('bad list queries are 400s naming the field', async () => {
    const path = `/broadcasts/${broadcastId}`;
    assertRefused(await call('GET', `${path}/recipients`), 400, 'missing_required_field', 'type');
    const unknownType = await call('GET', `${path}/recipients?type=read`);
    assertRefused(unknownType, 400, 'validation_error', 'type');
    assert.match(
      unknownType.body.message,
      /one of sent, delivered, opened, clicked, bounced, complained, unsubscribed, suppressed/,
    );
    assertRefused(
      await call('GET', `${path}/recipients?type=bounced&bounce_type=hard`),
      400,
      'validation_error',
      'bounce_type',
    );
    assertRefused(
      await call('GET', `${path}/recipients?type=sent&bounce_type=permanent`),
      400,
      'validation_error',
      'bounce_type',
    );
    assertRefused(await call('GET', `${path}/recipients?type=sent&after=nope`), 400, 'validation_error', 'after');
    assertRefused(await call('GET', `${path}/recipients?type=sent&limit=101`), 400, 'validation_error', 'limit');
    assertRefused(await call('GET', `${path}/clicked-links?after=x&before=y`), 400, 'validation_error', 'before');
    assertRefused(await call('GET', `${path}/clicked-links?after=bm9wZQ`), 400, 'validation_error', 'after');
    // Crafted cursors: well-formed base64url and JSON, but not what a row's id carries. A count that is
    // no int (a fraction, past 2^31 - 1, negative, unsafe) or a URL with a NUL or a lone surrogate
    // (JSON escapes) never reaches the database.
    const crafted = (text: string) => Buffer.from(text, 'utf8').toString('base64url');
    for (const cursor of [
      '[1.5,"x"]',
      '[1e20,"x"]',
      '[2147483648,"x"]',
      '[-1,"x"]',
      '[9007199254740993,"x"]',
      '[1,"a\\u0000b"]',
      '[1,"\\ud800"]',
      '[1,"\\udc00x"]',
      '[1,"x",2]',
      '["1","x"]',
      '{"0":1,"1":"x"}',
    ]) {
      for (const field of ['after', 'before']) {
        const answer = await call('GET', `${path}/clicked-links?${field}=${crafted(cursor)}`);
        assertRefused(answer, 400, 'validation_error', field);
        assert.match(answer.body.message, new RegExp(`^${field}: not a cursor of this list`), cursor);
      }
    }
    // The largest count and any storable URL (a pair of surrogates is one character) are cursors.
    assert.equal(
      (await call('GET', `${path}/clicked-links?after=${crafted('[2147483647,"\\ud83d\\ude00"]')}`)).status,
      200,
    );
    assert.equal((await call('GET', `${path}/clicked-links?before=${crafted('[0,"https://x.test/é"]')}`)).status, 200);
    // The recipients' cursor is a contact id, and nothing else.
    const contactId = '6a5b5c4e-1f0a-4b8c-9d3e-2f1a0b9c8d7e';
    for (const cursor of [`${contactId}\u0000`, `${contactId}\n`, `\u0000`, `${contactId.slice(0, -1)}g`]) {
      for (const field of ['after', 'before']) {
        const answer = await call('GET', `${path}/recipients?type=sent&${field}=${crafted(cursor)}`);
        assertRefused(answer, 400, 'validation_error', field);
      }
    }
    assert.equal((await call('GET', `${path}/recipients?type=sent&after=${crafted(contactId)}`)).status, 200);
  });

  test('a broadcast that was sent cannot be changed or deleted (invalid_state)', async () => {
    const updated = await resend.broadcasts.update(broadcastId, { subject: 'Too late' });
    assert.equal(updated.error?.name, 'invalid_state');
    assertRefused(await call('DELETE', `/broadcasts/${broadcastId}`), 400, 'invalid_state');
    assert.equal((await resend.broadcasts.get(broadcastId)).data!.subject, 'Hello');
  });
});

describe('sending, preview and test', () => {
  test('create with send: true and a time schedules it; remove takes its fan-out job with it', async () => {
    const created = await resend.broadcasts.create({
      segmentId,
      from: from(),
      subject: 'Later',
      text: 'Soon',
      send: true,
      scheduledAt: 'in 1 hour',
    });
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;
    const read = (await resend.broadcasts.get(id)).data!;
    assert.equal(read.status as string, 'scheduled');
    const at = Date.parse(read.scheduled_at!);
    assert.ok(Math.abs(at - (Date.now() + 3600_000)) < 60_000, read.scheduled_at!);
    const jobs = () =>
      t.db.query(`SELECT 1 FROM jobs WHERE queue = 'broadcast-fan-out' AND payload ->> 'broadcast_id' = $1`, [id]);
    assert.equal((await jobs()).rows.length, 1);
    // Still editable while scheduled.
    assert.equal((await resend.broadcasts.update(id, { subject: 'Later still' })).error, null);
    const removed = await resend.broadcasts.remove(id);
    assert.equal(removed.error, null, JSON.stringify(removed.error));
    assert.equal((await jobs()).rows.length, 0);
  });

  test('send, then cancel through the SDK; a create whose schedule is refused creates nothing', async () => {
    const id = await draft();
    // Within MAILROOM_MAX_SCHEDULE_DAYS (30): ten days ahead, in whole seconds.
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 + 10 * 86_400_000).toISOString();
    const sent = await resend.broadcasts.send(id, { scheduledAt: at.replace('.000Z', 'Z') });
    assert.equal(sent.error, null, JSON.stringify(sent.error));
    assert.deepEqual(sent.data, { id });
    assert.equal((await resend.broadcasts.get(id)).data!.scheduled_at, at);
    const canceled = await resend.broadcasts.cancel(id);
    assert.equal(canceled.error, null, JSON.stringify(canceled.error));
    assert.deepEqual(canceled.data, { object: 'broadcast', id });
    // A canceled schedule is a draft again: nothing to pause or resume.
    assert.deepEqual(
      [(await resend.broadcasts.get(id)).data!.status, (await resend.broadcasts.get(id)).data!.scheduled_at],
      ['draft', null],
    );
    assertRefused(await call('POST', `/broadcasts/${id}/resume`), 400, 'invalid_state');
    assertRefused(await call('POST', `/broadcasts/${id}/pause`, { reason: 'why not' }), 400, 'invalid_state');

    // A send without a body (curl -X POST) sends now; canceled while being sent, it stops for good.
    const now = await call('POST', `/broadcasts/${id}/send`);
    assert.deepEqual([now.status, now.body], [200, { id }]);
    assert.equal((await resend.broadcasts.get(id)).data!.status, 'queued');
    assert.equal((await resend.broadcasts.cancel(id)).error, null);
    assert.equal((await resend.broadcasts.get(id)).data!.status as string, 'canceled');
    assertRefused(await call('POST', `/broadcasts/${id}/send`, {}), 400, 'invalid_state');

    const before = (await t.db.query('SELECT count(*)::int AS n FROM broadcasts')).rows[0];
    assertRefused(
      await call('POST', '/broadcasts', {
        segment_id: segmentId,
        from: from(),
        subject: 'x',
        html: 'x',
        send: true,
        scheduled_at: 'yesterday at 9am',
      }),
      400,
      'validation_error',
      'scheduled_at',
    );
    assert.deepEqual((await t.db.query('SELECT count(*)::int AS n FROM broadcasts')).rows[0], before);
  });

  test('preview: the content as a contact, or an address, would receive it', async () => {
    await ok('POST', '/contact-properties', { key: 'plan', type: 'string', fallback_value: 'Free' });
    const ada = await createContact('ada@example.com', { first_name: 'Ada', properties: { plan: 'Pro' } });
    const id = await draft({
      subject: 'For {{{contact.first_name|you}}}',
      previewText: 'Read this, {{{contact.first_name|friend}}}',
      html: '<p>Hi {{{contact.first_name|there}}}, on {{{contact.plan}}}</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Leave</a>',
      text: 'Hi {{{FIRST_NAME|there}}}',
    });
    const asAda = await ok('POST', `/broadcasts/${id}/preview`, { contact_id: ada });
    assert.equal(asAda.subject, 'For Ada');
    // The preview text is personalized too.
    assert.equal(asAda.preview_text, 'Read this, Ada');
    assert.match(asAda.html, /<p>Hi Ada, on Pro<\/p>/);
    assert.match(asAda.html, /href="http[^"]*\/unsubscribe\/example"/);
    assert.equal(asAda.text, 'Hi Ada');
    const byAddress = await ok('POST', `/broadcasts/${id}/preview`, { email: 'ADA@example.com' });
    assert.equal(byAddress.subject, 'For Ada');
    const stranger = await ok('POST', `/broadcasts/${id}/preview`, { email: 'nobody@example.com' });
    // No body at all: nobody in particular, every placeholder at its fallback.
    const nobody = await call('POST', `/broadcasts/${id}/preview`);
    assert.equal(nobody.status, 200, JSON.stringify(nobody.body));
    assert.equal(nobody.body.subject, 'For you');
    assert.deepEqual([stranger.subject, stranger.text], ['For you', 'Hi there']);
    assert.equal(stranger.preview_text, 'Read this, friend');
    assert.match(stranger.html, /<p>Hi there, on Free<\/p>/);
    assertRefused(
      await call('POST', `/broadcasts/${id}/preview`, { contact_id: '6a5b5c4e-1f0a-4b8c-9d3e-2f1a0b9c8d7e' }),
      400,
      'validation_error',
      'contact_id',
    );
    assertRefused(
      await call('POST', `/broadcasts/${id}/preview`, { email: 'not an address' }),
      400,
      'validation_error',
      'email',
    );
    // A value with line breaks: the subject shows it on one line, each run of breaks one space, as the
    // copies' subject header has it; the body keeps them.
    const multiline = await createContact('lines@example.com', { properties: { plan: 'Pro\r\n\nPlus\nYearly' } });
    const onPlan = await draft({ subject: 'Your {{{contact.plan}}} plan', text: 'Plan: {{{contact.plan}}}' });
    const asMultiline = await ok('POST', `/broadcasts/${onPlan}/preview`, { contact_id: multiline });
    assert.equal(asMultiline.subject, 'Your Pro Plus Yearly plan');
    assert.equal(asMultiline.text, 'Plan: Pro\r\n\nPlus\nYearly');
  });

  test('test: one ordinary email, "[Test] " and personalized for the contact at that address', async () => {
    await createContact('grace@example.com', { first_name: 'Grace' });
    const id = await draft({
      subject: 'Hello {{{contact.first_name|you}}}',
      html: '<p>Dear {{{contact.first_name}}}</p>',
    });
    const sent = await ok('POST', `/broadcasts/${id}/test`, { to: 'grace@example.com' });
    assert.equal(sent.object, 'email');
    const email = await resend.emails.get(sent.id);
    assert.equal(email.error, null, JSON.stringify(email.error));
    assert.deepEqual(
      [email.data!.subject, email.data!.html, email.data!.to],
      ['[Test] Hello Grace', '<p>Dear Grace</p>', ['grace@example.com']],
    );
    // It is not a copy of the broadcast: the broadcast's figures do not count it.
    const { rows } = await t.db.query('SELECT broadcast_id FROM emails WHERE id = $1', [sent.id]);
    assert.equal(rows[0]!.broadcast_id, null);
    assertRefused(await call('POST', `/broadcasts/${id}/test`, { to: 'nope' }), 400, 'validation_error', 'to');
    assertRefused(await call('POST', `/broadcasts/${id}/test`, {}), 400, 'missing_required_field', 'to');
  });
});

describe('bad input and other organizations', () => {
  const valid = () => ({ segment_id: segmentId, from: from(), subject: 'S', html: '<p>x</p>' });
  const refusedCreate = async (body: Record<string, unknown>, name: string, field: string) =>
    assertRefused(await call('POST', '/broadcasts', body), 400, name, field);

  test('create: missing and invalid fields are 400s naming the field', async () => {
    const { from: _from, ...noFrom } = valid();
    await refusedCreate(noFrom, 'missing_required_field', 'from');
    const { subject: _subject, ...noSubject } = valid();
    await refusedCreate(noSubject, 'missing_required_field', 'subject');
    const { segment_id: _segment, ...noSegment } = valid();
    await refusedCreate(noSegment, 'missing_required_field', 'segment_id');
    const { html: _html, ...noContent } = valid();
    await refusedCreate(noContent, 'missing_required_field', 'html');
    await refusedCreate({ ...valid(), segment_id: 'nope' }, 'validation_error', 'segment_id');
    await refusedCreate(
      { ...valid(), segment_id: '6a5b5c4e-1f0a-4b8c-9d3e-2f1a0b9c8d7e' },
      'validation_error',
      'segment_id',
    );
    await refusedCreate(
      { ...valid(), audience_id: '6a5b5c4e-1f0a-4b8c-9d3e-2f1a0b9c8d7e' },
      'validation_error',
      'audience_id',
    );
    await refusedCreate(
      { ...valid(), topic_id: '6a5b5c4e-1f0a-4b8c-9d3e-2f1a0b9c8d7e' },
      'validation_error',
      'topic_id',
    );
    await refusedCreate({ ...valid(), from: 'news@elsewhere.example' }, 'invalid_from_address', 'from');
    await refusedCreate({ ...valid(), from: 'not an address' }, 'validation_error', 'from');
    await refusedCreate({ ...valid(), reply_to: ['ok@example.com', 'bad'] }, 'validation_error', 'reply_to.1');
    await refusedCreate({ ...valid(), subject: 'a\nb' }, 'validation_error', 'subject');
    await refusedCreate({ ...valid(), scheduled_at: 'in 1 hour' }, 'validation_error', 'scheduled_at');
    await refusedCreate({ ...valid(), send: true, scheduled_at: 'next blue moon' }, 'validation_error', 'scheduled_at');
    await refusedCreate({ ...valid(), send: 'yes' }, 'validation_error', 'send');
    await refusedCreate({ ...valid(), colour: 'red' }, 'validation_error', 'colour');
    // Another organization's segment is no segment of this one.
    const theirs = (await ok('POST', '/segments', { name: 'Theirs' }, other.fullKey)).id;
    await refusedCreate({ ...valid(), segment_id: theirs }, 'validation_error', 'segment_id');
  });

  test("another organization's broadcast is 404 on every route", async () => {
    const id = await draft();
    const theirs = new Resend(other.fullKey, { baseUrl: base });
    assert.equal((await theirs.broadcasts.get(id)).error?.name, 'not_found');
    assert.equal((await theirs.broadcasts.update(id, { subject: 'x' })).error?.name, 'not_found');
    assert.equal((await theirs.broadcasts.send(id)).error?.name, 'not_found');
    assert.equal((await theirs.broadcasts.cancel(id)).error?.name, 'not_found');
    assert.equal((await theirs.broadcasts.duplicate(id)).error?.name, 'not_found');
    assert.equal((await theirs.broadcasts.recipients(id, { type: 'sent' })).error?.name, 'not_found');
    assert.equal((await theirs.broadcasts.clickedLinks(id)).error?.name, 'not_found');
    assert.equal((await theirs.broadcasts.remove(id)).error?.name, 'not_found');
    assert.deepEqual((await theirs.broadcasts.list()).data!.data, []);
    assert.equal((await resend.broadcasts.get(id)).data!.status, 'draft');
  });
});

describe('a broadcast sent end to end', () => {
  test('create with send: true; the fan-out and delivery workers make and deliver the copies; the figures follow', async () => {
    const audience = (await ok('POST', '/segments', { name: 'End to end' })).id;
    for (const email of ['delivered+e1@resend.dev', 'delivered+e2@resend.dev', 'bounced+e3@resend.dev']) {
      await ok('POST', '/contacts', { email, first_name: 'E', segments: [audience] });
    }
    await ok('POST', '/contacts', { email: 'delivered+e4@resend.dev', unsubscribed: true, segments: [audience] });
    const created = await resend.broadcasts.create({
      segmentId: audience,
      from: from(),
      subject: 'Hi {{{FIRST_NAME}}}',
      text: 'Hello',
      send: true,
    });
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;
    const delivery = await startTestDelivery(t);
    try {
      await waitFor(async () => {
        const { stats, status } = (await ok('GET', `/broadcasts/${id}`)) as {
          status: string;
          stats: { delivered: number; bounced: number };
        };
        return status === 'sent' && stats.delivered + stats.bounced === 3;
      }, 20_000);
    } finally {
      await delivery.stop();
    }
    const read = await ok('GET', `/broadcasts/${id}`);
    assert.ok(read.sent_at && read.completed_at, JSON.stringify(read));
    assert.deepEqual(read.stats, {
      audience: 4,
      skipped_unsubscribed: 1,
      skipped_topic: 0,
      skipped_suppressed: 0,
      pending: 0,
      queued: 0,
      sent: 3,
      delivered: 2,
      opened: 0,
      clicked: 0,
      bounced: 1,
      complained: 0,
      unsubscribed: 0,
      failed: 0,
    });
    const sent = await resend.broadcasts.recipients(id, { type: 'sent' });
    assert.deepEqual(sent.data!.data.map((row) => row.email).sort(), [
      'bounced+e3@resend.dev',
      'delivered+e1@resend.dev',
      'delivered+e2@resend.dev',
    ]);
    const skipped = await resend.broadcasts.recipients(id, { type: 'unsubscribed' });
    assert.deepEqual(
      skipped.data!.data.map((row) => row.email),
      ['delivered+e4@resend.dev'],
    );
    // Once sent, it stays as it is.
    assert.equal((await resend.broadcasts.remove(id)).error?.name, 'invalid_state');
  });
});
