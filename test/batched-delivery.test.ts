// Batched bookkeeping on the delivery path: messages taken, outcomes recorded and jobs deleted a batch
// per transaction (platform/db/batcher.ts), with the rules of one message kept inside a batch.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Batcher } from '../src/platform/db/batcher.ts';
import { workerBatchSize } from '../src/platform/metrics.ts';
import { startTestDelivery, startRelayTestBed, type RelayTestBed, type TestDelivery } from './helpers/delivery.ts';
import { openTestDatabase, type TestDatabase } from './helpers/database.ts';
import { message, sendBatch, setLimits } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';

let data: TestDatabase;

before(async () => {
  data = await openTestDatabase({ migrated: false });
  await data.db.query('CREATE TABLE batched (n integer PRIMARY KEY CHECK (n >= 0))');
});
after(() => data.close());

/** A writer inserting its numbers, recording how many items each written batch held. */
function numberWriter(batches: number[]) {
  return new Batcher<number, number>(data.db, {
    maxSize: 10,
    async run(tx, items) {
      await tx.query('INSERT INTO batched (n) SELECT unnest($1::int[])', [items]);
      return items.map((n) => n * 2);
    },
    done: (items) => batches.push(items),
  });
}

test('writes that arrive together are written together, up to the batch size, each answered', async () => {
  const batches: number[] = [];
  const writer = numberWriter(batches);
  const numbers = Array.from({ length: 25 }, (_, i) => 100 + i);
  const answers = await Promise.all(numbers.map((n) => writer.add(n)));
  assert.deepEqual(
    answers,
    numbers.map((n) => n * 2),
  );
  assert.deepEqual(batches, [10, 10, 5]);
  const { rows } = await data.db.query<{ n: number }>('SELECT count(*)::int AS n FROM batched WHERE n >= 100');
  assert.equal(rows[0]!.n, 25);
});

test('an item the database refuses fails alone: its neighbours are written again without it', async () => {
  const batches: number[] = [];
  const writer = numberWriter(batches);
  const settled = await Promise.allSettled([200, 201, -1, 203].map((n) => writer.add(n)));
  assert.deepEqual(
    settled.map((s) => s.status),
    ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
  );
  assert.match(String((settled[2] as PromiseRejectedResult).reason), /check constraint/);
  const { rows } = await data.db.query<{ n: number }>('SELECT n FROM batched WHERE n >= 200 ORDER BY n');
  assert.deepEqual(
    rows.map((r) => r.n),
    [200, 201, 203],
  );
  // The failed batch of four, then each alone.
  assert.deepEqual(batches, [1, 1, 1]);
});

test('a write after a quiet spell goes at once, as a batch of one', async () => {
  const batches: number[] = [];
  const writer = numberWriter(batches);
  assert.equal(await writer.add(300), 600);
  assert.equal(await writer.add(301), 602);
  assert.deepEqual(batches, [1, 1]);
});

let bed: RelayTestBed;
let second: TestDelivery;

test('a burst through two workers: every recipient gets one copy, every outcome and count is recorded once', async (t) => {
  bed = await startRelayTestBed('burst');
  t.after(async () => {
    await second?.stop();
    await bed.close();
  });
  second = await startTestDelivery(bed.t);
  await setLimits(bed.t.db, bed.org.id, { rateLimit: 100_000, monthlyQuota: 1_000_000 });
  // A different refused address each time: the first bounce of an address suppresses it for later messages.
  for (let n = 0; n < 300; n += 10)
    bed.sink.replyToRecipient(`gone${n}@example.com`, { code: 550, message: '5.1.1 No such user' });

  // 300 messages: most to one recipient, every tenth also to an address the sink refuses.
  const ids: string[] = [];
  for (let round = 0; round < 3; round += 1) {
    const entries = Array.from({ length: 100 }, (_, i) => {
      const n = round * 100 + i;
      const to = n % 10 === 0 ? [`r${n}@example.com`, `gone${n}@example.com`] : `r${n}@example.com`;
      return message(bed.org, { to });
    });
    const answer = await sendBatch(bed.t.app, bed.org.fullKey, entries);
    assert.equal(answer.statusCode, 200, answer.body);
    ids.push(...(answer.json() as { data: Array<{ id: string }> }).data.map((d) => d.id));
  }

  const unfinished = async () => {
    const { rows } = await bed.t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM emails WHERE id = ANY($1::uuid[]) AND status <> 'sent'`,
      [ids],
    );
    return rows[0]!.n;
  };
  await waitFor(async () => (await unfinished()) === 0, 60_000, 100);

  // One copy per delivered recipient, none twice.
  const received = bed.sink.transactions.flatMap((tx) => tx.rcptTo.filter((a) => !a.startsWith('gone')));
  assert.equal(received.length, 300);
  assert.equal(new Set(received).size, 300);

  const outcomes = await bed.t.db.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM email_recipients WHERE email_id = ANY($1::uuid[]) GROUP BY status ORDER BY status`,
    [ids],
  );
  assert.deepEqual(
    outcomes.rows.map((r) => [r.status, r.n]),
    [
      ['bounced', 30],
      ['delivered', 300],
    ],
  );
  const entries = await bed.t.db.query<{ type: string; n: number }>(
    `SELECT type, count(*)::int AS n FROM email_events
      WHERE email_id = ANY($1::uuid[]) AND type IN ('delivered', 'bounced') GROUP BY type ORDER BY type`,
    [ids],
  );
  assert.deepEqual(
    entries.rows.map((r) => [r.type, r.n]),
    [
      ['bounced', 30],
      ['delivered', 300],
    ],
  );
  const counted = await bed.t.db.query<{ type: string; n: number }>(
    `SELECT type, sum(count)::int AS n FROM email_event_counts WHERE organization_id = $1 GROUP BY type ORDER BY type`,
    [bed.org.id],
  );
  assert.deepEqual(
    counted.rows.map((r) => [r.type, r.n]),
    [
      ['bounced', 30],
      ['delivered', 300],
    ],
  );
  const suppressed = await bed.t.db.query(
    `SELECT 1 FROM suppressions WHERE organization_id = $1 AND address LIKE 'gone%'`,
    [bed.org.id],
  );
  assert.equal(suppressed.rowCount, 30);
  await waitFor(async () => {
    const { rows } = await bed.t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM jobs WHERE queue = 'deliver-email'`,
    );
    return rows[0]!.n === 0;
  });

  // The burst was claimed, taken and recorded in batches: some batch of each kind held more than one
  // item. (Its jobs were settled by the statements that recorded their outcomes: no separate batch.)
  const values = (await workerBatchSize.get()).values;
  for (const batch of ['claim-jobs', 'take-messages', 'record-outcomes']) {
    const find = (name: string) => values.find((v) => v.metricName === name && v.labels.batch === batch)?.value ?? 0;
    const [batches, items] = [find('mailroom_worker_batch_items_count'), find('mailroom_worker_batch_items_sum')];
    assert.ok(items >= 300 && batches < items, `${batch}: ${items} items in ${batches} batches`);
  }
});
