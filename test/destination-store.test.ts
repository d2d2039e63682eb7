// The shared state of destination sites in the database: connection slots that hold across processes
// (two pools stand for two processes on PostgreSQL), leases that run out when their holder stops renewing
// them, the message-rate bucket, and sender holds. Time is the caller's clock, injected here.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openTestDatabase, secondConnection, type TestDatabase } from './helpers/database.ts';
import type { Database } from '../src/platform/db/database.ts';
import {
  holdSender,
  releaseSlot,
  renewSlots,
  senderHoldsAt,
  siteState,
  takeToken,
  takeSlot,
  updateSite,
} from '../src/shaping/destination-store.ts';

let t: TestDatabase;
let other: { db: Database; close(): Promise<void> };
before(async () => {
  t = await openTestDatabase();
  other = await secondConnection(t.db);
});
after(async () => {
  await other.close();
  await t.close();
});

const at = (seconds: number) => new Date(Date.UTC(2026, 10, 25, 12, 0, seconds));
const LEASE = 15_000;

test('connection slots: never more than the limit across two processes, renewed, and a dead holder’s run out', async () => {
  const key = { source: 'default', site: 'google' };
  await siteState(t.db, key, { connectionLimit: 3, messageRate: undefined }, at(0));
  const a = randomUUID();
  const b = randomUUID();
  const taken = await Promise.all([
    takeSlot(t.db, key, a, LEASE, at(0)),
    takeSlot(other.db, key, b, LEASE, at(0)),
    takeSlot(t.db, key, a, LEASE, at(0)),
    takeSlot(other.db, key, b, LEASE, at(0)),
    takeSlot(other.db, key, b, LEASE, at(0)),
  ]);
  const granted = taken.filter((slot) => slot !== undefined).sort();
  assert.deepEqual(granted, [1, 2, 3]);

  // A renews at 10 s; B (dead) does not: at 16 s, B's slots are free again and A's are not.
  const renewed = await renewSlots(t.db, a, LEASE, at(10));
  assert.ok(renewed.every((slot) => slot.connectionLimit === 3 && slot.site === 'google'));
  const heldByA = renewed.length;
  const later = [];
  for (let i = 0; i < 4; i++) later.push(await takeSlot(t.db, key, randomUUID(), LEASE, at(16)));
  assert.equal(later.filter((slot) => slot !== undefined).length, 3 - heldByA);

  // A slot given back is free at once.
  const mine = renewed[0]!.slot;
  await releaseSlot(t.db, key, mine, a);
  assert.equal(await takeSlot(t.db, key, randomUUID(), LEASE, at(17)), mine);
});

test('a lowered limit: slots above it are not handed out, and the holder learns the new limit on renewal', async () => {
  const key = { source: 'default', site: 'mx:a.example,b.example' };
  const limits = { connectionLimit: 4, messageRate: undefined };
  const holder = randomUUID();
  await siteState(t.db, key, limits, at(0));
  for (let i = 0; i < 4; i++) assert.ok(await takeSlot(t.db, key, holder, LEASE, at(0)));
  await updateSite(t.db, key, limits, at(1), (state) => ({ ...state, connectionLimit: 2 }));
  const renewed = await renewSlots(t.db, holder, LEASE, at(2));
  assert.deepEqual(renewed.map((slot) => [slot.slot, slot.connectionLimit]).sort(), [
    [1, 2],
    [2, 2],
    [3, 2],
    [4, 2],
  ]);
  await releaseSlot(t.db, key, 1, holder);
  await releaseSlot(t.db, key, 3, holder);
  // Slot 3 is free but above the limit of 2; slot 1 is handed out, then nothing.
  assert.equal(await takeSlot(t.db, key, randomUUID(), LEASE, at(3)), 1);
  assert.equal(await takeSlot(t.db, key, randomUUID(), LEASE, at(3)), undefined);
});

test('the message-rate bucket: paced at the rate, shared by two processes, no limit without a rate', async () => {
  const key = { source: 'default', site: 'yahoo' };
  // 60 a minute, paced at 98% of it: one every 1.02 s, never two at once.
  await siteState(t.db, key, { connectionLimit: 5, messageRate: 60 }, at(0));
  const first = await takeToken(t.db, key, 'message', at(0));
  assert.deepEqual(first, { taken: true, waitMs: 0 }); // the bucket starts with one
  const second = await takeToken(other.db, key, 'message', at(0));
  assert.deepEqual(second, { taken: false, waitMs: 1021 });
  // 30 s later it holds one (its size), no more: a quiet spell gives no burst.
  let taken = 0;
  for (let i = 0; i < 4; i++) if ((await takeToken(i % 2 ? other.db : t.db, key, 'message', at(30))).taken) taken += 1;
  assert.equal(taken, 1);
  // A sender that takes one the moment it is there, for a minute: 58 or 59 (98% of 60), never 60.
  let inMinute = 0;
  for (let ms = 31_000; ms < 91_000;) {
    const { taken, waitMs } = await takeToken(t.db, key, 'message', new Date(at(0).getTime() + ms));
    if (taken) inMinute += 1;
    ms += taken ? 1 : waitMs;
  }
  assert.ok(inMinute >= 58 && inMinute <= 59, `${inMinute} in a minute`);

  const free = { source: 'default', site: 'free.example' };
  await siteState(t.db, free, { connectionLimit: 5, messageRate: undefined }, at(0));
  for (let i = 0; i < 5; i++)
    assert.deepEqual(await takeToken(t.db, free, 'message', at(0)), { taken: true, waitMs: 0 });

  // New connections have a bucket of their own: 6 a minute, one every 10 s.
  const slow = { source: 'default', site: 'slow.example' };
  await siteState(t.db, slow, { connectionLimit: 5, messageRate: undefined, connectionRate: 6 }, at(0));
  assert.deepEqual(await takeToken(t.db, slow, 'connection', at(0)), { taken: true, waitMs: 0 });
  assert.deepEqual(await takeToken(t.db, slow, 'connection', at(4)), { taken: false, waitMs: 6205 });
  assert.deepEqual(await takeToken(t.db, slow, 'message', at(4)), { taken: true, waitMs: 0 });
  assert.deepEqual(await takeToken(t.db, slow, 'connection', at(11)), { taken: true, waitMs: 0 });
});

test('messages waiting for the pace book their turns ahead, one apart, never more than the rate', async () => {
  const key = { source: 'default', site: 'booked.example' };
  // 60 a minute (one every 1.02 s at 98%), booked up to 3 s ahead, by two processes in turn.
  await siteState(t.db, key, { connectionLimit: 5, messageRate: 60 }, at(0));
  const takes = [];
  for (let i = 0; i < 5; i++) takes.push(await takeToken(i % 2 ? other.db : t.db, key, 'message', at(0), 3000));
  assert.deepEqual(takes, [
    { taken: true, waitMs: 0 },
    { taken: true, waitMs: 1021 },
    { taken: true, waitMs: 2041 },
    // The next turn is 3.06 s off: not booked; asked again when it is within 3 s.
    { taken: false, waitMs: 62 },
    { taken: false, waitMs: 62 },
  ]);
  // A second later the turns go on where the booked ones end, not from now.
  assert.deepEqual(await takeToken(t.db, key, 'message', at(1), 3000), { taken: true, waitMs: 2062 });
  // Over a minute of a sender booking every turn it can: the turns booked fall within 58 or 59 a minute.
  const turns: number[] = [];
  for (let ms = 1_000; ms < 120_000; ms += 250) {
    const take = await takeToken(t.db, key, 'message', new Date(at(0).getTime() + ms), 3000);
    if (take.taken) turns.push(ms + take.waitMs);
  }
  for (const start of turns) {
    const inMinute = turns.filter((turn) => turn >= start && turn < start + 60_000).length;
    assert.ok(inMinute <= 59, `${inMinute} turns in the minute from ${start} ms`);
  }
  assert.ok(turns.length >= 114, `${turns.length} turns in 119 s`);

  // Without a clock of its own, the bucket counts in the database's time: one clock for every process.
  const byDatabase = { source: 'default', site: 'database-clock.example' };
  await siteState(t.db, byDatabase, { connectionLimit: 5, messageRate: 60 }, new Date());
  assert.deepEqual(await takeToken(t.db, byDatabase, 'message', undefined, 3000), { taken: true, waitMs: 0 });
  const next = await takeToken(other.db, byDatabase, 'message', undefined, 3000);
  assert.ok(next.taken && next.waitMs > 900 && next.waitMs <= 1021, JSON.stringify(next));
});

test('changes to a site apply one after the other, and replies are kept', async () => {
  const key = { source: 'default', site: 'microsoft' };
  const limits = { connectionLimit: 5, messageRate: undefined };
  await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      updateSite(i % 2 ? other.db : t.db, key, limits, at(i), (state) => ({
        ...state,
        successes: state.successes + 1,
      })),
    ),
  );
  const state = await updateSite(t.db, key, limits, at(9), () => undefined, {
    code: 451,
    text: '451 4.7.650 The mail server [203.0.113.9] has been temporarily rate limited due to IP reputation.',
    throttle: true,
  });
  assert.equal(state.successes, 8);
  const { rows } = await t.db.query<{ throttle_replies: string; last_reply_code: number }>(
    `SELECT throttle_replies, last_reply_code FROM destination_sites WHERE site = 'microsoft'`,
  );
  assert.deepEqual([Number(rows[0]!.throttle_replies), rows[0]!.last_reply_code], [1, 451]);
});

test('a sender hold: only that sending domain at that site, until its time; a later hold stands', async () => {
  await holdSender(t.db, 'google', 'broken.example', at(600), '550 5.7.26 Unauthenticated email');
  await holdSender(t.db, 'google', 'broken.example', at(300), '550 5.7.26 again');
  assert.deepEqual((await senderHoldsAt(t.db, 'google', at(10))).get('broken.example')?.pausedUntil, at(600));
  assert.equal((await senderHoldsAt(t.db, 'google', at(10))).get('fine.example'), undefined);
  assert.equal((await senderHoldsAt(t.db, 'yahoo', at(10))).get('broken.example'), undefined);
  assert.equal((await senderHoldsAt(t.db, 'google', at(601))).get('broken.example'), undefined);
});
