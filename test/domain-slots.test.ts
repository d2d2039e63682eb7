// The mx transport's limit on connections to one recipient domain at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { CONNECTIONS_PER_DOMAIN, DomainSlots } from '../src/delivery/transports/domain-slots.ts';

test('a burst to one domain holds at most the limit at once; another domain is not held up by it', async () => {
  const slots = new DomainSlots();
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
  const started = Date.now();
  const quiet = await slots.run('quiet.example', task('quiet.example', 'quiet'));
  const quietTook = Date.now() - started;
  assert.equal(quiet, 'quiet');
  assert.deepEqual(
    await Promise.all(busy),
    Array.from({ length: 3 * CONNECTIONS_PER_DOMAIN }, (_, i) => `busy${i}`),
  );
  assert.equal(most.get('busy.example'), CONNECTIONS_PER_DOMAIN);
  assert.equal(most.get('quiet.example'), 1);
  // The other domain ran beside the first wave, not after the queue of 60.
  assert.ok(order.indexOf('quiet') < CONNECTIONS_PER_DOMAIN + 1, `quiet finished at ${order.indexOf('quiet')}`);
  assert.ok(quietTook < 1000);
});

test('a task that fails frees its slot', async () => {
  const slots = new DomainSlots(1);
  await assert.rejects(
    slots.run('a.example', async () => {
      throw new Error('no route');
    }),
    /no route/,
  );
  assert.equal(await slots.run('a.example', async () => 'next'), 'next');
});
