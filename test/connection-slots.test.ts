// The transports' limit on connections to one destination at once, and on how long a message waits for one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { CONNECTIONS_PER_DOMAIN, ConnectionSlots, NoFreeSlot } from '../src/delivery/transports/connection-slots.ts';

test('a burst to one domain holds at most the limit at once; another domain is not held up by it', async () => {
  const slots = new ConnectionSlots();
  const running = new Map<string, number>();
  const most = new Map<string, number>();
  const order: string[] = [];
  const task = (domain: string, label: string) => async () => {
    running.set(domain, (running.get(domain) ?? 0) + 1);
    most.set(domain, Math.max(most.get(domain) ?? 0, running.get(domain)!));
    await sleep(10);
    running.set(domain, running.get(domain)! - 1);
    order.push(label);
    return label;
  };
  const busy = Array.from({ length: 3 * CONNECTIONS_PER_DOMAIN }, (_, i) =>
    slots.run('busy.example', task('busy.example', `busy${i}`)),
  );
  const quiet = await slots.run('quiet.example', task('quiet.example', 'quiet'));
  assert.equal(quiet, 'quiet');
  assert.deepEqual(
    await Promise.all(busy),
    Array.from({ length: 3 * CONNECTIONS_PER_DOMAIN }, (_, i) => `busy${i}`),
  );
  assert.equal(most.get('busy.example'), CONNECTIONS_PER_DOMAIN);
  assert.equal(most.get('quiet.example'), 1);
  // The other domain ran beside the first wave, not after the queue of 60 (an order, not a duration: the
  // first wave's timers were set before its own, the second wave's after it finished).
  assert.ok(order.indexOf('quiet') < CONNECTIONS_PER_DOMAIN + 1, `quiet finished at ${order.indexOf('quiet')}`);
});

test('a task that fails frees its slot', async () => {
  const slots = new ConnectionSlots(1);
  await assert.rejects(
    slots.run('a.example', async () => {
      throw new Error('no route');
    }),
    /no route/,
  );
  assert.equal(await slots.run('a.example', async () => 'next'), 'next');
});

test('a message that finds no free connection in time is not sent: NoFreeSlot, and the queue moves on', async () => {
  const slots = new ConnectionSlots(1, 50);
  let release!: () => void;
  const holding = slots.run('busy.example', () => new Promise<string>((resolve) => (release = () => resolve('first'))));
  let ran = false;
  const error = await slots
    .run('busy.example', async () => {
      ran = true;
    })
    .catch((e: unknown) => e);
  assert.ok(error instanceof NoFreeSlot);
  assert.match((error as Error).message, /^4\.4\.5 .*busy\.example/);
  assert.equal(ran, false);
  release();
  assert.equal(await holding, 'first');
  // The slot is free again, and the timed-out waiter took nothing with it.
  assert.equal(await slots.run('busy.example', async () => 'next'), 'next');
});
