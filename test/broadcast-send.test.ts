// Sending a broadcast: the snapshot of its audience (who is left out and why, counted), the fan-out into
// exactly one email per contact (also with two runs at once), the copies' own lane at the delivery
// workers, pause, resume and cancel, a scheduled send (snapshot when due, run by the real worker), a
// segment deleted before it was due, and the monthly quota running out mid-send.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadSigner, type Signer } from '../src/platform/signing.ts';
import { ServiceError } from '../src/platform/errors.ts';
import { cancelBroadcast, pauseBroadcast, resumeBroadcast, sendBroadcast } from '../src/broadcasts/send-broadcast.ts';
import { BATCH, fanOut, type FanOutContext } from '../src/broadcasts/fan-out.ts';
import { takeSnapshot } from '../src/broadcasts/snapshot.ts';
import { startBroadcastFanOut } from '../src/broadcasts/start-broadcasts.ts';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { secondConnection } from './helpers/database.ts';
import { waitFor } from './helpers/wait.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let signer: Signer;
let context: FanOutContext;
let label = 0;

before(async () => {
  t = await buildTestApp({ MAILROOM_TRANSPORT: 'capture' });
  org = await createTestOrganization(t.db, t.config, 'bc');
  other = await createTestOrganization(t.db, t.config, 'bc2');
  signer = await loadSigner(t.db);
  context = { db: t.db, config: t.config, signer };
});
after(async () => {
  await t.close();
});

/** A segment of `count` new contacts (c<i>@<tag>.example) of the organization; returns it and their ids. */
async function segmentOf(organizationId: string, count: number): Promise<{ segmentId: string; tag: string }> {
  label += 1;
  const tag = `s${label}`;
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO segments (organization_id, name) VALUES ($1, $2) RETURNING id`,
    [organizationId, tag],
  );
  const segmentId = rows[0]!.id;
  await t.db.query(
    `WITH made AS (
       INSERT INTO contacts (organization_id, email, first_name)
       SELECT $1, 'c' || i || '@' || $3 || '.example', 'Reader ' || i FROM generate_series(1, $2::int) AS i
       RETURNING id)
     INSERT INTO contact_segments (contact_id, segment_id) SELECT id, $4 FROM made`,
    [organizationId, count, tag, segmentId],
  );
  return { segmentId, tag };
}

/** A complete draft to the segment (optionally with a topic). */
async function draft(
  o: TestOrganization,
  segmentId: string | null,
  fields: { topicId?: string; subject?: string | null; previewText?: string } = {},
): Promise<string> {
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO broadcasts (organization_id, name, segment_id, topic_id, "from", subject, html, text, preview_text)
     VALUES ($1, 'News', $2, $3, $4, $5, '<html><body><p>Hello</p></body></html>', 'Hello', $6) RETURNING id`,
    [
      o.id,
      segmentId,
      fields.topicId ?? null,
      `News <news@${o.domain}>`,
      fields.subject === undefined ? 'Monthly news' : fields.subject,
      fields.previewText ?? null,
    ],
  );
  return rows[0]!.id;
}

async function broadcastRow(id: string) {
  const { rows } = await t.db.query<{
    status: string;
    audience_count: number;
    skipped_unsubscribed: number;
    skipped_topic: number;
    skipped_suppressed: number;
    sent_at: Date | null;
    completed_at: Date | null;
    pause_reason: string | null;
    failure_reason: string | null;
    scheduled_at: Date | null;
  }>('SELECT * FROM broadcasts WHERE id = $1', [id]);
  return rows[0]!;
}

async function recipientCounts(id: string): Promise<Record<string, number>> {
  const { rows } = await t.db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM broadcast_recipients WHERE broadcast_id = $1 GROUP BY status',
    [id],
  );
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

async function copies(id: string): Promise<Array<{ id: string; to: string[]; status: string }>> {
  const { rows } = await t.db.query<{ id: string; to: string[]; status: string }>(
    'SELECT id, "to", status FROM emails WHERE broadcast_id = $1',
    [id],
  );
  return rows;
}

async function fanOutJobs(id: string): Promise<Array<{ run_at: Date; share_key: string }>> {
  const { rows } = await t.db.query<{ run_at: Date; share_key: string }>(
    `SELECT run_at, share_key FROM jobs WHERE queue = 'broadcast-fan-out' AND payload ->> 'broadcast_id' = $1`,
    [id],
  );
  return rows;
}

/** The delivery jobs of the broadcast's copies. */
async function deliveryJobs(id: string): Promise<Array<{ share_key: string; run_at: string }>> {
  const { rows } = await t.db.query<{ share_key: string; run_at: string }>(
    `SELECT j.share_key, j.run_at::text AS run_at FROM jobs j JOIN emails e ON e.id = (j.payload ->> 'email_id')::uuid
      WHERE j.queue = 'deliver-email' AND e.broadcast_id = $1`,
    [id],
  );
  return rows;
}

/** Every queued recipient has exactly one copy, to its own address, and no copy is without its row. */
async function assertOneCopyEach(id: string, expected: number): Promise<void> {
  const { rows } = await t.db.query<{ recipients: number; copies: number; matched: number; distinct_to: number }>(
    `SELECT (SELECT count(*)::int FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'queued') AS recipients,
            (SELECT count(*)::int FROM emails WHERE broadcast_id = $1) AS copies,
            (SELECT count(*)::int FROM broadcast_recipients r JOIN emails e ON e.id = r.email_id
              WHERE r.broadcast_id = $1 AND e."to" = jsonb_build_array(r.email)) AS matched,
            (SELECT count(DISTINCT "to")::int FROM emails WHERE broadcast_id = $1) AS distinct_to`,
    [id],
  );
  assert.deepEqual(rows[0], { recipients: expected, copies: expected, matched: expected, distinct_to: expected });
}

/**
 * The last run of the fan-out: with every copy made it waits, `queued`, while copies are on their way;
 * once they have left (their delivery jobs done, as a worker would) the broadcast is `sent`.
 */
async function fanOutUntilSent(ctx: FanOutContext, id: string): Promise<void> {
  const first = await fanOut(ctx, id);
  assert.ok('retryAt' in first && /on their way/.test(first.reason), JSON.stringify(first));
  assert.equal((await broadcastRow(id)).status, 'queued', 'queued while copies wait to be sent');
  await t.db.query("DELETE FROM jobs WHERE queue = 'deliver-email' AND share_key = $1", [`broadcast:${id}`]);
  assert.deepEqual(await fanOut(ctx, id), { done: true });
  assert.equal((await broadcastRow(id)).status, 'sent');
}

const stopAfterBatches = (batches: number): FanOutContext => {
  let runs = 0;
  return { ...context, stopping: () => runs++ >= batches };
};

test('the snapshot leaves out the unsubscribed, those opted out of the topic and the suppressed, and counts them', async () => {
  const { segmentId, tag } = await segmentOf(org.id, 5);
  // c1 gets a copy; c2 unsubscribed from everything; c3 opted out of the topic; c4 suppressed; c5 both
  // opted out and suppressed (the first reason counts).
  const { rows: topic } = await t.db.query<{ id: string }>(
    `INSERT INTO topics (organization_id, name, default_subscription) VALUES ($1, 'News', 'opt_in') RETURNING id`,
    [org.id],
  );
  const topicId = topic[0]!.id;
  const address = (i: number) => `c${i}@${tag}.example`;
  await t.db.query(`UPDATE contacts SET unsubscribed = true WHERE organization_id = $1 AND email = $2`, [
    org.id,
    address(2),
  ]);
  await t.db.query(
    `INSERT INTO contact_topics (contact_id, topic_id, subscription)
     SELECT id, $2, 'opt_out' FROM contacts WHERE organization_id = $1 AND email = ANY ($3::text[])`,
    [org.id, topicId, [address(3), address(5)]],
  );
  await t.db.query(
    `INSERT INTO suppressions (organization_id, address, reason) VALUES ($1, $2, 'manual'), ($1, $3, 'manual')`,
    [org.id, address(4).toUpperCase().toLowerCase(), address(5)],
  );
  // Not in the segment, and another organization's suppression of c1: neither changes anything.
  await t.db.query(`INSERT INTO contacts (organization_id, email) VALUES ($1, 'outside@${tag}.example')`, [org.id]);
  await t.db.query(`INSERT INTO suppressions (organization_id, address, reason) VALUES ($1, $2, 'manual')`, [
    other.id,
    address(1),
  ]);

  const id = await draft(org, segmentId, { topicId, previewText: 'In this issue: <news>' });
  assert.deepEqual(await sendBroadcast(t.db, org.id, id, undefined), { id });
  assert.equal((await broadcastRow(id)).status, 'queued');
  const jobs = await fanOutJobs(id);
  assert.equal(jobs.length, 1);
  assert.ok(jobs[0]!.run_at.getTime() <= Date.now() + 1000, 'the fan-out is due now');
  assert.equal((await recipientCounts(id)).pending, undefined, 'no snapshot before the job runs');

  assert.ok('retryAt' in (await fanOut(context, id)), 'every copy made, none sent yet');
  const copyLanes = (await deliveryJobs(id)).map((job) => job.share_key);
  await fanOutUntilSent(context, id);
  const row = await broadcastRow(id);
  assert.ok(row.sent_at && row.completed_at);
  assert.deepEqual(
    [row.audience_count, row.skipped_unsubscribed, row.skipped_topic, row.skipped_suppressed],
    [5, 1, 2, 1],
  );
  const { rows: reasons } = await t.db.query<{ email: string; status: string; skip_reason: string | null }>(
    'SELECT email, status, skip_reason FROM broadcast_recipients WHERE broadcast_id = $1 ORDER BY email',
    [id],
  );
  assert.deepEqual(
    reasons.map((r) => [r.email, r.status, r.skip_reason]),
    [
      [address(1), 'queued', null],
      [address(2), 'skipped', 'unsubscribed'],
      [address(3), 'skipped', 'topic'],
      [address(4), 'skipped', 'suppressed'],
      [address(5), 'skipped', 'topic'],
    ],
  );
  await assertOneCopyEach(id, 1);

  // The copy: an ordinary email from the broadcast's sender, with its topic, the preview text hidden
  // first in its body, and its delivery job in the broadcast's own lane.
  const { rows: copy } = await t.db.query<{
    from: string;
    subject: string;
    topic_id: string;
    html: string;
    text: string;
    message_id: string;
    status: string;
  }>('SELECT "from", subject, topic_id, html, text, message_id, status FROM emails WHERE broadcast_id = $1', [id]);
  assert.equal(copy[0]!.from, `News <news@${org.domain}>`);
  assert.equal(copy[0]!.subject, 'Monthly news');
  assert.equal(copy[0]!.topic_id, topicId);
  assert.equal(copy[0]!.status, 'queued');
  assert.match(copy[0]!.message_id, new RegExp(`@${org.domain.replace(/\./g, '\\.')}>$`));
  assert.match(copy[0]!.html, /^<html><body><div style="display:none[^"]*">In this issue: &lt;news&gt;<\/div><p>Hello/);
  assert.equal(copy[0]!.text, 'Hello');
  assert.deepEqual(copyLanes, [`broadcast:${id}`]);
  // An ordinary send keeps the organization's lane.
  const { rows: lanes } = await t.db.query<{ share_key: string }>(
    `SELECT DISTINCT share_key FROM jobs WHERE queue = 'deliver-email' AND share_key NOT LIKE 'broadcast:%'`,
  );
  assert.ok(lanes.every((lane) => lane.share_key !== `broadcast:${id}`));
  // Run again (a job run twice): nothing more.
  assert.deepEqual(await fanOut(context, id), { done: true });
  await assertOneCopyEach(id, 1);
});

test('send refuses an incomplete broadcast, one in another status, another organization’s, and an unverified sender', async () => {
  const { segmentId } = await segmentOf(org.id, 1);
  const refusal = async (promise: Promise<unknown>) => {
    const error = await promise.then(
      () => assert.fail('expected a refusal'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ServiceError, String(error));
    return { name: error.name, field: error.field };
  };
  const noSubject = await draft(org, segmentId, { subject: null });
  assert.deepEqual(await refusal(sendBroadcast(t.db, org.id, noSubject, undefined)), {
    name: 'validation_error',
    field: 'subject',
  });
  const noSegment = await draft(org, null);
  assert.deepEqual(await refusal(sendBroadcast(t.db, org.id, noSegment, undefined)), {
    name: 'validation_error',
    field: 'segment_id',
  });
  await t.db.query('UPDATE broadcasts SET html = NULL, text = NULL WHERE id = $1', [noSubject]);
  await t.db.query(`UPDATE broadcasts SET subject = 's' WHERE id = $1`, [noSubject]);
  assert.deepEqual(await refusal(sendBroadcast(t.db, org.id, noSubject, undefined)), {
    name: 'validation_error',
    field: 'html',
  });
  const unverified = await draft(org, segmentId);
  await t.db.query(`UPDATE broadcasts SET "from" = 'news@unverified.example' WHERE id = $1`, [unverified]);
  assert.deepEqual(await refusal(sendBroadcast(t.db, org.id, unverified, undefined)), {
    name: 'invalid_from_address',
    field: 'from',
  });

  const ok = await draft(org, segmentId);
  assert.deepEqual(await refusal(sendBroadcast(t.db, other.id, ok, undefined)), {
    name: 'not_found',
    field: undefined,
  });
  assert.deepEqual(await refusal(sendBroadcast(t.db, org.id, 'not-a-uuid', undefined)), {
    name: 'not_found',
    field: undefined,
  });
  await sendBroadcast(t.db, org.id, ok, undefined);
  assert.deepEqual(await refusal(sendBroadcast(t.db, org.id, ok, undefined)), {
    name: 'invalid_state',
    field: undefined,
  });
  assert.deepEqual(await refusal(resumeBroadcast(t.db, org.id, ok)), { name: 'invalid_state', field: undefined });
  assert.deepEqual(await refusal(pauseBroadcast(t.db, other.id, ok, 'x')), { name: 'not_found', field: undefined });
  // Nothing refused changed anything.
  for (const id of [noSubject, noSegment, unverified]) assert.equal((await broadcastRow(id)).status, 'draft');
  assert.equal((await fanOutJobs(noSubject)).length, 0);
});

test('exactly one email per contact, in batches, with two fan-outs running at once', async () => {
  const contacts = 2 * BATCH + 137;
  const { segmentId } = await segmentOf(org.id, contacts);
  const id = await draft(org, segmentId);
  await sendBroadcast(t.db, org.id, id, undefined);
  // Two runs of the job at once (another process, a run whose lease ran out): on PostgreSQL on two
  // connection pools, each claiming its batches under SKIP LOCKED.
  const second = await secondConnection(t.db);
  try {
    const results = await Promise.all([fanOut(context, id), fanOut({ ...context, db: second.db }, id)]);
    for (const result of results) assert.ok('done' in result || 'retryAt' in result);
  } finally {
    await second.close();
  }
  // A run that found the last rows held by the other looks again later; by now nothing is pending.
  const lanes = new Set((await deliveryJobs(id)).map((job) => job.share_key));
  assert.deepEqual([...lanes], [`broadcast:${id}`]);
  await fanOutUntilSent(context, id);
  assert.deepEqual(await recipientCounts(id), { queued: contacts });
  await assertOneCopyEach(id, contacts);
});

test('a contact whose address changed since the audience was taken gets the copy at the new one; the preview text is personalised', async () => {
  const { segmentId, tag } = await segmentOf(org.id, 2);
  const id = await draft(org, segmentId, { previewText: 'For {{{FIRST_NAME|you}}} <3' });
  await sendBroadcast(t.db, org.id, id, undefined);
  // The audience is taken, then c1 changes address, before any copy is made.
  assert.ok('retryAt' in (await fanOut(stopAfterBatches(0), id)));
  assert.deepEqual(await recipientCounts(id), { pending: 2 });
  await t.db.query(`UPDATE contacts SET email = $1 WHERE organization_id = $2 AND email = $3`, [
    `moved@${tag}.example`,
    org.id,
    `c1@${tag}.example`,
  ]);
  await fanOutUntilSent(context, id);
  const made = await copies(id);
  assert.deepEqual(made.map((copy) => copy.to[0]).sort(), [`c2@${tag}.example`, `moved@${tag}.example`]);
  const { rows } = await t.db.query<{ html: string }>(
    `SELECT html FROM emails WHERE broadcast_id = $1 AND "to" = $2::jsonb`,
    [id, JSON.stringify([`moved@${tag}.example`])],
  );
  assert.match(rows[0]!.html, /<div style="display:none[^"]*">For Reader 1 &lt;3<\/div>/);
});

test('copies are made only a window ahead of delivery: the fan-out waits while the window is full', async () => {
  const { segmentId } = await segmentOf(org.id, 10);
  const id = await draft(org, segmentId);
  await sendBroadcast(t.db, org.id, id, undefined);
  const windowed = { ...context, window: 4 };
  const first = await fanOut(windowed, id);
  assert.ok('retryAt' in first, 'the run waits for the window');
  assert.deepEqual(await recipientCounts(id), { queued: 4, pending: 6 });
  assert.equal((await broadcastRow(id)).status, 'queued');
  // Two copies leave (their jobs finish): two more are made, and the run waits again.
  await t.db.query(
    `DELETE FROM jobs WHERE id IN (SELECT j.id FROM jobs j WHERE j.queue = 'deliver-email' AND j.share_key = $1
      ORDER BY j.id LIMIT 2)`,
    [`broadcast:${id}`],
  );
  assert.ok('retryAt' in (await fanOut(windowed, id)));
  assert.deepEqual(await recipientCounts(id), { queued: 6, pending: 4 });
  // Copies deferred for longer than a minute (a throttled destination) do not hold the window.
  await t.db.query(`UPDATE jobs SET run_at = now() + interval '10 minutes' WHERE share_key = $1`, [`broadcast:${id}`]);
  // The last four are made; the window is full again, but no one is left to make a copy for.
  await fanOutUntilSent(windowed, id);
  await assertOneCopyEach(id, 10);
});

test('the window is topped up a quarter at a time: one copy gone makes none, a quarter gone makes a quarter', async () => {
  const { segmentId } = await segmentOf(org.id, 12);
  const id = await draft(org, segmentId);
  await sendBroadcast(t.db, org.id, id, undefined);
  const windowed = { ...context, window: 8 };
  const copiesLeave = (count: number) =>
    t.db.query(
      `DELETE FROM jobs WHERE id IN (SELECT j.id FROM jobs j WHERE j.queue = 'deliver-email' AND j.share_key = $1
        ORDER BY j.id LIMIT $2)`,
      [`broadcast:${id}`, count],
    );
  assert.ok('retryAt' in (await fanOut(windowed, id)));
  assert.deepEqual(await recipientCounts(id), { queued: 8, pending: 4 });
  // One copy leaves: less than a quarter of the window is free, so none is made yet.
  await copiesLeave(1);
  assert.ok('retryAt' in (await fanOut(windowed, id)));
  assert.deepEqual(await recipientCounts(id), { queued: 8, pending: 4 });
  // A second leaves: a quarter is free, and both places are filled in one batch.
  await copiesLeave(1);
  assert.ok('retryAt' in (await fanOut(windowed, id)));
  assert.deepEqual(await recipientCounts(id), { queued: 10, pending: 2 });
});

test('pause holds the copies and stops the fan-out; resume goes on where it stopped', async () => {
  const contacts = BATCH + 200;
  const { segmentId } = await segmentOf(org.id, contacts);
  const id = await draft(org, segmentId);
  await sendBroadcast(t.db, org.id, id, undefined);
  // The snapshot and one batch, then the process stops (the job would run again).
  assert.ok('retryAt' in (await fanOut(stopAfterBatches(1), id)));
  assert.deepEqual(await recipientCounts(id), { queued: BATCH, pending: 200 });

  await pauseBroadcast(t.db, org.id, id, 'Checking a typo');
  let row = await broadcastRow(id);
  assert.equal(row.status, 'paused');
  assert.equal(row.pause_reason, 'Checking a typo');
  const held = await deliveryJobs(id);
  assert.equal(held.length, BATCH);
  assert.ok(
    held.every((job) => job.run_at === 'infinity'),
    'every undelivered copy is held',
  );
  // A fan-out run while paused writes nothing.
  assert.deepEqual(await fanOut(context, id), { done: true });
  assert.deepEqual(await recipientCounts(id), { queued: BATCH, pending: 200 });

  await resumeBroadcast(t.db, org.id, id);
  row = await broadcastRow(id);
  assert.equal(row.status, 'queued');
  assert.equal(row.pause_reason, null);
  assert.ok(
    (await deliveryJobs(id)).every((job) => job.run_at !== 'infinity'),
    'the copies are due again',
  );
  assert.equal((await fanOutJobs(id)).length, 1, 'one fan-out job, due now');
  await fanOutUntilSent(context, id);
  await assertOneCopyEach(id, contacts);
});

test('cancel: pending recipients get nothing, unsent copies are canceled with their jobs, copies on their way go on', async () => {
  const contacts = BATCH + 50;
  const { segmentId } = await segmentOf(org.id, contacts);
  const id = await draft(org, segmentId);
  await sendBroadcast(t.db, org.id, id, undefined);
  await fanOut(stopAfterBatches(1), id);
  // One copy is being sent right now (a worker took it).
  const { rows: taken } = await t.db.query<{ id: string }>(
    `UPDATE emails SET status = 'sending' WHERE id = (SELECT id FROM emails WHERE broadcast_id = $1 LIMIT 1) RETURNING id`,
    [id],
  );
  await pauseBroadcast(t.db, org.id, id, 'wrong audience');
  await cancelBroadcast(t.db, org.id, id);

  assert.equal((await broadcastRow(id)).status, 'canceled');
  assert.deepEqual(await recipientCounts(id), { queued: BATCH, canceled: 50 });
  const statuses = (await copies(id)).reduce<Record<string, number>>(
    (count, copy) => ({ ...count, [copy.status]: (count[copy.status] ?? 0) + 1 }),
    {},
  );
  assert.deepEqual(statuses, { canceled: BATCH - 1, sending: 1 });
  const { rows: entries } = await t.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM email_events ev JOIN emails e ON e.id = ev.email_id
      WHERE e.broadcast_id = $1 AND ev.type = 'canceled'`,
    [id],
  );
  assert.equal(entries[0]!.n, BATCH - 1, 'each canceled copy has its canceled entry');
  const jobs = await deliveryJobs(id);
  assert.equal(jobs.length, 1, 'only the copy on its way keeps its job');
  assert.notEqual(jobs[0]!.run_at, 'infinity', 'released from the pause');
  assert.equal((await fanOutJobs(id)).length, 0);
  assert.equal(taken.length, 1);
  // Canceled is final.
  await assert.rejects(cancelBroadcast(t.db, org.id, id), { name: 'invalid_state' });
  await assert.rejects(resumeBroadcast(t.db, org.id, id), { name: 'invalid_state' });
});

test('a scheduled broadcast: its audience is taken when it is due, by the worker, and cancel returns it to draft', async () => {
  const { segmentId, tag } = await segmentOf(org.id, 3);
  const id = await draft(org, segmentId);
  const inAnHour = new Date(Date.now() + 3_600_000);
  await sendBroadcast(t.db, org.id, id, new Date(Date.now() + 60_000));
  // Sending again moves the time: still one job.
  await sendBroadcast(t.db, org.id, id, inAnHour);
  let row = await broadcastRow(id);
  assert.equal(row.status, 'scheduled');
  assert.equal(row.scheduled_at?.getTime(), inAnHour.getTime());
  let jobs = await fanOutJobs(id);
  assert.equal(jobs.length, 1);
  assert.equal(jobs[0]!.run_at.getTime(), inAnHour.getTime());
  assert.equal(jobs[0]!.share_key, org.id);

  // Before it is due: one contact unsubscribes, another joins the segment.
  await t.db.query(`UPDATE contacts SET unsubscribed = true WHERE organization_id = $1 AND email = $2`, [
    org.id,
    `c1@${tag}.example`,
  ]);
  await t.db.query(
    `WITH made AS (INSERT INTO contacts (organization_id, email) VALUES ($1, $2) RETURNING id)
     INSERT INTO contact_segments (contact_id, segment_id) SELECT id, $3 FROM made`,
    [org.id, `late@${tag}.example`, segmentId],
  );
  // Its time comes (moved rather than waited for), and the fan-out worker runs it.
  const worker = await startBroadcastFanOut(t.db, t.config, { error: () => {}, warn: () => {} });
  try {
    assert.equal((await broadcastRow(id)).status, 'scheduled');
    await t.db.query(
      `UPDATE jobs SET run_at = now() WHERE queue = 'broadcast-fan-out' AND payload ->> 'broadcast_id' = $1`,
      [id],
    );
    worker.poke();
    // The copies leave (no delivery worker runs here: their jobs are taken away as one would finish them).
    await waitFor(async () => {
      await t.db.query("DELETE FROM jobs WHERE queue = 'deliver-email' AND share_key = $1", [`broadcast:${id}`]);
      return (await broadcastRow(id)).status === 'sent';
    }, 10_000);
  } finally {
    await worker.stop();
  }
  row = await broadcastRow(id);
  assert.deepEqual([row.audience_count, row.skipped_unsubscribed], [4, 1]);
  const to = (await copies(id)).map((copy) => copy.to[0]).sort();
  assert.deepEqual(to, [`c2@${tag}.example`, `c3@${tag}.example`, `late@${tag}.example`]);
  assert.equal((await fanOutJobs(id)).length, 0, 'the job is finished');

  // Cancel of a scheduled broadcast: back to draft, its job gone, and it can be sent again.
  const later = await draft(org, segmentId);
  await sendBroadcast(t.db, org.id, later, inAnHour);
  await cancelBroadcast(t.db, org.id, later);
  row = await broadcastRow(later);
  assert.equal(row.status, 'draft');
  assert.equal(row.scheduled_at, null);
  jobs = await fanOutJobs(later);
  assert.equal(jobs.length, 0);
  await sendBroadcast(t.db, org.id, later, inAnHour);
  assert.equal((await broadcastRow(later)).status, 'scheduled');
});

test('a segment deleted before the broadcast is due: the broadcast fails and sends nothing', async () => {
  const { segmentId } = await segmentOf(org.id, 3);
  const id = await draft(org, segmentId);
  await sendBroadcast(t.db, org.id, id, new Date(Date.now() + 3_600_000));
  await t.db.query('DELETE FROM segments WHERE id = $1', [segmentId]);
  assert.deepEqual(await fanOut(context, id), { done: true });
  const row = await broadcastRow(id);
  assert.equal(row.status, 'failed');
  assert.match(row.failure_reason ?? '', /segment .*deleted/);
  assert.deepEqual(await recipientCounts(id), {});
  assert.equal((await copies(id)).length, 0);
  // takeSnapshot on its own (a draft, as the benchmark times it) counts the audience.
  const { segmentId: again } = await segmentOf(org.id, 4);
  const timed = await draft(org, again);
  const outcome = await takeSnapshot(t.db, timed);
  assert.ok(outcome.taken);
  assert.equal(outcome.counts.audience, 4);
  assert.equal(outcome.counts.pending, 4);
});

test('a topic deleted before the broadcast is due: it fails rather than reach every contact; a draft with it is refused', async () => {
  const { segmentId } = await segmentOf(org.id, 3);
  const topicOf = async () =>
    (
      await t.db.query<{ id: string }>(
        `INSERT INTO topics (organization_id, name, default_subscription) VALUES ($1, 'Gone', 'opt_in') RETURNING id`,
        [org.id],
      )
    ).rows[0]!.id;
  const topicId = await topicOf();
  const id = await draft(org, segmentId, { topicId });
  await sendBroadcast(t.db, org.id, id, new Date(Date.now() + 3_600_000));
  await t.db.query('DELETE FROM topics WHERE id = $1', [topicId]);
  assert.deepEqual(await fanOut(context, id), { done: true });
  const row = await broadcastRow(id);
  assert.equal(row.status, 'failed');
  assert.match(row.failure_reason ?? '', /topic .*deleted/);
  assert.equal((await copies(id)).length, 0);

  const other = await topicOf();
  const drafted = await draft(org, segmentId, { topicId: other });
  await t.db.query('DELETE FROM topics WHERE id = $1', [other]);
  await assert.rejects(sendBroadcast(t.db, org.id, drafted, undefined), (error: Error & { field?: string }) => {
    assert.equal(error.name, 'validation_error');
    assert.equal(error.field, 'topic_id');
    return true;
  });
  assert.equal((await broadcastRow(drafted)).status, 'draft');
});

test('the monthly quota running out mid-send pauses the broadcast; resumed with more quota it finishes', async () => {
  const quotaOrg = await createTestOrganization(t.db, t.config, 'bcq');
  await t.db.query('UPDATE organizations SET monthly_quota = 700 WHERE id = $1', [quotaOrg.id]);
  const contacts = 1000;
  const { segmentId } = await segmentOf(quotaOrg.id, contacts);
  const id = await draft(quotaOrg, segmentId);
  await sendBroadcast(t.db, quotaOrg.id, id, undefined);
  assert.deepEqual(await fanOut(context, id), { done: true });
  const row = await broadcastRow(id);
  assert.equal(row.status, 'paused');
  assert.match(row.pause_reason ?? '', /monthly quota/);
  assert.deepEqual(await recipientCounts(id), { queued: 700, pending: 300 });
  const { rows: used } = await t.db.query<{ used: number }>(
    'SELECT sum(recipients)::int AS used FROM monthly_usage WHERE organization_id = $1',
    [quotaOrg.id],
  );
  assert.equal(used[0]!.used, 700, 'each copy is charged');

  await t.db.query('UPDATE organizations SET monthly_quota = 5000 WHERE id = $1', [quotaOrg.id]);
  await resumeBroadcast(t.db, quotaOrg.id, id);
  await fanOutUntilSent(context, id);
  await assertOneCopyEach(id, contacts);
});
