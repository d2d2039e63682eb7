// Retention: a finished message's content goes after MAILROOM_RETENTION_DAYS (captured .eml included),
// its metadata after MAILROOM_METADATA_RETENTION_DAYS; idempotency keys after 24 h; settled webhook
// deliveries and jobs failed for good after the metadata period. Messages not finished are never touched. Pruning works in
// batches, two pruners at once share the work, and the space freed is reused by new rows.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { access, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { capturedMessagePath } from '../src/delivery/transports/capture.ts';
import { ConfigError, loadConfig } from '../src/platform/config.ts';
import type { Database } from '../src/platform/db/database.ts';
import { pruneAll, type PruneOptions } from '../src/retention/prune.ts';
import { startRetention } from '../src/retention/start-retention.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { message, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';

let t: TestApp;
let org: TestOrganization;
let dataDir: string;
let delivery: TestDelivery;
let options: PruneOptions;

before(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-retention-'));
  t = await buildTestApp({ MAILROOM_TRANSPORT: 'capture', MAILROOM_DATA_DIR: dataDir });
  org = await createTestOrganization(t.db, t.config, 'keep');
  delivery = await startTestDelivery(t);
  options = { retentionDays: 30, metadataRetentionDays: 90, dataDir };
});
after(async () => {
  await delivery.stop();
  await t.close();
  await rm(dataDir, { recursive: true, force: true });
});

const read = (url: string) => t.app.inject({ method: 'GET', url, headers: bearer(org.fullKey) });
const status = async (id: string) =>
  (await t.db.query<{ status: string }>('SELECT status FROM emails WHERE id = $1', [id])).rows[0]?.status;
const count = async (table: string, emailId: string) =>
  (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE email_id = $1`, [emailId])).rows[0]!
    .n;
const fileExists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

/** Moves a message's acceptance and sending `days` into the past. */
const age = (ids: string[], days: number) =>
  t.db.query(
    `UPDATE emails SET created_at = created_at - make_interval(days => $2),
                       sent_at = sent_at - make_interval(days => $2),
                       scheduled_at = scheduled_at - make_interval(days => $2)
      WHERE id = ANY($1::uuid[])`,
    [ids, days],
  );

async function sendDelivered(extra: Record<string, unknown> = {}): Promise<string> {
  const res = await send(t.app, org.fullKey, message(org, extra));
  assert.equal(res.statusCode, 200, res.body);
  const id = res.json().id as string;
  await waitFor(async () => (await status(id)) === 'sent');
  return id;
}

const attachment = { filename: 'invoice.pdf', content: Buffer.from('%PDF-1.4 personal').toString('base64') };

test('after MAILROOM_RETENTION_DAYS a sent message loses its content, attachments and .eml; GET says so', async () => {
  const id = await sendDelivered({
    html: '<p>Hello Ann</p>',
    headers: { 'X-Customer': 'Ann' },
    attachments: [attachment],
  });
  await t.db.query(`UPDATE emails SET template = '{"id": "tpl", "variables": {"name": "Ann"}}' WHERE id = $1`, [id]);
  const eml = capturedMessagePath(dataDir, id);
  assert.ok(await fileExists(eml), 'the capture transport stored the message');
  const events = await count('email_events', id);
  const attachmentId = (await read(`/emails/${id}/attachments`)).json().data[0].id as string;
  assert.equal('body_pruned_at' in (await read(`/emails/${id}`)).json(), false, 'absent while kept');

  await age([id], 29);
  assert.equal((await pruneAll(t.db, options)).bodies, 0, 'not before its period');
  assert.equal((await read(`/emails/${id}`)).json().html, '<p>Hello Ann</p>');

  await age([id], 2);
  assert.equal((await pruneAll(t.db, options)).bodies, 1);
  const email = (await read(`/emails/${id}`)).json();
  assert.match(email.body_pruned_at, /^\d{4}-\d\d-\d\dT/);
  assert.equal(email.html, null);
  assert.equal(email.text, null);
  assert.equal(email.headers, null);
  assert.deepEqual(email.attachments, []);
  assert.deepEqual(email.template, { id: 'tpl' });
  assert.equal(email.subject, 'Hi', 'metadata stays');
  assert.deepEqual(email.to, ['someone@example.com']);
  assert.equal(email.last_event, 'delivered');
  assert.equal(await count('email_attachments', id), 0);
  assert.equal(await count('email_events', id), events, 'the timeline stays');
  assert.equal(await count('email_recipients', id), 1);
  assert.equal(await fileExists(eml), false, 'the captured .eml is deleted');

  for (const url of [`/emails/${id}/attachments`, `/emails/${id}/attachments/${attachmentId}`]) {
    const res = await read(url);
    assert.equal(res.statusCode, 404, url);
    assert.equal(res.json().name, 'not_found');
    assert.match(res.json().message, /deleted on .* retention period/);
  }
  assert.equal((await pruneAll(t.db, options)).bodies, 0, 'pruned once');
});

test('queued, scheduled and sending messages are never pruned, however old; a canceled one is', async () => {
  const scheduled = await send(t.app, org.fullKey, message(org, { scheduled_at: new Date(Date.now() + 86_400_000) }));
  const scheduledId = scheduled.json().id as string;
  const toCancel = (
    await send(t.app, org.fullKey, message(org, { scheduled_at: new Date(Date.now() + 86_400_000) }))
  ).json().id as string;
  assert.equal(
    (await t.app.inject({ method: 'POST', url: `/emails/${toCancel}/cancel`, headers: bearer(org.fullKey) }))
      .statusCode,
    200,
  );
  // Two messages held in the states a worker holds them in (their jobs are done, so no worker moves them).
  const queued = await sendDelivered();
  const sending = await sendDelivered();
  await t.db.query(`UPDATE emails SET status = 'queued', sent_at = NULL WHERE id = $1`, [queued]);
  await t.db.query(`UPDATE emails SET status = 'sending' WHERE id = $1`, [sending]);
  await age([scheduledId, toCancel, queued, sending], 400);

  await pruneAll(t.db, options);
  for (const id of [scheduledId, queued, sending]) {
    const { rows } = await t.db.query<{ text: string | null; body_pruned_at: Date | null }>(
      'SELECT text, body_pruned_at FROM emails WHERE id = $1',
      [id],
    );
    assert.equal(rows[0]?.text, 'Hello', `${id} keeps its content`);
    assert.equal(rows[0]?.body_pruned_at, null);
  }
  assert.equal(await status(toCancel), undefined, 'the canceled message went, content then metadata');
});

test('after MAILROOM_METADATA_RETENTION_DAYS the message goes with its recipients, attachments and timeline', async () => {
  const young = await sendDelivered({ attachments: [attachment] });
  const old = await sendDelivered({ attachments: [attachment], to: ['a@example.com', 'b@example.com'] });
  await age([young], 89);
  await age([old], 91);
  const counts = await pruneAll(t.db, options);
  assert.equal(counts.bodies, 2, 'content first, in the same round');
  assert.equal(counts.messages, 1);
  assert.equal(await status(old), undefined);
  for (const table of ['email_recipients', 'email_attachments', 'email_events']) {
    assert.equal(await count(table, old), 0, table);
  }
  assert.equal((await read(`/emails/${old}`)).statusCode, 404);
  assert.equal(await status(young), 'sent', 'the younger one keeps its metadata');
  assert.equal((await count('email_events', young)) > 0, true);
});

test('idempotency keys go after their 24 hours; a newer one stays and still replays', async () => {
  const first = await send(t.app, org.fullKey, message(org), { 'idempotency-key': 'old-key' });
  const second = await send(t.app, org.fullKey, message(org), { 'idempotency-key': 'new-key' });
  await t.db.query(
    `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE organization_id = $1 AND key = 'old-key'`,
    [org.id],
  );
  await t.db.query(
    `UPDATE idempotency_keys SET created_at = now() - interval '23 hours' WHERE organization_id = $1 AND key = 'new-key'`,
    [org.id],
  );
  assert.equal((await pruneAll(t.db, options)).idempotencyKeys, 1);
  const { rows } = await t.db.query<{ key: string }>('SELECT key FROM idempotency_keys WHERE organization_id = $1', [
    org.id,
  ]);
  assert.deepEqual(
    rows.map((row) => row.key),
    ['new-key'],
  );
  const again = await send(t.app, org.fullKey, message(org), { 'idempotency-key': 'new-key' });
  assert.equal(again.json().id, second.json().id);
  const fresh = await send(t.app, org.fullKey, message(org), { 'idempotency-key': 'old-key' });
  assert.notEqual(fresh.json().id, first.json().id, 'a pruned key is new again');
});

test('settled webhook deliveries and their attempts go after the metadata period; pending ones stay', async () => {
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO webhook_endpoints (organization_id, url, signing_secret, enabled)
     VALUES ($1, 'https://hooks.example.com/', 'whsec_x', false) RETURNING id`,
    [org.id],
  );
  const endpoint = rows[0]!.id;
  const deliveries: Record<string, string> = {};
  for (const [name, status, days] of [
    ['oldSucceeded', 'succeeded', 91],
    ['oldFailed', 'failed', 91],
    ['oldPending', 'pending', 91],
    ['recentSucceeded', 'succeeded', 89],
  ] as const) {
    const inserted = await t.db.query<{ id: string }>(
      `INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type, payload, status, attempts, created_at)
       VALUES ($1, $2, gen_random_uuid(), 'email.sent', '{}', $3, 1, now() - make_interval(days => $4)) RETURNING id`,
      [org.id, endpoint, status, days],
    );
    deliveries[name] = inserted.rows[0]!.id;
    await t.db.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, request_id, status_code, duration_ms)
       VALUES ($1, 1, gen_random_uuid(), 200, 5)`,
      [deliveries[name]],
    );
  }
  assert.equal((await pruneAll(t.db, options)).webhookDeliveries, 2);
  const left = await t.db.query<{ id: string }>('SELECT id FROM webhook_deliveries WHERE endpoint_id = $1', [endpoint]);
  assert.deepEqual(left.rows.map((row) => row.id).sort(), [deliveries.oldPending, deliveries.recentSucceeded].sort());
  const attempts = await t.db.query<{ delivery_id: string }>(
    'SELECT delivery_id FROM webhook_attempts WHERE delivery_id = ANY($1::uuid[])',
    [Object.values(deliveries)],
  );
  assert.deepEqual(
    attempts.rows.map((row) => row.delivery_id).sort(),
    [deliveries.oldPending, deliveries.recentSucceeded].sort(),
  );
});

/** `n` sent messages of the organization, each with an attachment, sent `days` ago, inserted directly. */
async function insertSent(organizationId: string, n: number, days: number, html = 'x'.repeat(200)) {
  await t.db.query(
    `WITH inserted AS (
       INSERT INTO emails (id, organization_id, "from", "to", subject, html, message_id, status, recipient_count,
                           created_at, sent_at)
       SELECT gen_random_uuid(), $1, 'a@example.test', '["b@example.com"]', 'Bulk', $4, 'bulk-' || g || '@example.test',
              'sent', 1, now() - make_interval(days => $3), now() - make_interval(days => $3)
         FROM generate_series(1, $2) g
       RETURNING id
     ),
     recipients AS (INSERT INTO email_recipients (email_id, address, kind, status) SELECT id, 'b@example.com', 'to', 'delivered' FROM inserted)
     INSERT INTO email_attachments (email_id, position, filename, content_type, content)
     SELECT id, 0, 'a.bin', 'application/octet-stream', '\\x00010203'::bytea FROM inserted`,
    [organizationId, n, days, html],
  );
}

/** The database seam, counting the statements whose text contains `marker`. */
function counting(db: Database, marker: string): { db: Database; count(): number } {
  let n = 0;
  const tally = (text: string) => {
    if (text.includes(marker)) n += 1;
  };
  return {
    db: {
      ...db,
      kind: db.kind,
      query: (text, params) => (tally(text), db.query(text, params)),
      transaction: (fn) =>
        db.transaction((tx) => fn({ ...tx, query: (text, params) => (tally(text), tx.query(text, params)) })),
    } as Database,
    count: () => n,
  };
}

test('2,500 messages are pruned in batches of 1,000, content then metadata, all of them', async () => {
  const bulk = await createTestOrganization(t.db, t.config, 'bulk');
  await insertSent(bulk.id, 2500, 100);
  const bodies = counting(t.db, 'FOR NO KEY UPDATE SKIP LOCKED');
  const counts = await pruneAll(bodies.db, { ...options, batchSize: 1000 });
  assert.equal(counts.bodies, 2500);
  assert.equal(counts.messages, 2500);
  assert.equal(bodies.count(), 3, 'content: batches of 1000, 1000, then 500 (short: done)');
  const left = await t.db.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM emails WHERE organization_id = $1)
          + (SELECT count(*) FROM email_recipients r JOIN emails e ON e.id = r.email_id WHERE e.organization_id = $1) AS n`,
    [bulk.id],
  );
  assert.equal(Number(left.rows[0]!.n), 0);
  const orphans = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM email_attachments a WHERE NOT EXISTS (SELECT 1 FROM emails e WHERE e.id = a.email_id)',
  );
  assert.equal(orphans.rows[0]!.n, 0);
});

test('two pruners at once share the work: every row pruned once, none left', async () => {
  const bulk = await createTestOrganization(t.db, t.config, 'twice');
  await insertSent(bulk.id, 2500, 40);
  const [a, b] = await Promise.all([
    pruneAll(t.db, { ...options, batchSize: 300 }),
    pruneAll(t.db, { ...options, batchSize: 300 }),
  ]);
  assert.equal(a.bodies + b.bodies, 2500);
  const { rows } = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM emails WHERE organization_id = $1 AND body_pruned_at IS NULL',
    [bulk.id],
  );
  assert.equal(rows[0]!.n, 0);
});

test('space freed by pruning is reused by new messages, not only marked', async () => {
  const bulk = await createTestOrganization(t.db, t.config, 'space');
  const size = async () =>
    Number(
      (
        await t.db.query<{ bytes: string }>(
          "SELECT pg_total_relation_size('emails') + pg_total_relation_size('email_attachments') AS bytes",
        )
      ).rows[0]!.bytes,
    );
  // About 64 KB of html that compresses poorly, per message, stored out of line (TOAST).
  const bulky = `SELECT string_agg(md5(random()::text || i), '') FROM generate_series(1, 2000) i`;
  const insertBulky = () =>
    t.db.query(
      `INSERT INTO emails (id, organization_id, "from", "to", subject, html, message_id, status, recipient_count,
                           created_at, sent_at)
       SELECT gen_random_uuid(), $1, 'a@example.test', '["b@example.com"]', 'Bulky', (${bulky} WHERE g > 0),
              'bulky-' || g || '@example.test', 'sent', 1, now() - interval '40 days', now() - interval '40 days'
         FROM generate_series(1, 150) g`,
      [bulk.id],
    );
  const empty = await size();
  await insertBulky();
  const full = await size();
  assert.ok(full - empty > 5_000_000, `150 bulky messages take room (${full - empty} bytes)`);
  assert.equal((await pruneAll(t.db, options)).bodies, 150);
  // PGlite has no autovacuum, so the pruner vacuums there itself; on PostgreSQL autovacuum does it.
  if (t.db.kind === 'postgres') await t.db.query('VACUUM emails, email_attachments');
  await insertBulky();
  const again = await size();
  assert.ok(
    again - full < (full - empty) * 0.15,
    `the second 150 reuse the first's space: grew ${again - full} bytes after ${full - empty}`,
  );
});

test('the pruner runs on its own in the worker and stops cleanly', async () => {
  const id = await sendDelivered();
  await age([id], 31);
  const retention = startRetention(
    t.db,
    { ...t.config, retentionDays: 30, metadataRetentionDays: 90 },
    {
      info: () => {},
      error: () => {},
    },
    { firstDelayMs: 0 },
  );
  try {
    await waitFor(
      async () =>
        (await t.db.query('SELECT 1 FROM emails WHERE id = $1 AND body_pruned_at IS NOT NULL', [id])).rowCount === 1,
    );
  } finally {
    await retention.stop();
  }
});

test('the metadata period cannot be shorter than the content period', () => {
  assert.throws(
    () => loadConfig({ MAILROOM_RETENTION_DAYS: '60', MAILROOM_METADATA_RETENTION_DAYS: '30' }),
    (error: unknown) => error instanceof ConfigError && error.variable === 'MAILROOM_METADATA_RETENTION_DAYS',
  );
  const same = loadConfig({ MAILROOM_RETENTION_DAYS: '60', MAILROOM_METADATA_RETENTION_DAYS: '60' });
  assert.equal(same.metadataRetentionDays, 60);
  const defaults = loadConfig({});
  assert.deepEqual([defaults.retentionDays, defaults.metadataRetentionDays], [30, 90]);
});

test("the overview's hourly counts go after the metadata period; this month's stay", async () => {
  await t.db.query(
    `INSERT INTO email_event_counts (organization_id, hour, type, shard, count)
     VALUES ($1, date_trunc('hour', now() - interval '91 days'), 'delivered', 0, 5),
            ($1, date_trunc('hour', now() - interval '89 days'), 'delivered', 0, 7),
            ($1, date_trunc('hour', now()), 'bounced', 1, 2)
     ON CONFLICT DO NOTHING`,
    [org.id],
  );
  const before = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM email_event_counts WHERE organization_id = $1',
    [org.id],
  );
  assert.ok((await pruneAll(t.db, options)).eventCounts >= 1);
  const { rows } = await t.db.query<{ age: number }>(
    `SELECT floor(extract(epoch FROM now() - hour) / 86400)::int AS age FROM email_event_counts
      WHERE organization_id = $1 ORDER BY hour`,
    [org.id],
  );
  assert.equal(rows.length, before.rows[0]!.n - 1);
  assert.ok(
    rows.every((row) => row.age < 90),
    JSON.stringify(rows),
  );
  assert.ok(rows.some((row) => row.age >= 89));
});

test('jobs failed for good go after the metadata period; a newer failed job and a live one stay', async () => {
  await t.db.query(
    `INSERT INTO jobs (queue, payload, run_at, failed_at, last_error)
     VALUES ('contact-import', '{"import_id":"old-failure"}', 'infinity', now() - interval '91 days', 'not a CSV file'),
            ('contact-import', '{"import_id":"new-failure"}', 'infinity', now() - interval '89 days', 'not a CSV file'),
            ('contact-import', '{"import_id":"live"}', now() + interval '1 hour', NULL, NULL)`,
  );
  assert.equal((await pruneAll(t.db, options)).failedJobs, 1);
  const { rows } = await t.db.query<{ id: string }>(
    `SELECT payload ->> 'import_id' AS id FROM jobs WHERE queue = 'contact-import' ORDER BY id`,
  );
  assert.deepEqual(
    rows.map((row) => row.id),
    ['live', 'new-failure'],
  );
  await t.db.query(`DELETE FROM jobs WHERE queue = 'contact-import'`);
});

test('automation runs go after the metadata period once finished; events after the content period, unless a running run reads them', async () => {
  const { rows: automations } = await t.db.query<{ id: string }>(
    `INSERT INTO automations (organization_id, name, status, trigger_event) VALUES ($1, 'kept', 'enabled', 'signup')
     RETURNING id`,
    [org.id],
  );
  const automationId = automations[0]!.id;
  await t.db.query(
    `INSERT INTO automation_versions (automation_id, version, steps, connections) VALUES ($1, 1, '[]', '[]')`,
    [automationId],
  );
  const event = async (label: string, daysAgo: number) => {
    const { rows } = await t.db.query<{ id: string }>(
      `INSERT INTO received_events (organization_id, name, email, payload, received_at)
       VALUES ($1, 'signup', $2, '{}', now() - make_interval(days => $3)) RETURNING id`,
      [org.id, `${label}@example.com`, daysAgo],
    );
    return rows[0]!.id;
  };
  const run = async (eventId: string, status: string, completedDaysAgo: number | null) => {
    await t.db.query(
      `INSERT INTO automation_runs (organization_id, automation_id, version, event_id, contact_id, contact_email, status,
              completed_at)
       VALUES ($1, $2, 1, $3, gen_random_uuid(), 'someone@example.com', $4,
               CASE WHEN $5::int IS NULL THEN NULL ELSE now() - make_interval(days => $5::int) END)`,
      [org.id, automationId, eventId, status, completedDaysAgo],
    );
  };
  const oldFinished = await event('old-finished', 100);
  const oldRunning = await event('old-running', 100);
  const recent = await event('recent', 10);
  await run(oldFinished, 'completed', 91);
  await run(oldRunning, 'running', null);
  await run(recent, 'cancelled', 89);

  const counts = await pruneAll(t.db, options);
  assert.equal(counts.automationRuns, 1);
  assert.equal(counts.receivedEvents, 1);
  const { rows: events } = await t.db.query<{ email: string }>(
    'SELECT email FROM received_events WHERE organization_id = $1 ORDER BY email',
    [org.id],
  );
  assert.deepEqual(
    events.map((row) => row.email),
    ['old-running@example.com', 'recent@example.com'],
  );
  const { rows: runs } = await t.db.query<{ status: string }>(
    'SELECT status FROM automation_runs WHERE automation_id = $1 ORDER BY status',
    [automationId],
  );
  assert.deepEqual(
    runs.map((row) => row.status),
    ['cancelled', 'running'],
  );
  await t.db.query('DELETE FROM automations WHERE id = $1', [automationId]);
});
