// Group commit on the accept path: concurrent sends are written together, each answered after the
// commit that holds it, with the rules of a single send kept inside a group (quota in order,
// all-or-nothing, idempotency), and a request the database refuses failing alone. Rate-limit takes are
// coalesced the same way, and shared in order.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { acceptGroupSize } from '../src/platform/metrics.ts';
import { commitAcceptance, type Acceptance } from '../src/emails/group-commit.ts';
import { prepareMessage, type PreparedMessage } from '../src/emails/prepare-message.ts';
import { takeRateTokens } from '../src/emails/sending-limits.ts';
import type { EmailMessage } from '../src/emails/message-schema.ts';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { counts, message, send, sendBatch, setLimits } from './helpers/emails.ts';
import { onPostgres } from './helpers/database.ts';

let t: TestApp;
let org: TestOrganization;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'group');
  await setLimits(t.db, org.id, { rateLimit: 100_000, monthlyQuota: 1_000_000 });
});
after(() => t.close());

async function groupStats(): Promise<{ commits: number; requests: number }> {
  const values = (await acceptGroupSize.get()).values;
  const find = (name: string) => values.find((v) => v.metricName === name)?.value ?? 0;
  return {
    commits: find('mailroom_accept_group_requests_count'),
    requests: find('mailroom_accept_group_requests_sum'),
  };
}

/** Everything an accepted message must have once committed: recipients, its timeline entry, its job. */
async function stored(id: string) {
  const { rows } = await t.db.query<{ recipients: number; accepted: number; jobs: number }>(
    `SELECT (SELECT count(*)::int FROM email_recipients WHERE email_id = $1) AS recipients,
            (SELECT count(*)::int FROM email_events WHERE email_id = $1 AND type = 'accepted') AS accepted,
            (SELECT count(*)::int FROM jobs WHERE payload ->> 'email_id' = $1::text) AS jobs
       FROM emails WHERE id = $1`,
    [id],
  );
  return rows[0];
}

const prepare = (extra: Record<string, unknown> = {}): Promise<PreparedMessage> =>
  prepareMessage(t.db, t.config, org.id, message(org, extra) as unknown as EmailMessage, new Date());

function acceptance(messages: PreparedMessage[], extra: Partial<Acceptance> = {}): Acceptance {
  return {
    organizationId: org.id,
    messages,
    allOrNothing: true,
    idempotency: undefined,
    resultOf: (accepted) => ({ accepted }),
    ...extra,
  };
}

test('concurrent sends are written by fewer commits than requests, and each is stored whole', async () => {
  const before = await groupStats();
  const answers = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      i % 4 === 3
        ? sendBatch(t.app, org.fullKey, [
            message(org, { to: `b${i}a@example.com` }),
            message(org, { to: `b${i}b@example.com`, cc: `c${i}@example.com` }),
          ])
        : send(t.app, org.fullKey, message(org, { to: `s${i}@example.com`, tags: [{ name: 'n', value: `v${i}` }] })),
    ),
  );
  const ids = answers.flatMap((res) => {
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    return Array.isArray(body.data) ? body.data.map((entry: { id: string }) => entry.id) : [body.id];
  });
  assert.equal(ids.length, 50);
  for (const id of ids) {
    const row = await stored(id);
    assert.ok(row, `message ${id} is stored`);
    assert.ok(row.recipients >= 1);
    assert.equal(row.accepted, 1);
    assert.equal(row.jobs, 1);
  }
  const after = await groupStats();
  assert.equal(after.requests - before.requests, 40);
  assert.ok(after.commits - before.commits < 40, `${after.commits - before.commits} commits for 40 requests`);
  // What a group wrote reads back as a single send writes it.
  const one = await t.app.inject({
    method: 'GET',
    url: `/emails/${ids[0]}`,
    headers: { authorization: `Bearer ${org.fullKey}` },
  });
  assert.equal(one.statusCode, 200);
  assert.deepEqual(one.json().tags, [{ name: 'n', value: 'v0' }]);
  assert.equal(one.json().last_event, 'queued');
});

test('a group charges the quota in its own statement: the first group of a month makes the usage rows, later groups add exactly their recipients', async () => {
  const fresh = await createTestOrganization(t.db, t.config, 'group-quota');
  await setLimits(t.db, fresh.id, { rateLimit: 100_000, monthlyQuota: 1_000_000 });
  const sendMany = (n: number) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        send(
          t.app,
          fresh.fullKey,
          message(fresh, { to: i % 2 ? ['a@example.com', 'b@example.com'] : 'c@example.com' }),
        ),
      ),
    );
  for (const res of await sendMany(10)) assert.equal(res.statusCode, 200, res.body);
  const shards = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM monthly_usage WHERE organization_id = $1',
    [fresh.id],
  );
  assert.equal(shards.rows[0]!.n, 16);
  assert.deepEqual(await counts(t.db, fresh.id), { emails: 10, charged: 15 });
  for (const res of await sendMany(30)) assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(await counts(t.db, fresh.id), { emails: 40, charged: 60 });
});

test('a request the database refuses fails alone: its neighbours in the group are stored', async () => {
  const [first, good, alsoGood] = await Promise.all([prepare(), prepare(), prepare()]);
  const bad = { ...(await prepare()), domainId: randomUUID() }; // no such domain: a foreign-key refusal
  const results = await Promise.allSettled([
    commitAcceptance(t.db, acceptance([first!])), // written at once; the others gather meanwhile
    commitAcceptance(t.db, acceptance([good!])),
    commitAcceptance(t.db, acceptance([bad])),
    commitAcceptance(t.db, acceptance([alsoGood!])),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
  );
  assert.equal((results[2] as PromiseRejectedResult).reason.code, '23503');
  for (const m of [first!, good!, alsoGood!]) assert.ok(await stored(m.id));
  assert.equal(await stored(bad.id), undefined);
});

test('in one group the quota is taken in order: an all-or-nothing request that does not fit leaves room for the next', async () => {
  const { charged } = await counts(t.db, org.id);
  await setLimits(t.db, org.id, { monthlyQuota: charged + 3 });
  try {
    const twoOfThree = [await prepare({ to: ['q1@example.com', 'q2@example.com'] }), await prepare()];
    const tooBig = [await prepare({ to: ['q3@example.com', 'q4@example.com'] })];
    const fits = [await prepare()];
    const permissive = [await prepare(), await prepare()];
    const accepted = await Promise.all([
      commitAcceptance(t.db, acceptance(twoOfThree)), // 3 recipients: all the quota
      commitAcceptance(t.db, acceptance(tooBig)),
      commitAcceptance(t.db, acceptance(fits)),
      commitAcceptance(t.db, acceptance(permissive, { allOrNothing: false })),
    ]);
    assert.deepEqual(accepted, [2, 0, 0, 0]);
    assert.equal((await counts(t.db, org.id)).charged, charged + 3);
  } finally {
    await setLimits(t.db, org.id, { rateLimit: 100_000, monthlyQuota: 1_000_000 });
  }
  const charged2 = (await counts(t.db, org.id)).charged;
  await setLimits(t.db, org.id, { monthlyQuota: charged2 + 2 });
  try {
    const accepted = await Promise.all([
      commitAcceptance(t.db, acceptance([await prepare()])),
      commitAcceptance(t.db, acceptance([await prepare({ to: ['r1@example.com', 'r2@example.com'] })])),
      commitAcceptance(t.db, acceptance([await prepare(), await prepare()], { allOrNothing: false })),
    ]);
    // One recipient, then a two-recipient message that no longer fits, then one of the permissive pair.
    assert.deepEqual(accepted, [1, 0, 1]);
    assert.equal((await counts(t.db, org.id)).charged, charged2 + 2);
  } finally {
    await setLimits(t.db, org.id, { rateLimit: 100_000, monthlyQuota: 1_000_000 });
  }
});

test('idempotent sends in one group each remember their own answer', async () => {
  const keys = Array.from({ length: 10 }, () => randomUUID());
  const first = await Promise.all(
    keys.map((key, i) =>
      send(t.app, org.fullKey, message(org, { to: `i${i}@example.com` }), { 'idempotency-key': key }),
    ),
  );
  const again = await Promise.all(
    keys.map((key, i) =>
      send(t.app, org.fullKey, message(org, { to: `i${i}@example.com` }), { 'idempotency-key': key }),
    ),
  );
  for (const [i, res] of again.entries()) {
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.headers['idempotent-replayed'], 'true');
    assert.equal(res.json().id, first[i]!.json().id);
  }
});

// PGlite has one connection: no other session can hold a lock there.
if (onPostgres) {
  test('a group that waits on a lock held elsewhere gives up after the lock timeout: 503, then sends flow again', async () => {
    await send(t.app, org.fullKey, message(org)); // this month's usage rows exist
    const { rows } = await t.db.query<{ db: string }>('SELECT current_database() AS db');
    const url = new URL(process.env.DATABASE_URL!);
    url.pathname = `/${rows[0]!.db}`;
    const other = new pg.Client({ connectionString: url.toString() });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM monthly_usage WHERE organization_id = $1 FOR UPDATE', [org.id]);
      const started = Date.now();
      const res = await send(t.app, org.fullKey, message(org, { to: 'locked@example.com' }));
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(res.json().name, 'service_unavailable');
      assert.ok(Date.now() - started < 15_000, `answered after ${Date.now() - started} ms`);
      await other.query('ROLLBACK');
      const after = await send(t.app, org.fullKey, message(org, { to: 'unlocked@example.com' }));
      assert.equal(after.statusCode, 200, after.body);
    } finally {
      await other.end();
    }
  });
}

test('concurrent takes of the rate limit are shared in order: exactly the limit is granted, never more', async () => {
  await setLimits(t.db, org.id, { rateLimit: 10, monthlyQuota: 1_000_000 });
  try {
    const takes = await Promise.all(Array.from({ length: 30 }, () => takeRateTokens(t.db, org.id, 1)));
    assert.equal(
      takes.reduce((sum, take) => sum + take.granted, 0),
      10,
    );
    // In the order asked: the first ten got one each.
    assert.deepEqual(
      takes.map((take) => take.granted),
      [...Array(10).fill(1), ...Array(20).fill(0)],
    );
    // A batch that wants more than is left gets what is left; the next gets nothing.
    await setLimits(t.db, org.id, { rateLimit: 5, monthlyQuota: 1_000_000 });
    const [big, small] = await Promise.all([takeRateTokens(t.db, org.id, 4), takeRateTokens(t.db, org.id, 3)]);
    assert.deepEqual([big!.granted, small!.granted], [4, 1]);
  } finally {
    await setLimits(t.db, org.id, { rateLimit: 100_000, monthlyQuota: 1_000_000 });
  }
});
