// The delivery side of broadcasts: each copy personalised for its contact (placeholders, fallbacks, HTML
// escaping), carrying the RFC 8058 fields whose link is the one in its body, with or without a topic; a
// link without a topic unsubscribes the contact from every broadcast (contact.updated and
// contact.unsubscribed), and a copy whose contact unsubscribed after the audience was taken fails as
// `unsubscribed` without being sent; email.* events of a copy carry broadcast_id; GET /emails/metrics
// breaks down by broadcast and filters on it. Copies are made by the real fan-out and delivered by the
// real worker to a loopback SMTP sink.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { personalizeContent, type ContactFields } from '../src/broadcasts/personalize.ts';
import { sendBroadcast } from '../src/broadcasts/send-broadcast.ts';
import { fanOut } from '../src/broadcasts/fan-out.ts';
import { buildTestApp, createTestOrganization, bearer, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { message, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';

describe('personalizeContent', () => {
  const contact: ContactFields = {
    email: 'ann@example.com',
    first_name: 'Ann <b>& co',
    last_name: null,
    properties: { company: 'Acme "Ltd"', plan: 3, empty: '' },
  };
  const url = 'https://mail.example.com/unsubscribe/abc.def';

  test('every placeholder form, with and without a fallback, in text', () => {
    const content =
      '{{{contact.first_name|there}}} {{{FIRST_NAME}}} [{{{contact.last_name}}}] [{{{LAST_NAME|Smith}}}] ' +
      '{{{contact.email}}} {{{EMAIL}}} {{{contact.company}}} {{{ contact.plan }}} [{{{contact.empty|none}}}] ' +
      '{{{RESEND_UNSUBSCRIBE_URL}}}';
    assert.equal(
      personalizeContent(content, contact, url, false),
      `Ann <b>& co Ann <b>& co [] [Smith] ann@example.com ann@example.com Acme "Ltd" 3 [none] ${url}`,
    );
  });

  test('in HTML the values are escaped, the fallback is written as the author wrote it', () => {
    assert.equal(
      personalizeContent(
        '<p>Hi {{{FIRST_NAME|<i>there</i>}}}, {{{contact.company}}}</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">x</a>',
        contact,
        url,
        true,
      ),
      `<p>Hi Ann &lt;b&gt;&amp; co, Acme &quot;Ltd&quot;</p><a href="${url}">x</a>`,
    );
    assert.equal(
      personalizeContent('Hi {{{FIRST_NAME|<i>there</i>}}}', { ...contact, first_name: null }, url, true),
      'Hi <i>there</i>',
    );
  });

  test('an unknown placeholder is left as written; an unknown property takes its fallback if it has one', () => {
    const content =
      '{{{FRIST_NAME}}} {{{FRIST_NAME|x}}} {{{contact.nope}}} {{{contact.nope|friend}}} {{{contact.}}} {{ FIRST_NAME }}';
    assert.equal(
      personalizeContent(content, contact, url, false),
      '{{{FRIST_NAME}}} {{{FRIST_NAME|x}}} {{{contact.nope}}} friend {{{contact.}}} {{ FIRST_NAME }}',
    );
  });

  test('content without a placeholder is returned as it is', () => {
    const content = '<p>No placeholders {{ here }}</p>';
    assert.equal(personalizeContent(content, contact, url, true), content);
  });

  test('fast: 10,000 copies of a 10 KB body with placeholders in under a second (a broadcast runs it per copy)', () => {
    const body = `<p>Hello {{{FIRST_NAME|there}}},</p>${'<p>Lorem ipsum dolor sit amet.</p>'.repeat(300)}<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>`;
    const started = performance.now();
    for (let i = 0; i < 10_000; i++) personalizeContent(body, contact, url, true);
    const ms = performance.now() - started;
    assert.ok(ms < 1000, `10,000 copies took ${Math.round(ms)} ms`);
  });
});

let sink: SmtpSink;
let t: TestApp;
let org: TestOrganization;
let label = 0;

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_PUBLIC_URL: 'https://mail.example.test',
    // This file is about what each copy carries, not the automatic pause (broadcast-auto-pause.test.ts).
    MAILROOM_BROADCAST_PAUSE_AFTER: '0',
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  org = await createTestOrganization(t.db, t.config, 'bdel');
  await observeWebhookEvents(t.app, org);
});
after(async () => {
  await t.close();
  await sink.close();
});

interface ContactSeed {
  email: string;
  first_name?: string | null;
  properties?: Record<string, string | number>;
}

/** A segment of these contacts; returns its id. */
async function segmentOf(contacts: ContactSeed[]): Promise<string> {
  label += 1;
  const { rows } = await t.db.query<{ id: string }>(
    'INSERT INTO segments (organization_id, name) VALUES ($1, $2) RETURNING id',
    [org.id, `seg${label}`],
  );
  const segmentId = rows[0]!.id;
  for (const c of contacts) {
    await t.db.query(
      `WITH made AS (
         INSERT INTO contacts (organization_id, email, first_name, properties) VALUES ($1, $2, $3, $4::jsonb)
         RETURNING id)
       INSERT INTO contact_segments (contact_id, segment_id) SELECT id, $5 FROM made`,
      [org.id, c.email, c.first_name ?? null, JSON.stringify(c.properties ?? {}), segmentId],
    );
  }
  return segmentId;
}

/** A broadcast to the segment, sent, its copies made by the fan-out; returns its id. */
async function sentBroadcast(
  segmentId: string,
  fields: { html: string; text: string; topicId?: string; name?: string; subject?: string },
): Promise<string> {
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO broadcasts (organization_id, name, segment_id, topic_id, "from", subject, html, text)
     VALUES ($1, $2, $3, $4, $5, $8, $6, $7) RETURNING id`,
    [
      org.id,
      fields.name ?? 'News',
      segmentId,
      fields.topicId ?? null,
      `News <news@${org.domain}>`,
      fields.html,
      fields.text,
      fields.subject ?? 'News',
    ],
  );
  const id = rows[0]!.id;
  await sendBroadcast(t.db, org.id, id, undefined);
  await fanOut({ db: t.db, config: t.config, signer: t.app.signer }, id);
  return id;
}

async function copiesOf(broadcastId: string) {
  const { rows } = await t.db.query<{ id: string; to: string[]; html: string; text: string }>(
    'SELECT id, "to", html, text FROM emails WHERE broadcast_id = $1 ORDER BY "to"::text',
    [broadcastId],
  );
  return rows;
}

async function recipientOf(emailId: string) {
  const { rows } = await t.db.query<{ status: string; failure_reason: string | null }>(
    'SELECT status, failure_reason FROM email_recipients WHERE email_id = $1',
    [emailId],
  );
  return rows[0]!;
}

/** Delivers what is queued with a worker running until `done` holds. */
async function deliverUntil(done: () => Promise<boolean>): Promise<void> {
  const delivery: TestDelivery = await startTestDelivery(t);
  try {
    await waitFor(done, 15_000);
  } finally {
    await delivery.stop();
  }
}

const settled = (ids: string[]) => async () => {
  const { rows } = await t.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM email_recipients WHERE email_id = ANY($1::uuid[]) AND status <> 'pending'",
    [ids],
  );
  return rows[0]!.n === ids.length;
};

/** A header of the message as it was sent, unfolded. */
function rawHeader(raw: Buffer, name: string): string | undefined {
  const head = raw
    .toString('utf8')
    .split('\r\n\r\n')[0]!
    .replace(/\r\n[ \t]+/g, ' ');
  const line = head.split('\r\n').find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

const transactionTo = (address: string) => sink.transactions.find((tx) => tx.rcptTo.includes(address));

const HTML =
  '<html><body><p>Hi {{{FIRST_NAME|there}}} of {{{contact.company|nowhere}}}</p>' +
  '<a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></body></html>';
const TEXT = 'Hi {{{contact.first_name|there}}}. Leave: {{{RESEND_UNSUBSCRIBE_URL}}}';

let noTopic: { broadcastId: string; ann: string; bob: string };

test('each copy is personalised for its contact and carries List-Unsubscribe with the link of its body, without a topic too', async () => {
  const ann = 'ann@bdel-one.example';
  const bob = 'bob@bdel-one.example';
  const segmentId = await segmentOf([
    { email: ann, first_name: 'Ann <&>', properties: { company: 'Acme' } },
    { email: bob, first_name: null },
  ]);
  const subject = 'News for {{{FIRST_NAME|you}}}';
  const broadcastId = await sentBroadcast(segmentId, { html: HTML, text: TEXT, subject });
  const copies = await copiesOf(broadcastId);
  assert.equal(copies.length, 2);
  await deliverUntil(settled(copies.map((c) => c.id)));
  noTopic = { broadcastId, ann, bob };
  assert.equal(
    (await transactionTo(ann)!.parse()).subject,
    'News for Ann <&>',
    'the subject is personalised, unescaped',
  );
  assert.equal((await transactionTo(bob)!.parse()).subject, 'News for you');

  for (const [address, name, company] of [
    [ann, 'Ann &lt;&amp;&gt;', 'Acme'],
    [bob, 'there', 'nowhere'],
  ] as const) {
    const tx = transactionTo(address);
    assert.ok(tx, `a copy reached ${address}`);
    const mail = await tx.parse();
    const listUnsubscribe = rawHeader(tx.raw, 'List-Unsubscribe');
    const link = /^<(https:\/\/mail\.example\.test\/unsubscribe\/[^>]+)>$/.exec(listUnsubscribe ?? '')?.[1];
    assert.ok(link, `List-Unsubscribe: ${listUnsubscribe}`);
    assert.equal(rawHeader(tx.raw, 'List-Unsubscribe-Post'), 'List-Unsubscribe=One-Click');
    assert.ok(String(mail.html).includes(`<p>Hi ${name} of ${company}</p>`), String(mail.html));
    assert.ok(String(mail.html).includes(`href="${link}"`), 'the body links to the same URL as the header');
    assert.ok(String(mail.text).includes(`Leave: ${link}`), 'and so does the text');
  }
});

test('email.* events of a copy carry broadcast_id; those of other mail do not', async () => {
  const { broadcastId } = noTopic;
  const [copy] = await copiesOf(broadcastId);
  for (const type of ['email.accepted', 'email.sent', 'email.delivered']) {
    const events = await queuedEvents(t.db, org.id, type, { email_id: copy!.id });
    assert.equal(events.length, 1, type);
    assert.equal(events[0]!.data.broadcast_id, broadcastId, type);
  }
  const res = await send(t.app, org.fullKey, message(org, { to: ['plain@bdel-plain.example'], text: 'Plain' }));
  const plainId = res.json().id as string;
  await deliverUntil(settled([plainId]));
  const delivered = await queuedEvents(t.db, org.id, 'email.delivered', { email_id: plainId });
  assert.equal(delivered.length, 1);
  assert.equal('broadcast_id' in delivered[0]!.data, false);
});

test('a link without a topic unsubscribes the contact from every broadcast, says so, and emits contact.updated and contact.unsubscribed', async () => {
  const { broadcastId, ann } = noTopic;
  const copy = (await copiesOf(broadcastId)).find((c) => c.to[0] === ann)!;
  const link = /href="https:\/\/mail\.example\.test(\/unsubscribe\/[^"]+)"/.exec(copy.html)![1]!;

  const page = await t.app.inject({ method: 'GET', url: link });
  assert.equal(page.statusCode, 200);
  assert.match(page.body, /Stop receiving every broadcast of this sender/);
  const contactRow = async () =>
    (await t.db.query<{ unsubscribed: boolean }>('SELECT unsubscribed FROM contacts WHERE email = $1', [ann])).rows[0]!;
  assert.equal((await contactRow()).unsubscribed, false, 'a GET changes nothing');

  const done = await t.app.inject({
    method: 'POST',
    url: link,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'List-Unsubscribe=One-Click',
  });
  assert.equal(done.statusCode, 200);
  assert.match(done.body, /unsubscribed from all broadcasts of this sender/);
  assert.equal((await contactRow()).unsubscribed, true);

  const updated = await queuedEvents(t.db, org.id, 'contact.updated', { email: ann });
  assert.equal(updated.length, 1);
  assert.equal(updated[0]!.data.unsubscribed, true);
  const unsubscribed = await queuedEvents(t.db, org.id, 'contact.unsubscribed', { email: ann });
  assert.equal(unsubscribed.length, 1);
  assert.deepEqual([unsubscribed[0]!.data.topic_id, unsubscribed[0]!.data.email_id], [null, copy.id]);

  // A second click changes and emits nothing.
  await t.app.inject({ method: 'POST', url: link, payload: '' });
  assert.equal((await queuedEvents(t.db, org.id, 'contact.updated', { email: ann })).length, 1);
  assert.equal((await queuedEvents(t.db, org.id, 'contact.unsubscribed', { email: ann })).length, 1);
});

test('a copy whose contact unsubscribed after the audience was taken fails as unsubscribed and is not sent', async () => {
  const stays = 'stays@bdel-two.example';
  const leaves = 'leaves@bdel-two.example';
  const segmentId = await segmentOf([{ email: stays }, { email: leaves }]);
  const broadcastId = await sentBroadcast(segmentId, { html: HTML, text: TEXT });
  const copies = await copiesOf(broadcastId);
  assert.equal(copies.length, 2, 'both were in the audience when it was taken');
  // Between the snapshot and the send: the contact leaves every broadcast by the link of its copy.
  const copy = copies.find((c) => c.to[0] === leaves)!;
  const link = /href="https:\/\/mail\.example\.test(\/unsubscribe\/[^"]+)"/.exec(copy.html)![1]!;
  assert.equal((await t.app.inject({ method: 'POST', url: link, payload: '' })).statusCode, 200);

  await deliverUntil(settled(copies.map((c) => c.id)));
  assert.deepEqual(await recipientOf(copy.id), { status: 'failed', failure_reason: 'unsubscribed' });
  assert.equal(transactionTo(leaves), undefined, 'nothing was sent to the contact who left');
  const other = copies.find((c) => c.to[0] === stays)!;
  assert.deepEqual(await recipientOf(other.id), { status: 'delivered', failure_reason: null });
  const failed = await queuedEvents(t.db, org.id, 'email.failed', { email_id: copy.id });
  assert.equal(failed.length, 1);
  assert.deepEqual([failed[0]!.data.broadcast_id, failed[0]!.data.failed], [broadcastId, { reason: 'unsubscribed' }]);
});

test('a copy of a broadcast with a topic carries the link of its topic, which opts out of that topic alone', async () => {
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO topics (organization_id, name, default_subscription) VALUES ($1, 'Weekly', 'opt_in') RETURNING id`,
    [org.id],
  );
  const topicId = rows[0]!.id;
  const reader = 'reader@bdel-three.example';
  const segmentId = await segmentOf([{ email: reader, first_name: 'Rae' }]);
  const broadcastId = await sentBroadcast(segmentId, { html: HTML, text: TEXT, topicId });
  const [copy] = await copiesOf(broadcastId);
  await deliverUntil(settled([copy!.id]));
  const tx = transactionTo(reader)!;
  const mail = await tx.parse();
  const link = rawHeader(tx.raw, 'List-Unsubscribe')!.slice(1, -1);
  assert.ok(String(mail.html).includes(`href="${link}"`));

  const path = new URL(link).pathname;
  const page = await t.app.inject({ method: 'GET', url: path });
  assert.match(page.body, /Stop receiving <strong>Weekly<\/strong>/);
  await t.app.inject({ method: 'POST', url: path, payload: '' });
  const { rows: state } = await t.db.query<{ unsubscribed: boolean; subscription: string }>(
    `SELECT c.unsubscribed, ct.subscription FROM contacts c JOIN contact_topics ct ON ct.contact_id = c.id
      WHERE c.email = $1 AND ct.topic_id = $2`,
    [reader, topicId],
  );
  assert.deepEqual(state, [{ unsubscribed: false, subscription: 'opt_out' }]);
});

test('GET /emails/metrics breaks down by broadcast and filters on broadcast_id', async () => {
  const { broadcastId } = noTopic;
  const get = (query: string) =>
    t.app.inject({ method: 'GET', url: `/emails/metrics?${query}`, headers: bearer(org.fullKey) });

  const byBroadcast = await get('dimensions=broadcast&metrics=delivered,failed');
  assert.equal(byBroadcast.statusCode, 200, byBroadcast.body);
  const rows = byBroadcast.json().data as Array<Record<string, unknown>>;
  const row = rows.find((r) => r.broadcast_id === broadcastId);
  assert.deepEqual(row, { broadcast_id: broadcastId, broadcast_name: 'News', delivered: 2, failed: 0 });
  // Mail that is no copy (the plain message above) counts in the totals, in no row.
  const totals = byBroadcast.json().totals as { delivered: number };
  const inRows = rows.reduce((sum, r) => sum + (r.delivered as number), 0);
  assert.ok(totals.delivered > inRows, `${totals.delivered} delivered in all, ${inRows} in broadcast rows`);

  const filtered = await get(`broadcast_id=${broadcastId}&metrics=delivered,sent`);
  assert.equal(filtered.statusCode, 200, filtered.body);
  assert.deepEqual(filtered.json().totals, { delivered: 2, sent: 2 });

  const unknown = await get('broadcast_id=6a5b5c4e-1f0a-4b8c-9d3e-2f1a0b9c8d7e&metrics=delivered');
  assert.deepEqual(unknown.json().totals, { delivered: 0 });

  const bad = await get('broadcast_id=nope');
  assert.equal(bad.statusCode, 400);
  assert.deepEqual([bad.json().name, bad.json().field], ['validation_error', 'broadcast_id']);
});
