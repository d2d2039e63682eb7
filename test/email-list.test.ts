// GET /emails (newest first, cursor pages, filters) and a sent message's attachments with their
// signed download links.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send, sendBatch } from './helpers/emails.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;

before(async () => {
  t = await buildTestApp({ MAILROOM_PUBLIC_URL: 'https://mail.example.test' });
  org = await createTestOrganization(t.db, t.config, 'list');
  other = await createTestOrganization(t.db, t.config, 'list-other');
});
after(() => t.close());

const list = (query = '', token = org.fullKey) =>
  t.app.inject({ method: 'GET', url: `/emails${query}`, headers: bearer(token) });

/** Sends `n` messages one request after another (so each has its own created_at), oldest first. */
async function sendMany(
  owner: TestOrganization,
  n: number,
  extra: (i: number) => Record<string, unknown> = () => ({}),
) {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await send(t.app, owner.fullKey, message(owner, { subject: `m${i}`, ...extra(i) }));
    assert.equal(res.statusCode, 200, res.body);
    ids.push(res.json().id);
  }
  return ids;
}

describe('the list', () => {
  let ids: string[];
  before(async () => {
    ids = await sendMany(org, 25);
    await sendMany(other, 3);
  });

  test('newest first, 20 by default, with has_more; the item shape of GET /emails/:id without bodies', async () => {
    const res = await list();
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.object, 'list');
    assert.equal(body.has_more, true);
    assert.deepEqual(
      body.data.map((e: { id: string }) => e.id),
      ids.slice(-20).reverse(),
    );
    const first = body.data[0];
    assert.deepEqual(Object.keys(first).sort(), [
      'bcc',
      'cc',
      'created_at',
      'from',
      'id',
      'last_event',
      'message_id',
      'reply_to',
      'scheduled_at',
      'subject',
      'to',
      'topic_id',
    ]);
    const single = (
      await t.app.inject({ method: 'GET', url: `/emails/${first.id}`, headers: bearer(org.fullKey) })
    ).json();
    for (const key of Object.keys(first)) assert.deepEqual(first[key], single[key], key);
  });

  test('pages with after and before walk the whole list without gaps or repeats', async () => {
    const seen: string[] = [];
    let page = (await list('?limit=7')).json();
    seen.push(...page.data.map((e: { id: string }) => e.id));
    while (page.has_more) {
      page = (await list(`?limit=7&after=${page.data.at(-1).id}`)).json();
      seen.push(...page.data.map((e: { id: string }) => e.id));
    }
    assert.deepEqual(seen, [...ids].reverse(), 'every message of the organization, once, newest first');

    // Back from the oldest page: `before` gives the newer page just above it, in the same order.
    const back = (await list(`?limit=7&before=${ids[4]}`)).json();
    assert.deepEqual(
      back.data.map((e: { id: string }) => e.id),
      ids.slice(5, 12).reverse(),
    );
    assert.equal(back.has_more, true);
    const top = (await list(`?limit=7&before=${ids[20]}`)).json();
    assert.deepEqual(
      top.data.map((e: { id: string }) => e.id),
      ids.slice(21).reverse(),
    );
    assert.equal(top.has_more, false);
  });

  test("another organization's messages are never listed, nor usable as a cursor", async () => {
    const theirs = (await list('?limit=100', other.fullKey)).json();
    assert.equal(theirs.data.length, 3);
    const res = await list(`?after=${theirs.data[0].id}`);
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().field, 'after');
  });

  test('bad queries get the envelope', async () => {
    for (const [query, field] of [
      [`?after=${ids[3]}&before=${ids[5]}`, 'before'],
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=ten', 'limit'],
      ['?after=not-an-id', 'after'],
      ['?before=7d0c3a52-2a84-4d83-a3c4-2f8e0c36f1a1', 'before'],
      ['?last_event=exploded', 'last_event'],
      ['?created_after=yesterday', 'created_after'],
      ['?status=sent', 'status'],
    ] as const) {
      const res = await list(query);
      assert.equal(res.statusCode, 400, `${query}: ${res.body}`);
      assert.equal(res.json().name, 'validation_error', query);
      assert.equal(res.json().field, field, query);
    }
  });
});

describe('filters', () => {
  let f: TestOrganization;
  const listOf = async (query: string) => {
    const res = await list(query, f.fullKey);
    assert.equal(res.statusCode, 200, res.body);
    return res
      .json()
      .data.map((e: { subject: string }) => e.subject)
      .sort();
  };

  before(async () => {
    f = await createTestOrganization(t.db, t.config, 'filters');
    const res = await sendBatch(t.app, f.fullKey, [
      message(f, { subject: 'a', to: 'Ann <Ann@Example.com>', tags: [{ name: 'kind', value: 'receipt' }] }),
      message(f, { subject: 'b', to: 'bob@example.com', cc: 'ann@example.com', tags: { kind: 'reset' } }),
      message(f, { subject: 'c', to: 'carl@example.com', from: `Billing <billing@${f.domain}>` }),
    ]);
    assert.equal(res.statusCode, 200, res.body);
    const later = await send(
      t.app,
      f.fullKey,
      message(f, { subject: 'd', scheduled_at: new Date(Date.now() + 3600_000).toISOString() }),
    );
    assert.equal(later.statusCode, 200);
  });

  test('recipient: any of to, cc and bcc, compared as addresses are', async () => {
    assert.deepEqual(await listOf('?recipient=ann@example.com'), ['a', 'b']);
    assert.deepEqual(await listOf('?recipient=ANN@EXAMPLE.COM'), ['a', 'b']);
    assert.deepEqual(await listOf('?recipient=nobody@example.com'), []);
  });

  test("from: the sender's address, whatever its display name", async () => {
    assert.deepEqual(await listOf(`?from=billing@${f.domain}`), ['c']);
    assert.deepEqual(await listOf(`?from=hello@${f.domain.toUpperCase()}`), ['a', 'b', 'd']);
  });

  test('tag: a name, or name:value, in either form tags are sent in', async () => {
    assert.deepEqual(await listOf('?tag=kind'), ['a', 'b']);
    assert.deepEqual(await listOf('?tag=kind:reset'), ['b']);
    assert.deepEqual(await listOf('?tag=kind:receipt'), ['a']);
    assert.deepEqual(await listOf('?tag=other'), []);
  });

  test('last_event: queued and scheduled before sending, then the newest timeline kind', async () => {
    assert.deepEqual(await listOf('?last_event=scheduled'), ['d']);
    assert.deepEqual(await listOf('?last_event=queued'), ['a', 'b', 'c']);
    const d = (await list('?last_event=scheduled', f.fullKey)).json().data[0];
    await t.app.inject({ method: 'POST', url: `/emails/${d.id}/cancel`, headers: bearer(f.fullKey) });
    assert.deepEqual(await listOf('?last_event=canceled'), ['d']);
    assert.deepEqual(await listOf('?last_event=delivered'), []);
  });

  test('created_after (inclusive) and created_before (exclusive)', async () => {
    const all = (await list('', f.fullKey)).json().data as Array<{ subject: string; created_at: string }>;
    const d = all.find((e) => e.subject === 'd')!;
    assert.deepEqual(await listOf(`?created_after=${encodeURIComponent(d.created_at)}`), ['d']);
    assert.deepEqual(await listOf(`?created_before=${encodeURIComponent(d.created_at)}`), ['a', 'b', 'c']);
    assert.deepEqual(await listOf(`?created_after=2000-01-01T00:00:00Z&recipient=bob@example.com`), ['b']);
  });
});

describe('attachments', () => {
  let emailId: string;
  const content = Buffer.from('%PDF-1.4 pretend invoice');

  before(async () => {
    const res = await send(
      t.app,
      org.fullKey,
      message(org, {
        html: '<img src="cid:logo">',
        attachments: [
          { filename: 'invoice 7.pdf', content: content.toString('base64') },
          { filename: 'logo.png', content: Buffer.from('png').toString('base64'), content_id: 'logo' },
        ],
      }),
    );
    assert.equal(res.statusCode, 200, res.body);
    emailId = res.json().id;
  });

  const get = (url: string, token = org.fullKey) => t.app.inject({ method: 'GET', url, headers: bearer(token) });

  test('listed in order with their metadata and a signed download link', async () => {
    const res = await get(`/emails/${emailId}/attachments`);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.object, 'list');
    assert.equal(body.has_more, false);
    assert.equal(body.data.length, 2);
    const [pdf, logo] = body.data;
    assert.equal(pdf.filename, 'invoice 7.pdf');
    assert.equal(pdf.content_type, 'application/pdf');
    assert.equal(pdf.size, content.length);
    assert.equal(pdf.content_disposition, 'attachment');
    assert.equal(pdf.content_id, undefined);
    assert.equal(logo.content_disposition, 'inline');
    assert.equal(logo.content_id, 'logo');
    assert.match(pdf.download_url, /^https:\/\/mail\.example\.test\/attachments\/[\w-]+\.[\w-]+$/);
    const expires = Date.parse(pdf.expires_at) - Date.now();
    assert.ok(expires > 3500_000 && expires <= 3600_000, pdf.expires_at);

    const page = (await get(`/emails/${emailId}/attachments?limit=1`)).json();
    assert.equal(page.has_more, true);
    assert.equal(page.data[0].id, pdf.id);
    const next = (await get(`/emails/${emailId}/attachments?limit=1&after=${pdf.id}`)).json();
    assert.deepEqual([next.has_more, next.data[0].id], [false, logo.id]);
  });

  test('one attachment; its download_url serves the content without the API key', async () => {
    const listed = (await get(`/emails/${emailId}/attachments`)).json().data[0];
    const res = await get(`/emails/${emailId}/attachments/${listed.id}`);
    assert.equal(res.statusCode, 200, res.body);
    const attachment = res.json();
    assert.equal(attachment.object, 'attachment');
    assert.equal(attachment.id, listed.id);

    const download = await t.app.inject({ method: 'GET', url: new URL(attachment.download_url).pathname });
    assert.equal(download.statusCode, 200);
    assert.deepEqual(download.rawPayload, content);
    assert.equal(download.headers['content-type'], 'application/pdf');
    assert.equal(
      download.headers['content-disposition'],
      `attachment; filename="invoice 7.pdf"; filename*=UTF-8''invoice%207.pdf`,
    );
    assert.equal(download.headers['content-security-policy'], "sandbox; default-src 'none'");
  });

  test('a link altered, expired or of another kind is 404; so is another organization’s email', async () => {
    const listed = (await get(`/emails/${emailId}/attachments`)).json().data[0];
    const path = new URL(listed.download_url).pathname;
    const expired = t.app.signer.sign('attachment', { a: listed.id, o: org.id, x: Math.floor(Date.now() / 1000) - 1 });
    const otherKind = t.app.signer.sign('open', { a: listed.id, o: org.id, x: Math.floor(Date.now() / 1000) + 60 });
    const wrongOrg = t.app.signer.sign('attachment', {
      a: listed.id,
      o: other.id,
      x: Math.floor(Date.now() / 1000) + 60,
    });
    for (const url of [
      `${path.slice(0, -2)}xx`,
      `/attachments/${expired}`,
      `/attachments/${otherKind}`,
      `/attachments/${wrongOrg}`,
      '/attachments/nothing',
    ]) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json().name, 'not_found');
    }
    for (const url of [
      `/emails/${emailId}/attachments`,
      `/emails/${emailId}/attachments/${listed.id}`,
      `/emails/not-an-id/attachments`,
    ]) {
      const res = await get(url, other.fullKey);
      assert.equal(res.statusCode, 404, url);
    }
    const missing = await get(`/emails/${emailId}/attachments/7d0c3a52-2a84-4d83-a3c4-2f8e0c36f1a1`);
    assert.equal(missing.statusCode, 404);
    const bad = await get(`/emails/${emailId}/attachments?after=${listed.id}&before=${listed.id}`);
    assert.equal(bad.statusCode, 400);
    const unknown = await get(`/emails/${emailId}/attachments?after=7d0c3a52-2a84-4d83-a3c4-2f8e0c36f1a1`);
    assert.equal(unknown.statusCode, 400);
    assert.equal(unknown.json().field, 'after');
  });

  test('a message without attachments has an empty list', async () => {
    const plain = (await send(t.app, org.fullKey, message(org))).json().id;
    const res = await get(`/emails/${plain}/attachments`);
    assert.deepEqual(res.json(), { object: 'list', has_more: false, data: [] });
  });
});
