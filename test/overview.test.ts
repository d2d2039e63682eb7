// GET /overview: the quota as sending charges it, the rate limit, and outcomes counted per hour and per
// day from the timeline as the delivery worker and the tracking routes record it; another
// organization's outcomes never count.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { counts, message, send, setLimits } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';
import { migrateBefore, openTestDatabase } from './helpers/database.ts';
import { migrate } from '../src/platform/db/migrate.ts';

const KINDS = ['delivered', 'bounced', 'complained', 'failed', 'opened', 'clicked'] as const;
type Kind = (typeof KINDS)[number];
interface Bucket extends Record<Kind, number> {
  start: string;
}
interface Overview {
  object: string;
  quota: { monthly_limit: number; used: number; remaining: number; period_start: string; period_end: string };
  rate_limit: { per_second: number };
  hourly: Bucket[];
  daily: Bucket[];
}

let t: TestApp;
let delivery: TestDelivery;
let dataDir: string;
let a: TestOrganization;
let b: TestOrganization;

before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'mailroom-overview-'));
  t = await buildTestApp({ MAILROOM_TRANSPORT: 'capture', MAILROOM_DATA_DIR: dataDir });
  delivery = await startTestDelivery(t);
  a = await createTestOrganization(t.db, t.config, 'a');
  b = await createTestOrganization(t.db, t.config, 'b');
});
after(async () => {
  await delivery.stop();
  await t.close();
  await rm(dataDir, { recursive: true, force: true });
});

async function overview(token: string): Promise<Overview> {
  const res = await t.app.inject({ method: 'GET', url: '/overview', headers: bearer(token) });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

const total = (buckets: Bucket[], kind: Kind) => buckets.reduce((sum, bucket) => sum + bucket[kind], 0);

async function settled(emailId: string): Promise<void> {
  await waitFor(async () => {
    const { rows } = await t.db.query<{ status: string }>('SELECT status FROM emails WHERE id = $1', [emailId]);
    return rows[0]?.status === 'sent';
  }, 15_000);
}

test('an organization with nothing sent: every bucket zero, 24 hours and 30 days ending now', async () => {
  const before = Date.now();
  const body = await overview(a.session);
  assert.equal(body.object, 'overview');
  assert.equal(body.hourly.length, 24);
  assert.equal(body.daily.length, 30);
  for (const bucket of [...body.hourly, ...body.daily]) {
    assert.deepEqual(Object.keys(bucket).sort(), ['start', ...KINDS].sort());
    for (const kind of KINDS) assert.equal(bucket[kind], 0);
  }
  const hour = 3_600_000;
  const day = 24 * hour;
  const lastHour = Date.parse(body.hourly.at(-1)!.start);
  const today = Date.parse(body.daily.at(-1)!.start);
  assert.ok(lastHour <= Date.now() && lastHour > before - hour && lastHour % hour === 0, body.hourly.at(-1)!.start);
  assert.ok(today <= Date.now() && today > before - day && today % day === 0, body.daily.at(-1)!.start);
  body.hourly.forEach((bucket, i) => assert.equal(Date.parse(bucket.start), lastHour - (23 - i) * hour));
  body.daily.forEach((bucket, i) => assert.equal(Date.parse(bucket.start), today - (29 - i) * day));

  const now = new Date();
  assert.deepEqual(body.quota, {
    monthly_limit: body.quota.monthly_limit,
    used: 0,
    remaining: body.quota.monthly_limit,
    period_start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString(),
    period_end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString(),
  });
  const org = await t.app.inject({ method: 'GET', url: '/organization', headers: bearer(a.fullKey) });
  assert.equal(body.quota.monthly_limit, org.json().monthly_quota);
  assert.deepEqual(body.rate_limit, { per_second: org.json().rate_limit });
});

test('outcomes recorded by delivery and tracking are counted once each, in the current hour and day', async () => {
  await setLimits(t.db, a.id, { monthlyQuota: 100, rateLimit: 7 });
  // New organizations start with tracking off; opens and clicks are counted here, so it is turned on.
  const tracking = await t.app.inject({
    method: 'PATCH',
    url: '/organization',
    headers: bearer(a.fullKey),
    payload: { open_tracking: true, click_tracking: true },
  });
  assert.equal(tracking.statusCode, 200, tracking.body);
  const suppressed = await t.app.inject({
    method: 'POST',
    url: '/suppressions',
    headers: bearer(a.fullKey),
    payload: { email: 'blocked@example.com' },
  });
  assert.equal(suppressed.statusCode, 201, suppressed.body);

  // Captured (delivered), and Resend's test addresses (delivered, bounced, delivered then complained),
  // whose simulated outcomes the timeline shows but the overview does not count.
  const first = await send(
    t.app,
    a.fullKey,
    message(a, {
      to: ['someone@example.com', 'delivered@resend.dev', 'bounced@resend.dev', 'complained@resend.dev'],
      html: '<p>Hello <a href="https://example.com/x">x</a></p>',
    }),
  );
  assert.equal(first.statusCode, 200, first.body);
  const second = await send(t.app, a.fullKey, message(a, { to: 'blocked@example.com' }));
  assert.equal(second.statusCode, 200, second.body);
  // Another organization's outcomes never count in a's overview.
  const others = await send(
    t.app,
    b.fullKey,
    message(b, { to: ['other@example.com', 'delivered@resend.dev', 'bounced@resend.dev'] }),
  );
  assert.equal(others.statusCode, 200, others.body);
  for (const res of [first, second, others]) await settled(res.json().id);

  // Two opens and two clicks of the same recipient and link: each counted once, as the timeline keeps them.
  const emailId = first.json().id as string;
  const open = t.app.signer.sign('open', { e: emailId, r: 'someone@example.com' });
  const click = t.app.signer.sign('click', { e: emailId, r: 'someone@example.com', u: 'https://example.com/x' });
  for (let i = 0; i < 2; i++) {
    assert.equal((await t.app.inject({ method: 'GET', url: `/t/o/${open}` })).statusCode, 200);
    assert.equal((await t.app.inject({ method: 'GET', url: `/t/c/${click}` })).statusCode, 302);
  }

  const body = await overview(a.fullKey);
  const expected = { delivered: 1, bounced: 0, complained: 0, failed: 1, opened: 1, clicked: 1 };
  for (const kind of KINDS) {
    assert.equal(total(body.hourly, kind), expected[kind], `hourly ${kind}`);
    assert.equal(total(body.daily, kind), expected[kind], `daily ${kind}`);
  }
  // The same numbers the timeline holds, less the test addresses' entries, which it keeps.
  const { rows } = await t.db.query<{ type: Kind; n: number; tests: number }>(
    `SELECT type, count(*) FILTER (WHERE recipient NOT LIKE '%@resend.dev')::int AS n,
            count(*) FILTER (WHERE recipient LIKE '%@resend.dev')::int AS tests
       FROM email_events WHERE organization_id = $1 GROUP BY type`,
    [a.id],
  );
  for (const kind of KINDS) assert.equal(rows.find((row) => row.type === kind)?.n ?? 0, expected[kind], kind);
  const tests = Object.fromEntries(rows.map((row) => [row.type, row.tests]));
  assert.deepEqual([tests.delivered, tests.bounced, tests.complained], [2, 1, 1]);

  // The quota is what sending charged: one per recipient (4 + 1), against the limit it enforces.
  assert.equal((await counts(t.db, a.id)).charged, 5);
  assert.equal(body.quota.used, 5);
  assert.equal(body.quota.monthly_limit, 100);
  assert.equal(body.quota.remaining, 95);
  assert.deepEqual(body.rate_limit, { per_second: 7 });

  const theirs = await overview(b.session);
  assert.equal(total(theirs.daily, 'delivered'), 1);
  assert.equal(total(theirs.daily, 'bounced'), 0);
  assert.equal(theirs.quota.used, 3, 'test recipients are charged like any');
});

test('a quota used up reads remaining 0, and sending refuses as the overview says', async () => {
  await setLimits(t.db, a.id, { monthlyQuota: 5 });
  const body = await overview(a.fullKey);
  assert.equal(body.quota.remaining, 0);
  const refused = await send(t.app, a.fullKey, message(a));
  assert.equal(refused.statusCode, 429, refused.body);
  assert.equal(refused.json().name, 'monthly_quota_exceeded');
  assert.equal((await overview(a.fullKey)).quota.used, 5, 'a refused message costs nothing');
});

test('hours fall in their hourly and daily buckets; older than 30 days counts nowhere', async () => {
  const c = await createTestOrganization(t.db, t.config, 'c');
  const { rows } = await t.db.query<{ hour: Date }>(`SELECT date_trunc('hour', now(), 'UTC') AS hour`);
  const currentHour = rows[0]!.hour.getTime();
  const hour = 3_600_000;
  const put = (hoursAgo: number, type: Kind, shard: number, count: number) =>
    t.db.query(
      'INSERT INTO email_event_counts (organization_id, hour, type, shard, count) VALUES ($1, $2, $3, $4, $5)',
      [c.id, new Date(currentHour - hoursAgo * hour), type, shard, count],
    );
  await put(3, 'delivered', 0, 2);
  await put(3, 'delivered', 5, 3); // shards of one hour add up
  await put(23, 'failed', 1, 1); // the oldest hourly bucket
  await put(24, 'failed', 1, 10); // just before it: daily only
  await put(40, 'bounced', 2, 4);
  await put(31 * 24, 'clicked', 0, 9); // past the 30 days

  const body = await overview(c.fullKey);
  assert.equal(body.hourly[20]!.delivered, 5);
  assert.equal(body.hourly[0]!.failed, 1);
  assert.equal(total(body.hourly, 'delivered'), 5);
  assert.equal(total(body.hourly, 'failed'), 1);
  assert.equal(total(body.hourly, 'bounced'), 0);
  const dayOf = (hoursAgo: number) =>
    body.daily.findIndex((bucket) => {
      const start = Date.parse(bucket.start);
      const at = currentHour - hoursAgo * hour;
      return start <= at && at < start + 24 * hour;
    });
  assert.equal(body.daily[dayOf(3)]!.delivered, 5);
  assert.equal(body.daily[dayOf(40)]!.bounced, 4);
  assert.equal(total(body.daily, 'failed'), 11);
  assert.equal(total(body.daily, 'clicked'), 0);
  assert.equal(dayOf(31 * 24), -1);
});

test('a sending_access key may not read the overview', async () => {
  const res = await t.app.inject({ method: 'GET', url: '/overview', headers: bearer(a.sendingKey) });
  assert.equal(res.statusCode, 401);
  assert.equal(res.json().name, 'restricted_api_key');
});

test('upgrading counts the outcomes the timeline already holds', async () => {
  const { db, close } = await openTestDatabase({ migrated: false });
  try {
    // The database as it was before 0012, with a timeline in it.
    await migrateBefore(db, 12);
    const org = (
      await db.query<{ id: string }>(
        "INSERT INTO organizations (name, monthly_quota, rate_limit) VALUES ('o', 100, 10) RETURNING id",
      )
    ).rows[0]!.id;
    const email = (
      await db.query<{ id: string }>(
        `INSERT INTO emails (id, organization_id, "from", "to", subject, message_id, status, recipient_count)
         VALUES (gen_random_uuid(), $1, 'a@example.test', '["b@example.com"]', 's', '<m@example.test>', 'sent', 1)
         RETURNING id`,
        [org],
      )
    ).rows[0]!.id;
    for (const [type, recipient, at] of [
      ['accepted', null, '2026-03-01T10:05:00Z'],
      ['delivered', 'b@example.com', '2026-03-01T10:06:00Z'],
      ['opened', 'b@example.com', '2026-03-01T10:59:59Z'],
      ['opened', 'c@example.com', '2026-03-01T11:00:00Z'],
      ['delivery_delayed', 'c@example.com', '2026-03-01T11:00:00Z'],
    ]) {
      await db.query(
        `INSERT INTO email_events (id, email_id, organization_id, type, recipient, created_at)
         VALUES (gen_random_uuid(), $1, $2, $3, $4, $5)`,
        [email, org, type, recipient, at],
      );
    }
    await migrate(db);
    const { rows } = await db.query<{ hour: Date; type: string; count: number }>(
      'SELECT hour, type, sum(count)::int AS count FROM email_event_counts WHERE organization_id = $1 GROUP BY 1, 2 ORDER BY 1, 2',
      [org],
    );
    assert.deepEqual(
      rows.map((row) => [row.hour.toISOString(), row.type, row.count]),
      [
        ['2026-03-01T10:00:00.000Z', 'delivered', 1],
        ['2026-03-01T10:00:00.000Z', 'opened', 1],
        ['2026-03-01T11:00:00.000Z', 'opened', 1],
      ],
    );
  } finally {
    await close();
  }
});

test("upgrading takes the test addresses' outcomes of the last 30 days out of the counts", async () => {
  const { db, close } = await openTestDatabase({ migrated: false });
  try {
    // The database as it was before 0038: test addresses' outcomes counted with the others.
    await migrateBefore(db, 38);
    const org = (
      await db.query<{ id: string }>(
        "INSERT INTO organizations (name, monthly_quota, rate_limit) VALUES ('o', 100, 10) RETURNING id",
      )
    ).rows[0]!.id;
    const email = (
      await db.query<{ id: string }>(
        `INSERT INTO emails (id, organization_id, "from", "to", subject, message_id, status, recipient_count)
         VALUES (gen_random_uuid(), $1, 'a@example.test', '["b@example.com"]', 's', '<m@example.test>', 'sent', 4)
         RETURNING id`,
        [org],
      )
    ).rows[0]!.id;
    const { rows: now } = await db.query<{ hour: Date }>(`SELECT date_trunc('hour', now(), 'UTC') AS hour`);
    const recent = new Date(now[0]!.hour.getTime() - 2 * 86_400_000);
    const old = new Date(now[0]!.hour.getTime() - 40 * 86_400_000);
    for (const [type, recipient, at] of [
      ['delivered', 'b@example.com', recent],
      ['delivered', 'complained@resend.dev', recent],
      ['complained', 'complained@resend.dev', recent],
      ['bounced', 'Bounced+x@Resend.dev', recent],
      ['delivered', 'delivered@resend.dev', old],
    ] as const) {
      await db.query(
        `INSERT INTO email_events (id, email_id, organization_id, type, recipient, created_at)
         VALUES (gen_random_uuid(), $1, $2, $3, $4, $5)`,
        [email, org, type, recipient, at],
      );
    }
    // As counted then: an hour's count spread over shards.
    for (const [at, type, shard, count] of [
      [recent, 'delivered', 0, 1],
      [recent, 'delivered', 3, 1],
      [recent, 'complained', 5, 1],
      [recent, 'bounced', 2, 1],
      [old, 'delivered', 0, 1],
    ] as const) {
      await db.query(
        'INSERT INTO email_event_counts (organization_id, hour, type, shard, count) VALUES ($1, $2, $3, $4, $5)',
        [org, at, type, shard, count],
      );
    }
    await migrate(db);
    const { rows } = await db.query<{ hour: Date; type: string; count: number }>(
      'SELECT hour, type, sum(count)::int AS count FROM email_event_counts WHERE organization_id = $1 GROUP BY 1, 2 ORDER BY 1, 2',
      [org],
    );
    // The real delivery stays; the old count (read by nothing now) is left as it was.
    assert.deepEqual(
      rows.map((row) => [row.hour.toISOString(), row.type, row.count]),
      [
        [old.toISOString(), 'delivered', 1],
        [recent.toISOString(), 'bounced', 0],
        [recent.toISOString(), 'complained', 0],
        [recent.toISOString(), 'delivered', 1],
      ],
    );
  } finally {
    await close();
  }
});
