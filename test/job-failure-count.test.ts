// MAILROOM_JOB_MAX_ATTEMPTS counts failed runs in a row: a run that ends without an error (due again
// later, making progress) starts the count again, so errors spread over a long job's life do not end it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { waitFor } from './helpers/wait.ts';
import { enqueueJob } from '../src/queue/jobs.ts';
import { startWorker } from '../src/queue/worker.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp({ MAILROOM_JOB_MAX_ATTEMPTS: '3' });
});
after(() => t?.close());

test('two errors, a run that succeeds, two errors: the job is still running; a third error in a row ends it', async () => {
  const broadcastId = randomUUID();
  await enqueueJob(t.db, { queue: 'broadcast-fan-out', payload: { broadcast_id: broadcastId } });
  // What each run does, in order: throw, or ask to run again (progress made).
  const script = ['fail', 'fail', 'again', 'fail', 'fail', 'again', 'fail', 'fail', 'fail'];
  let runs = 0;
  const silent = { warn: () => {}, error: () => {} };
  const job = async () =>
    (
      await t.db.query<{ id: string; failed_runs: number | null; failed_at: Date | null }>(
        `SELECT id, failed_runs, failed_at FROM jobs WHERE payload ->> 'broadcast_id' = $1`,
        [broadcastId],
      )
    ).rows[0]!;
  const worker = await startWorker(
    t.db,
    {
      'broadcast-fan-out': async () => {
        const step = script[runs++];
        if (step === 'fail') throw new Error(`run ${runs} failed`);
        return { retryAt: new Date(), reason: 'more to do' };
      },
    },
    { concurrency: 1, leaseSeconds: 30, pollIntervalMs: 50, log: silent, maxAttempts: t.config.jobMaxAttempts },
  );
  try {
    while (runs < script.length) {
      const before = runs;
      // Back-offs (2 s, 4 s) are brought forward rather than waited for.
      await t.db.query('UPDATE jobs SET run_at = now() WHERE id = $1 AND failed_at IS NULL', [(await job()).id]);
      worker.poke();
      await waitFor(() => runs > before, 10_000);
      if (runs === 6) {
        // After fail, fail, again, fail, fail, again: never three in a row, so not failed.
        await waitFor(async () => (await job()).failed_runs === null);
        assert.equal((await job()).failed_at, null);
      }
    }
    await waitFor(async () => (await job()).failed_at !== null, 10_000);
    assert.equal((await job()).failed_runs, 3);
    assert.equal(runs, 9);
  } finally {
    await worker.stop();
  }
});
