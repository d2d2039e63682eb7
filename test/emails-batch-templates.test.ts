// POST /emails/batch entries with template and topic_id, through the unmodified Resend SDK, delivered by
// the worker to a loopback SMTP relay: each entry is prepared by the rules of a single send, and each
// template and topic is read once per batch.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { bearer } from './helpers/app.ts';
import { startRelayTestBed, type RelayTestBed } from './helpers/delivery.ts';
import { counts, sendBatch, setLimits } from './helpers/emails.ts';
import type { ReceivedTransaction } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

let bed: RelayTestBed;
let sender: Resend;
let admin: Resend;
let from: string;
let templateId: string;
let topicId: string;

before(async () => {
  bed = await startRelayTestBed('batchtpl');
  const baseUrl = await bed.t.app.listen({ port: 0, host: '127.0.0.1' });
  sender = new Resend(bed.org.sendingKey, { baseUrl });
  admin = new Resend(bed.org.fullKey, { baseUrl });
  from = `Acme <hello@${bed.org.domain}>`;

  const template = await admin.templates
    .create({
      name: 'Order confirmed',
      alias: 'order-confirmed',
      from: `Store <store@${bed.org.domain}>`,
      replyTo: `help@${bed.org.domain}`,
      subject: 'Order {{{ORDER}}} confirmed',
      html: '<p>Thanks, {{NAME}}</p>',
      text: 'Thanks, {{NAME}}',
      variables: [
        { key: 'NAME', type: 'string', fallbackValue: 'friend' },
        { key: 'ORDER', type: 'number' },
      ],
    })
    .publish();
  assert.equal(template.error, null, JSON.stringify(template.error));
  templateId = template.data!.id;

  const topic = await admin.topics.create({ name: 'Product news', defaultSubscription: 'opt_in' });
  assert.equal(topic.error, null, JSON.stringify(topic.error));
  topicId = topic.data!.id;
  for (const email of ['reader@example.com', 'gone@example.com']) {
    assert.equal((await admin.contacts.create({ email })).error, null);
  }
  const optedOut = await admin.contacts.topics.update({
    email: 'gone@example.com',
    topics: [{ id: topicId, subscription: 'opt_out' }],
  });
  assert.equal(optedOut.error, null, JSON.stringify(optedOut.error));
});
after(() => bed.close());
beforeEach(async () => {
  bed.sink.reset();
  await setLimits(bed.t.db, bed.org.id, { rateLimit: 1000, monthlyQuota: 1_000_000 });
});

const api = (url: string) => bed.t.app.inject({ method: 'GET', url, headers: bearer(bed.org.fullKey) });

/** Each recipient's outcome on the message's timeline: delivered, or failed with its reason. */
async function outcomes(id: string): Promise<Record<string, string>> {
  const events: Array<{ type: string; recipient?: string; data?: { reason?: string } }> = (
    await api(`/emails/${id}/events`)
  ).json().data;
  return Object.fromEntries(
    events
      .filter((e) => e.recipient && ['delivered', 'failed'].includes(e.type))
      .map((e) => [e.recipient, e.type === 'failed' ? `failed:${e.data?.reason}` : e.type]),
  );
}

const transactionTo = (address: string): ReceivedTransaction => {
  const found = bed.sink.transactions.find((tx) => tx.rcptTo.includes(address));
  assert.ok(found, `a transaction to ${address}`);
  return found;
};

const headerBlock = (tx: ReceivedTransaction) =>
  tx.raw
    .toString()
    .split('\r\n\r\n')[0]!
    .replace(/\r\n(?=[ \t])/g, '');

test('template and topic entries mixed with plain ones: each rendered, gated and delivered as a single send', async () => {
  const { data, error } = await sender.batch.send([
    { from, to: 'first@example.com', subject: 'Plain one', text: 'plain one' },
    {
      to: 'ann@example.com',
      template: { id: 'order-confirmed', variables: { NAME: 'Ann & Co', ORDER: 42 } },
    },
    {
      from,
      to: ['reader@example.com', 'gone@example.com'],
      subject: 'March news',
      html: '<p>News</p>',
      topicId,
    },
    { from, to: 'last@example.com', subject: 'Plain two', text: 'plain two' },
  ]);
  assert.equal(error, null, JSON.stringify(error));
  const ids = data!.data.map((entry) => entry.id);
  assert.equal(ids.length, 4);

  await waitFor(async () => Object.keys(await outcomes(ids[2]!)).length === 2);
  await waitFor(() => bed.sink.transactions.length === 4);

  const templated = await transactionTo('ann@example.com').parse();
  assert.equal(templated.subject, 'Order 42 confirmed');
  assert.equal(String(templated.html).trim(), '<p>Thanks, Ann &amp; Co</p>');
  assert.equal(templated.text?.trim(), 'Thanks, Ann & Co');
  assert.deepEqual(templated.from?.value, [{ address: `store@${bed.org.domain}`, name: 'Store' }]);
  assert.deepEqual(templated.replyTo?.value, [{ address: `help@${bed.org.domain}`, name: '' }]);

  // The same entry sent on its own is stored the same way.
  const single = await sender.emails.send({
    to: 'ann@example.com',
    template: { id: 'order-confirmed', variables: { NAME: 'Ann & Co', ORDER: 42 } },
  });
  assert.equal(single.error, null, JSON.stringify(single.error));
  const stored = async (id: string) => {
    const { subject, html, text, from, reply_to, template } = (await api(`/emails/${id}`)).json();
    return { subject, html, text, from, reply_to, template };
  };
  assert.deepEqual(await stored(ids[1]!), await stored(single.data!.id));

  // The topic entry: the opted-out contact is not sent to, as in a single send; the other gets the
  // one-click unsubscribe headers.
  assert.deepEqual(await outcomes(ids[2]!), {
    'reader@example.com': 'delivered',
    'gone@example.com': 'failed:unsubscribed',
  });
  const topicHeaders = headerBlock(transactionTo('reader@example.com'));
  assert.match(topicHeaders, /^Subject: March news$/m);
  assert.match(topicHeaders, /^List-Unsubscribe: <https?:\/\/[^>]+\/unsubscribe\/[^>]+>$/m);
  assert.match(topicHeaders, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
  assert.equal((await api(`/emails/${ids[2]}`)).json().topic_id, topicId);

  for (const [address, subject, text] of [
    ['first@example.com', 'Plain one', 'plain one'],
    ['last@example.com', 'Plain two', 'plain two'],
  ] as const) {
    const tx = transactionTo(address);
    assert.doesNotMatch(headerBlock(tx), /^List-Unsubscribe/im);
    const parsed = await tx.parse();
    assert.equal(parsed.subject, subject);
    assert.equal(parsed.text?.trim(), text);
  }
});

test('an unknown template in entry 2 refuses the whole strict batch, naming the entry; nothing is stored', async () => {
  const entries = [
    { from, to: 'a@example.com', subject: 'one', text: 'one' },
    { to: 'b@example.com', template: { id: 'order-confirmed', variables: { ORDER: 1 } } },
    { from, to: 'c@example.com', template: { id: 'no-such-template' } },
    { from, to: 'reader@example.com', subject: 'news', text: 'news', topicId },
  ];
  const before = await counts(bed.t.db, bed.org.id);
  const { data, error } = await sender.batch.send(entries);
  assert.equal(data, null);
  assert.equal(error?.name, 'template_not_found');
  assert.equal(error?.message, 'Entry 2: Template no-such-template not found');

  const raw = await sendBatch(
    bed.t.app,
    bed.org.sendingKey,
    [entries[0], entries[1], { from, to: 'c@example.com', template: { id: 'no-such-template' } }],
    { 'x-batch-validation': 'strict' },
  );
  assert.equal(raw.statusCode, 400);
  assert.deepEqual(raw.json(), {
    statusCode: 400,
    name: 'template_not_found',
    message: 'Entry 2: Template no-such-template not found',
    field: '2.template.id',
  });
  assert.deepEqual(await counts(bed.t.db, bed.org.id), before);

  // Permissive: only that entry is refused, in its place, with the single send's error.
  const permissive = await sender.batch.send(entries, { batchValidation: 'permissive' });
  assert.equal(permissive.error, null, JSON.stringify(permissive.error));
  assert.deepEqual(
    permissive.data!.data.map((entry) => (entry.id ? 'email' : 'error')),
    ['email', 'email', 'error', 'email'],
  );
  assert.deepEqual(permissive.data!.errors, [
    {
      index: 2,
      statusCode: 400,
      name: 'template_not_found',
      message: 'Template no-such-template not found',
      field: 'template.id',
    },
  ]);
});

test('a template never published is refused in a batch entry as in a single send', async () => {
  const draft = await admin.templates.create({ name: 'Draft', subject: 'Draft', html: '<p>draft</p>' });
  assert.equal(draft.error, null, JSON.stringify(draft.error));
  const entry = { from, to: 'ann@example.com', template: { id: draft.data!.id } };

  const single = await sender.emails.send(entry);
  assert.equal(single.error?.name, 'template_not_found');
  assert.match(single.error!.message, /has never been published: publish it first/);

  const batch = await sender.batch.send([{ from, to: 'x@example.com', subject: 's', text: 't' }, entry]);
  assert.equal(batch.data, null);
  assert.equal(batch.error?.name, single.error.name);
  assert.equal(batch.error?.message, `Entry 1: ${single.error.message}`);
});

test('the entries of a batch read each template and topic once, however many use them', async () => {
  // Every statement the app runs on its database during the request, in order.
  const db = bed.t.db;
  const query = db.query;
  const statements: string[] = [];
  db.query = ((text: string, params?: readonly unknown[]) => {
    statements.push(text);
    return query.call(db, text, params);
  }) as typeof db.query;
  const scheduledAt = new Date(Date.now() + 3600_000).toISOString();
  try {
    const entries = Array.from({ length: 100 }, (_, i) =>
      i % 2 === 0
        ? { to: `t${i}@example.com`, template: { id: templateId, variables: { ORDER: i } }, scheduledAt }
        : { from, to: `n${i}@example.com`, subject: 'news', text: 'news', topicId, scheduledAt },
    );
    const { data, error } = await sender.batch.send(entries);
    assert.equal(error, null, JSON.stringify(error));
    assert.equal(data!.data.length, 100);
  } finally {
    db.query = query;
  }
  const count = (fragment: string) => statements.filter((sql) => sql.includes(fragment)).length;
  assert.equal(count('LEFT JOIN template_versions v ON v.id = t.published_version_id'), 1);
  assert.equal(count('SELECT 1 FROM topics WHERE id = $1'), 1);

  const { rows } = await db.query<{ subject: string }>(
    "SELECT subject FROM emails WHERE organization_id = $1 AND template->>'id' = $2 ORDER BY subject",
    [bed.org.id, templateId],
  );
  assert.equal(rows.length, 50);
  assert.ok(rows.every((row) => /^Order \d+ confirmed$/.test(row.subject)));
});
