// Outcomes per recipient, end to end: API → queue → worker → SMTP relay (a real smtp-server on loopback
// that accepts, defers or rejects each recipient) → timeline and suppression list.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startRelayTestBed, startTestDelivery, type RelayTestBed } from './helpers/delivery.ts';
import { message, send } from './helpers/emails.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;

let bed: RelayTestBed;

before(async () => {
  // Deferred recipients are retried after 1 s, twice; then they fail.
  bed = await startRelayTestBed('out', { MAILROOM_DELIVERY_RETRY_SCHEDULE: '1,1', MAILROOM_SMTP_TIMEOUT_MS: '2000' });
  ({ t, org, sink } = bed);
});
after(() => bed.close());
beforeEach(() => sink.reset());

type Event = { type: string; recipient?: string; data?: Record<string, unknown>; created_at: string };
const timeline = async (id: string): Promise<Event[]> =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) })).json().data;
const outcomesOf = async (id: string) =>
  Object.fromEntries((await timeline(id)).filter((e) => e.recipient).map((e) => [e.recipient, e.type]));
const sendOne = async (extra: Record<string, unknown>) => {
  const res = await send(t.app, org.fullKey, message(org, extra));
  assert.equal(res.statusCode, 200, res.body);
  return res.json().id as string;
};

test('one SMTP transaction: delivered, deferred and bounced recipients each get their own outcome', async () => {
  sink.replyToRecipient('later@example.com', { code: 451, message: '4.2.0 Try again later' });
  sink.replyToRecipient('nobody@example.com', { code: 550, message: '5.1.1 No such user' });
  const id = await sendOne({
    to: ['ok@example.com', 'later@example.com', 'nobody@example.com'],
    bcc: 'hidden@example.com',
  });
  await waitFor(async () => (await timeline(id)).some((e) => e.type === 'delivery_delayed'));
  const events = await timeline(id);
  const of = (recipient: string) => events.filter((e) => e.recipient === recipient).map((e) => e.type);
  assert.deepEqual(of('ok@example.com'), ['delivered']);
  assert.deepEqual(of('hidden@example.com'), ['delivered']);
  assert.deepEqual(of('nobody@example.com'), ['bounced']);
  assert.deepEqual(of('later@example.com'), ['delivery_delayed']);
  const bounce = events.find((e) => e.type === 'bounced')!;
  assert.deepEqual(bounce.data, { bounce: { type: 'hard', smtp_code: 550, diagnostic: '550 5.1.1 No such user' } });

  // The first transaction carried every recipient; bcc in the envelope only, DKIM-signed by the domain.
  const first = sink.transactions[0]!;
  assert.deepEqual([...first.rcptTo].sort(), ['hidden@example.com', 'ok@example.com']);
  const raw = first.raw.toString();
  assert.doesNotMatch(raw, /^Bcc:/im);
  assert.match(raw, new RegExp(`^DKIM-Signature:[^]*d=${org.domain.replaceAll('.', '\\.')}`, 'im'));

  // The deferred recipient is tried again (and only it), and is delivered once the server agrees.
  sink.reset();
  await waitFor(async () => (await outcomesOf(id))['later@example.com'] === 'delivered', 8000);
  assert.deepEqual(
    sink.transactions.flatMap((tx) => tx.rcptTo),
    ['later@example.com'],
  );
  const email = (await t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(org.fullKey) })).json();
  assert.equal(email.last_event, 'delivered');
});

test('a hard-bounced address is suppressed: the next message to it fails without being sent', async () => {
  sink.replyToRecipient('gone@example.com', { code: 550, message: '5.1.1 Mailbox unavailable' });
  const first = await sendOne({ to: 'gone@example.com' });
  await waitFor(async () => (await outcomesOf(first))['gone@example.com'] === 'bounced');
  sink.reset();
  const second = await sendOne({ to: ['gone@example.com', 'fine@example.com'] });
  await waitFor(async () => Object.keys(await outcomesOf(second)).length === 2);
  const failed = (await timeline(second)).find((e) => e.type === 'failed')!;
  assert.deepEqual([failed.recipient, failed.data], ['gone@example.com', { reason: 'suppressed' }]);
  assert.deepEqual(
    sink.transactions.flatMap((tx) => tx.rcptTo),
    ['fine@example.com'],
  );
});

test('a content refusal at DATA fails every recipient (refused, not a bounce) and suppresses none', async () => {
  sink.failData({ code: 554, message: '5.7.1 Message rejected as spam' });
  const id = await sendOne({ to: ['a1@example.com', 'a2@example.com'] });
  await waitFor(async () => Object.keys(await outcomesOf(id)).length === 2);
  assert.deepEqual(await outcomesOf(id), { 'a1@example.com': 'failed', 'a2@example.com': 'failed' });
  const reasons = await t.db.query<{ failure_reason: string }>(
    'SELECT DISTINCT failure_reason FROM email_recipients WHERE email_id = $1',
    [id],
  );
  assert.deepEqual(reasons.rows, [{ failure_reason: 'refused' }]);
  const suppressed = await t.db.query(
    "SELECT 1 FROM suppressions WHERE address IN ('a1@example.com', 'a2@example.com')",
  );
  assert.equal(suppressed.rowCount, 0);
});

test('a recipient deferred past the last retry fails with retries_exhausted', async () => {
  sink.replyToRecipient('busy@example.com', { code: 452, message: '4.2.2 Mailbox full' });
  const id = await sendOne({ to: 'busy@example.com' });
  await waitFor(async () => (await outcomesOf(id))['busy@example.com'] === 'failed', 10_000);
  const events = (await timeline(id)).map((e) => e.type);
  assert.deepEqual(events, ['accepted', 'delivery_delayed', 'delivery_delayed', 'failed']);
  const failed = (await timeline(id)).at(-1)!;
  assert.equal(failed.data!.reason, 'retries_exhausted');
});

test('a relay that cannot be reached defers; the message is delivered when it comes back', async () => {
  const down = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: 'smtp://127.0.0.1:9',
    MAILROOM_SMTP_TIMEOUT_MS: '500',
    MAILROOM_DELIVERY_RETRY_SCHEDULE: '1',
  });
  const o = await createTestOrganization(down.db, down.config, 'down');
  const unreachable = await startTestDelivery(down);
  try {
    const res = await send(down.app, o.fullKey, message(o, { to: 'x@example.com' }));
    const id = res.json().id;
    const events = async () =>
      (await down.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(o.fullKey) })).json()
        .data as Event[];
    await waitFor(async () => (await events()).some((e) => e.type === 'delivery_delayed'));
    const delayed = (await events()).find((e) => e.type === 'delivery_delayed')!;
    assert.match(String(delayed.data!.response), /connect/i);
    assert.equal(delayed.data!.smtp_code, null);
  } finally {
    await unreachable.stop();
    await down.close();
  }
});
