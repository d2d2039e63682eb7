// The batcher: work that arrives while a batch is in flight is done together by the next one, one batch
// at a time; each item gets its own result, and a failed batch is run again item by item so only the
// item at fault fails.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Batcher } from '../src/platform/db/batcher.ts';
import { openTestDatabase, type TestDatabase } from './helpers/database.ts';

let database: TestDatabase;
before(async () => {
  database = await openTestDatabase();
});
after(async () => {
  await database.close();
});

function countingBatcher() {
  let inFlight = 0;
  let most = 0;
  const batches: number[][] = [];
  const batcher = new Batcher<number, number>(database.db, {
    maxSize: 100,
    async run(tx, items) {
      inFlight += 1;
      most = Math.max(most, inFlight);
      batches.push(items);
      // A statement in the batch's transaction, and time for more items to come in meanwhile.
      const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM unnest($1::int[])', [items]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      inFlight -= 1;
      if (items.includes(13)) throw new Error('13 is refused');
      assert.equal(rows[0]!.n, items.length);
      return items.map((item) => item * 2);
    },
  });
  return { batcher, batches, most: () => most };
}

test('one batch in flight at a time, each item its own result, the item at fault alone fails', async () => {
  const { batcher, batches, most } = countingBatcher();
  const results: Array<Promise<number>> = [];
  for (let wave = 0; wave < 5; wave++) {
    for (let i = 0; i < 6; i++) results.push(batcher.add(wave * 6 + i));
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const settled = await Promise.allSettled(results);
  settled.forEach((outcome, i) => {
    if (i === 13) assert.equal(outcome.status, 'rejected', 'the item at fault fails');
    else assert.deepEqual(outcome, { status: 'fulfilled', value: i * 2 }, `item ${i}`);
  });
  assert.equal(most(), 1);
  assert.ok(batches.length < 30, `${batches.length} batches for 30 items`);
});
