// POST /emails/batch entries with template or topic_id, through the unmodified Resend SDK, delivered by
// the worker to a loopback SMTP relay: such an entry is refused (400 unsupported_in_batch), whether or
// not its template or topic exists, while the same message sent through POST /emails is rendered or
// gated as usual. Strict (the SDK's default) refuses the whole request; permissive refuses the entry.
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

const sendThroughPostEmails =
  /^(template|topic_id) is not supported in a batch entry; send this message through POST \/emails$/;

/** Entries with template or topic_id, existing or not, between plain ones. */
const mixedEntries = () => [
  { from, to: 'first@example.com', subject: 'Plain one', text: 'plain one' },
  { to: 'ann@example.com', template: { id: 'order-confirmed', variables: { NAME: 'Ann', ORDER: 42 } } },
  { from, to: ['reader@example.com', 'gone@example.com'], subject: 'March news', html: '<p>News</p>', topicId },
  { from, to: 'last@example.com', subject: 'Plain two', text: 'plain two' },
  { from, to: 'c@example.com', template: { id: 'no-such-template' } },
  { from, to: 'd@example.com', subject: 'news', text: 'news', topicId: 'no-such-topic' },
];

test('permissive: each template or topic entry is refused in its place, existing or not; the plain ones are sent', async () => {
  const before = await counts(bed.t.db, bed.org.id);
  const { data, error } = await sender.batch.send(mixedEntries(), { batchValidation: 'permissive' });
  assert.equal(error, null, JSON.stringify(error));
  assert.deepEqual(
    data!.data.map((entry) => (entry.id ? 'email' : 'error')),
    ['email', 'error', 'error', 'email', 'error', 'error'],
  );
  const errors = data!.errors as Array<Record<string, unknown>>;
  assert.deepEqual(
    errors.map(({ index, statusCode, name, field }) => ({ index, statusCode, name, field })),
    [
      { index: 1, statusCode: 400, name: 'unsupported_in_batch', field: 'template' },
      { index: 2, statusCode: 400, name: 'unsupported_in_batch', field: 'topic_id' },
      { index: 4, statusCode: 400, name: 'unsupported_in_batch', field: 'template' },
      { index: 5, statusCode: 400, name: 'unsupported_in_batch', field: 'topic_id' },
    ],
  );
  for (const refusal of errors) assert.match(String(refusal.message), sendThroughPostEmails);
  // Only the two plain entries are stored and charged.
  assert.deepEqual(await counts(bed.t.db, bed.org.id), {
    emails: before.emails + 2,
    charged: before.charged + 2,
  });
  // The raw answer: each refused entry holds its error in place, with no id, and is listed in errors.
  const raw = await sendBatch(bed.t.app, bed.org.sendingKey, [
    { from, to: 'x@example.com', subject: 's', text: 't' },
    { from, to: 'y@example.com', subject: 's', text: 't', topic_id: topicId },
  ]);
  assert.equal(raw.statusCode, 200, raw.body);
  const refusal = {
    index: 1,
    statusCode: 400,
    name: 'unsupported_in_batch',
    message: 'topic_id is not supported in a batch entry; send this message through POST /emails',
    field: 'topic_id',
  };
  assert.deepEqual(raw.json().data[1], { object: 'error', id: null, ...refusal });
  assert.deepEqual(raw.json().errors, [refusal]);

  // The relay gets the plain entries of both batches and nothing else.
  await waitFor(() => bed.sink.transactions.length === 3);
  assert.deepEqual(bed.sink.transactions.flatMap((tx) => tx.rcptTo).sort(), [
    'first@example.com',
    'last@example.com',
    'x@example.com',
  ]);
  assert.equal((await transactionTo('first@example.com').parse()).subject, 'Plain one');
});

test('strict (the SDK default): one template or topic entry refuses the whole request, naming the field; nothing is stored', async () => {
  const before = await counts(bed.t.db, bed.org.id);
  const { data, error } = await sender.batch.send(mixedEntries());
  assert.equal(data, null);
  assert.equal(error?.name, 'unsupported_in_batch');
  assert.equal(
    error?.message,
    'Entry 1: template is not supported in a batch entry; send this message through POST /emails',
  );

  const cases: Array<[entry: Record<string, unknown>, field: string]> = [
    [{ from, to: 'b@example.com', template: { id: 'order-confirmed', variables: { ORDER: 1 } } }, 'template'],
    [{ from, to: 'b@example.com', template: { id: 'no-such-template' } }, 'template'],
    [{ from, to: 'b@example.com', subject: 's', text: 't', topic_id: topicId }, 'topic_id'],
    [{ from, to: 'b@example.com', subject: 's', text: 't', topic_id: 'no-such-topic' }, 'topic_id'],
  ];
  for (const [entry, field] of cases) {
    // An earlier invalid entry does not hide the rule: a batch with either field is refused for it.
    const entries = [
      { from, to: 'not an address', subject: 's', text: 't' },
      { from, to: 'a@example.com', subject: 's', text: 't' },
      entry,
    ];
    const res = await sendBatch(bed.t.app, bed.org.sendingKey, entries, { 'x-batch-validation': 'strict' });
    assert.equal(res.statusCode, 400, res.body);
    assert.deepEqual(res.json(), {
      statusCode: 400,
      name: 'unsupported_in_batch',
      message: `Entry 2: ${field} is not supported in a batch entry; send this message through POST /emails`,
      field,
    });
  }
  assert.deepEqual(await counts(bed.t.db, bed.org.id), before);
});

test('the same messages sent through POST /emails are rendered and gated as usual', async () => {
  const templated = await sender.emails.send({
    to: 'ann@example.com',
    template: { id: 'order-confirmed', variables: { NAME: 'Ann & Co', ORDER: 42 } },
  });
  assert.equal(templated.error, null, JSON.stringify(templated.error));
  const topical = await sender.emails.send({
    from,
    to: ['reader@example.com', 'gone@example.com'],
    subject: 'March news',
    html: '<p>News</p>',
    topicId,
  });
  assert.equal(topical.error, null, JSON.stringify(topical.error));

  await waitFor(async () => Object.keys(await outcomes(topical.data!.id)).length === 2);
  await waitFor(() => bed.sink.transactions.length === 2);
  const rendered = await transactionTo('ann@example.com').parse();
  assert.equal(rendered.subject, 'Order 42 confirmed');
  assert.equal(String(rendered.html).trim(), '<p>Thanks, Ann &amp; Co</p>');
  assert.deepEqual(rendered.from?.value, [{ address: `store@${bed.org.domain}`, name: 'Store' }]);
  assert.deepEqual(rendered.replyTo?.value, [{ address: `help@${bed.org.domain}`, name: '' }]);

  // The opted-out contact is not sent to; the other gets the one-click unsubscribe headers.
  assert.deepEqual(await outcomes(topical.data!.id), {
    'reader@example.com': 'delivered',
    'gone@example.com': 'failed:unsubscribed',
  });
  const topicHeaders = headerBlock(transactionTo('reader@example.com'));
  assert.match(topicHeaders, /^List-Unsubscribe: <https?:\/\/[^>]+\/unsubscribe\/[^>]+>$/m);
  assert.match(topicHeaders, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
});

test('a template never published: POST /emails says so and how to publish it; a batch refuses the entry first', async () => {
  const draft = await admin.templates.create({ name: 'Draft', subject: 'Draft', html: '<p>draft</p>' });
  assert.equal(draft.error, null, JSON.stringify(draft.error));
  const draftId = draft.data!.id;
  // Without a from of its own, as with a published template that supplies one.
  const single = await sender.emails.send({ to: 'ann@example.com', template: { id: draftId } });
  assert.equal(single.error?.name, 'template_not_found');
  assert.equal(
    single.error?.message,
    `Template ${draftId} has never been published: publish it first with POST /templates/${draftId}/publish, ` +
      'or Publish on its page in the dashboard',
  );

  const batch = await sender.batch.send([{ from, to: 'ann@example.com', template: { id: draftId } }]);
  assert.equal(batch.data, null);
  assert.equal(batch.error?.name, 'unsupported_in_batch');
});

test('a batch of refused template and topic entries reads no template or topic and stores nothing', async () => {
  // Every statement the app runs on its database during the request, in order.
  const db = bed.t.db;
  const query = db.query;
  const statements: string[] = [];
  db.query = ((text: string, params?: readonly unknown[]) => {
    statements.push(text);
    return query.call(db, text, params);
  }) as typeof db.query;
  const before = await counts(db, bed.org.id);
  try {
    const entries = Array.from({ length: 100 }, (_, i) =>
      i % 2 === 0
        ? { to: `t${i}@example.com`, template: { id: templateId, variables: { ORDER: i } } }
        : { from, to: `n${i}@example.com`, subject: 'news', text: 'news', topicId },
    );
    const { data, error } = await sender.batch.send(entries, { batchValidation: 'permissive' });
    assert.equal(error, null, JSON.stringify(error));
    assert.equal(data!.data.length, 100);
    assert.ok(data!.data.every((entry) => !entry.id));
    assert.equal(data!.errors?.length, 100);
  } finally {
    db.query = query;
  }
  const count = (fragment: string) => statements.filter((sql) => sql.includes(fragment)).length;
  assert.equal(count('FROM templates'), 0);
  assert.equal(count('FROM topics'), 0);
  assert.deepEqual(await counts(db, bed.org.id), before);
});
