// The grouped worker (jobs run per group, a webhook endpoint's deliveries): one owner per group at a
// time, so a group's limit holds across workers on separate connections; each job runs once; a dead
// owner's group is taken over when its ownership runs out, a live owner's is not; a change to a group
// makes its owner read the jobs it holds again; a worker with no room for more groups gives each its turn.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Queryable } from '../src/platform/db/database.ts';
import { startGroupedWorker, type GroupedJobHandler } from '../src/queue/grouped-worker.ts';
import { enqueueJobs, groupChanged } from '../src/queue/jobs.ts';
import type { Worker } from '../src/queue/worker.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { secondConnection } from './helpers/database.ts';
import { waitFor } from './helpers/wait.ts';

const QUEUE = 'deliver-webhook';
const log = { error: () => {}, warn: () => {} };
let t: TestApp;

before(async () => {
  t = await buildTestApp({});
});
after(async () => {
  await t.close();
});

/**
 * Handlers (one per worker) that record, per group, how many of its jobs are in their slot at once across
 * all of them, and which jobs ran.
 */
function recordingHandler(holdMs: number) {
  const inSlot = new Map<string, number>();
  const most = new Map<string, number>();
  const ran: string[] = [];
  const handler: GroupedJobHandler<string> = {
    load: async (_tx: Queryable, jobs) => jobs.map((job) => String(job.payload.delivery_id)),
    async run(job, loaded, slotFree) {
      const group = job.groupKey!;
      inSlot.set(group, (inSlot.get(group) ?? 0) + 1);
      most.set(group, Math.max(most.get(group) ?? 0, inSlot.get(group)!));
      await new Promise((resolve) => setTimeout(resolve, holdMs));
      inSlot.set(group, inSlot.get(group)! - 1);
      slotFree();
      ran.push(loaded);
      return { done: true };
    },
  };
  return { handler, most, ran };
}

const options = { queue: QUEUE, groupLimit: 3, concurrency: 12, jobSeconds: 5, pollIntervalMs: 100, log } as const;

async function addJobs(groups: string[], perGroup: number, tag: string): Promise<string[]> {
  const ids = groups.flatMap((group) => Array.from({ length: perGroup }, (_, i) => `${tag}-${group}-${i}`));
  await t.db.transaction((tx) =>
    enqueueJobs(
      tx,
      ids.map((id) => ({ queue: QUEUE, payload: { delivery_id: id }, groupKey: id.split('-')[1]! })),
    ),
  );
  return ids;
}

test('two workers, six groups with a backlog each: no group ever over its limit, every job run once', async () => {
  const second = await secondConnection(t.db);
  const shared = recordingHandler(20);
  const workers: Worker[] = [];
  try {
    workers.push(await startGroupedWorker(t.db, shared.handler, options));
    workers.push(await startGroupedWorker(second.db, shared.handler, options));
    const groups = ['g1', 'g2', 'g3', 'g4', 'g5', 'g6'];
    const ids = await addJobs(groups, 30, 'two');
    for (const worker of workers) worker.poke();
    await waitFor(() => shared.ran.length >= ids.length, 20_000);
    // Every finished job is deleted, and a group with nothing due is let go (by the workers, still running).
    const left = async () =>
      (await t.db.query("SELECT 1 FROM jobs WHERE queue = $1 AND payload->>'delivery_id' LIKE 'two-%'", [QUEUE]))
        .rowCount;
    const owners = async () => (await t.db.query('SELECT 1 FROM job_group_owners WHERE queue = $1', [QUEUE])).rowCount;
    await waitFor(async () => (await left()) === 0 && (await owners()) === 0, 10_000);
    // Stopped (a stop waits for the jobs in their slots): nothing more can run, so the count is final.
    for (const worker of workers.splice(0)) await worker.stop();
    const ran = shared.ran;
    assert.equal(ran.length, ids.length, 'no job ran twice');
    assert.deepEqual(new Set(ran), new Set(ids));
    for (const group of groups) {
      // A group is one worker's at a time: both workers together never run more than its limit.
      const most = shared.most.get(group) ?? 0;
      assert.ok(most <= 3, `group ${group} had ${most} jobs in their slots`);
    }
  } finally {
    for (const worker of workers) await worker.stop();
    await second.close();
  }
});

test("a live owner's group is left alone; a dead owner's is taken over when its ownership runs out", async () => {
  const recorder = recordingHandler(1);
  await t.db.query(
    `INSERT INTO job_group_owners (queue, group_key, owner, owned_until) VALUES
       ($1, 'live', gen_random_uuid(), now() + interval '1 hour'),
       ($1, 'dead', gen_random_uuid(), now() + interval '1 second')`,
    [QUEUE],
  );
  const ids = await addJobs(['live', 'dead'], 3, 'owned');
  const worker = await startGroupedWorker(t.db, recorder.handler, options);
  try {
    await waitFor(() => recorder.ran.length >= 3, 10_000);
    assert.deepEqual(recorder.ran.sort(), ids.filter((id) => id.includes('-dead-')).sort());
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(recorder.ran.length, 3, "the live owner's jobs are not run by another worker");
  } finally {
    await worker.stop();
    await t.db.query("DELETE FROM jobs WHERE queue = $1 AND payload->>'delivery_id' LIKE 'owned-%'", [QUEUE]);
    await t.db.query('DELETE FROM job_group_owners WHERE queue = $1', [QUEUE]);
  }
});

test('a change to a group: its owner drops the jobs it read before it and reads them again', async () => {
  let version = 'before';
  let loads = 0;
  // Each job as run: what it was read as, and how many reads had been made when it started.
  const ran: Array<{ read: string; loadsBefore: number }> = [];
  const handler: GroupedJobHandler<string> = {
    async load(_tx, jobs) {
      loads += 1;
      return jobs.map(() => version);
    },
    async run(_job, loaded, slotFree) {
      const loadsBefore = loads;
      await new Promise((resolve) => setTimeout(resolve, 20));
      slotFree();
      ran.push({ read: loaded, loadsBefore });
      return { done: true };
    },
  };
  await addJobs(['changing'], 60, 'change');
  const worker = await startGroupedWorker(t.db, handler, { ...options, groupLimit: 1 });
  try {
    await waitFor(() => ran.length >= 3, 10_000);
    version = 'after';
    await groupChanged(t.db, QUEUE, 'changing');
    // A claim that reads after the change has committed saw it (a claim that locked the group's row
    // before would have held the change back until it committed): it gave back what it held, read
    // before. So every job started after such a read runs with what was read after the change.
    const loadsAtChange = loads;
    await waitFor(() => ran.length >= 60, 20_000);
    const afterReread = ran.filter((job) => job.loadsBefore > loadsAtChange);
    assert.ok(afterReread.length > 0, 'the jobs were read again before they ran out');
    assert.deepEqual(
      afterReread.filter((job) => job.read !== 'after'),
      [],
      'a job read before the change ran after the jobs were read again',
    );
  } finally {
    await worker.stop();
  }
});

test('a worker with no room for more groups takes turns: a third busy group starts before the first two finish', async () => {
  const recorder = recordingHandler(20);
  const order: string[] = [];
  const handler: GroupedJobHandler<string> = {
    load: recorder.handler.load,
    async run(job, loaded, slotFree) {
      order.push(job.groupKey!);
      return recorder.handler.run(job, loaded, slotFree);
    },
  };
  const ids = await addJobs(['t1', 't2', 't3'], 25, 'turns');
  // Two slots, one per group: room for two groups; each held for 200 ms at most while others wait.
  const worker = await startGroupedWorker(t.db, handler, {
    ...options,
    groupLimit: 1,
    concurrency: 2,
    sliceMs: 200,
  });
  try {
    await waitFor(() => recorder.ran.length >= ids.length, 20_000);
    const firstOf = (group: string) => order.indexOf(group);
    const lastOf = (group: string) => order.lastIndexOf(group);
    const [first, second, third] = ['t1', 't2', 't3'].sort((a, b) => firstOf(a) - firstOf(b));
    assert.ok(
      firstOf(third!) < lastOf(first!) && firstOf(third!) < lastOf(second!),
      `the third group started at ${firstOf(third!)}, the first two ended at ${lastOf(first!)} and ${lastOf(second!)}`,
    );
    assert.equal(new Set(recorder.ran).size, ids.length, 'each job once');
  } finally {
    await worker.stop();
  }
});
