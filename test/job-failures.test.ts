// Jobs that fail for good: a contact import whose CSV breaks at its header, and one of 2 MB of binary
// data, end `failed` at once through the real worker, their jobs kept as failed, listed (by the function
// `mailroom jobs list --failed` calls), counted (mailroom_jobs_failed_total) and put back by
// `mailroom jobs retry`; a job whose error persists stops after MAILROOM_JOB_MAX_ATTEMPTS runs, with a
// warning per retry and one error at its end. The CLI process lists and retries a failed job.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { waitFor } from './helpers/wait.ts';
import { startContactImports } from '../src/contacts/imports/start-imports.ts';
import { enqueueJob } from '../src/queue/jobs.ts';
import { listFailedJobs, retryFailedJob } from '../src/queue/failures.ts';
import { PermanentJobError, startWorker, type Job, type Worker } from '../src/queue/worker.ts';
import { registry } from '../src/platform/metrics.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { openPGliteDirectory } from '../src/platform/db/pglite.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { databaseForProcesses, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';

/** mailroom_jobs_failed_total of a kind, as a scrape reads it. */
async function failedTotal(kind: string, cause: 'permanent' | 'attempts'): Promise<number> {
  const metric = await registry.getSingleMetric('mailroom_jobs_failed_total')!.get();
  return metric.values.find((value) => value.labels.kind === kind && value.labels.cause === cause)?.value ?? 0;
}

/** A logger that keeps the level and fields of each line. */
function recordingLog() {
  const lines: Array<{ level: 'warn' | 'error'; fields: Record<string, unknown>; message?: string }> = [];
  return {
    lines,
    levels: () => lines.map((line) => line.level),
    warn: (fields: Record<string, unknown>, message?: string) => void lines.push({ level: 'warn', fields, message }),
    error: (fields: Record<string, unknown>, message?: string) => void lines.push({ level: 'error', fields, message }),
    info: () => {},
  };
}

interface JobRow {
  id: string;
  attempts: number;
  failed_runs: number | null;
  failed_at: Date | null;
  last_error: string | null;
  due: boolean;
}

describe('jobs that fail for good', () => {
  let t: TestApp;
  let org: TestOrganization;

  before(async () => {
    t = await buildTestApp({ MAILROOM_JOB_MAX_ATTEMPTS: '3' });
    org = await createTestOrganization(t.db, t.config, 'failures');
  });
  after(async () => {
    await t?.close();
  });

  async function jobNaming(key: string, value: string): Promise<JobRow | undefined> {
    const { rows } = await t.db.query<JobRow>(
      `SELECT id, attempts, failed_runs, failed_at, last_error, run_at <= now() AS due FROM jobs
        WHERE payload ->> '${key}' = $1`,
      [value],
    );
    return rows[0];
  }

  /** POST /contacts/imports with the file; the import's id. */
  async function upload(file: Buffer): Promise<string> {
    const boundary = `----mailroom${randomUUID()}`;
    const body = Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="contacts.csv"\r\n` +
          'Content-Type: text/csv\r\n\r\n',
      ),
      file,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const answer = await t.app.inject({
      method: 'POST',
      url: '/contacts/imports',
      headers: { authorization: `Bearer ${org.fullKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body,
    });
    assert.equal(answer.statusCode, 201, answer.body);
    return answer.json().id;
  }

  async function importView(id: string) {
    const answer = await t.app.inject({
      method: 'GET',
      url: `/contacts/imports/${id}`,
      headers: { authorization: `Bearer ${org.fullKey}` },
    });
    assert.equal(answer.statusCode, 200);
    return answer.json();
  }

  test('a CSV broken at its header and a binary file: each import fails at once with its reason; the job is kept failed, listed, counted, and retried on demand', async () => {
    const log = recordingLog();
    const countedBefore = await failedTotal('contact-import', 'permanent');
    let worker: Worker = await startContactImports(t.db, t.config, log);
    const files = [
      {
        file: Buffer.from('em"ail,first_name\nx@example.org,X\n'),
        reason:
          'row 1 (the header row): a quote inside a field that does not start with one (remove it, or quote the ' +
          'whole field: a quote inside a quoted field is written twice: "5"" screen")',
      },
      {
        file: randomBytes(2 * 1024 * 1024),
        reason: 'not a CSV file: the upload looks like binary data (a spreadsheet? export it as CSV)',
      },
    ];
    const ids: string[] = [];
    try {
      for (const { file, reason } of files) {
        const id = await upload(file);
        ids.push(id);
        // The import records its failure first, then the worker marks its job failed.
        await waitFor(async () => Boolean((await jobNaming('import_id', id))?.failed_at), 10_000);
        const view = await importView(id);
        assert.equal(view.status, 'failed');
        assert.equal(view.failure_reason, reason);
        assert.equal(view.counts.total, 0);
        const job = (await jobNaming('import_id', id))!;
        assert.ok(job, 'the job is kept');
        assert.ok(job.failed_at);
        assert.equal(job.last_error, reason);
        assert.equal(job.failed_runs, 1);
        assert.equal(job.attempts, 1, 'run once: a permanent error is not retried');
        assert.equal(job.due, false);
      }
      assert.equal(await failedTotal('contact-import', 'permanent'), countedBefore + 2);
      // One error line per failure, no warning: nothing was retried.
      assert.deepEqual(log.levels(), ['error', 'error']);
      assert.equal(log.lines[0]!.fields.reason, files[0]!.reason);

      const listed = await listFailedJobs(t.db, { kind: 'contact-import' });
      assert.deepEqual(
        listed.map((job) => job.payload.import_id),
        [...ids].reverse(),
        'the most recent failure first',
      );
      assert.equal(listed[1]!.lastError, files[0]!.reason);
      assert.equal(listed[1]!.failedRuns, 1);
      assert.deepEqual(await listFailedJobs(t.db, { kind: 'deliver-email' }), []);

      // A poke claims nothing: the failed jobs stay as they are.
      worker.poke();
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal((await jobNaming('import_id', ids[0]!))!.attempts, 1);
    } finally {
      await worker.stop();
    }

    // `jobs retry`: due again at once, with a fresh count; the import's failure stands, so the job ends.
    const retried = (await listFailedJobs(t.db, { kind: 'contact-import' })).at(-1)!.id;
    assert.equal(await retryFailedJob(t.db, retried), true);
    assert.equal(await retryFailedJob(t.db, retried), false, 'no longer failed');
    assert.equal(await retryFailedJob(t.db, 987_654_321), false);
    const requeued = (await jobNaming('import_id', ids[0]!))!;
    assert.equal(requeued.failed_at, null);
    assert.equal(requeued.failed_runs, null);
    assert.equal(requeued.due, true);
    worker = await startContactImports(t.db, t.config, log);
    try {
      await waitFor(async () => (await jobNaming('import_id', ids[0]!)) === undefined);
      assert.equal((await importView(ids[0]!)).status, 'failed');
      assert.equal((await listFailedJobs(t.db, { kind: 'contact-import' })).length, 1);
    } finally {
      await worker.stop();
    }
  });

  test('an error that persists stops after MAILROOM_JOB_MAX_ATTEMPTS runs: a warning per retry, one error, the hook once', async () => {
    const log = recordingLog();
    const broadcastId = randomUUID();
    await enqueueJob(t.db, { queue: 'broadcast-fan-out', payload: { broadcast_id: broadcastId } });
    const countedBefore = await failedTotal('broadcast-fan-out', 'attempts');
    let runs = 0;
    const recorded: Array<{ job: Job; reason: string }> = [];
    const worker = await startWorker(
      t.db,
      {
        'broadcast-fan-out': async () => {
          runs += 1;
          throw new Error('the segment table is gone');
        },
      },
      {
        concurrency: 1,
        leaseSeconds: 30,
        pollIntervalMs: 100,
        log,
        maxAttempts: t.config.jobMaxAttempts,
        failed: {
          'broadcast-fan-out': async (tx, job, reason) => {
            // Inside the transaction that marks the job failed.
            const { rows } = await tx.query<{ failed: boolean }>(
              'SELECT failed_at IS NOT NULL AS failed FROM jobs WHERE id = $1',
              [job.id],
            );
            assert.equal(rows[0]!.failed, true);
            recorded.push({ job, reason });
          },
        },
      },
    );
    try {
      assert.equal(t.config.jobMaxAttempts, 3);
      for (let failures = 1; failures < 3; failures++) {
        await waitFor(async () => (await jobNaming('broadcast_id', broadcastId))!.failed_runs === failures);
        const job = (await jobNaming('broadcast_id', broadcastId))!;
        assert.equal(job.failed_at, null);
        assert.equal(job.due, false, 'backing off');
        // The retry (2 s, then 4 s away) is brought forward rather than waited for.
        await t.db.query('UPDATE jobs SET run_at = now() WHERE id = $1', [job.id]);
        worker.poke();
      }
      await waitFor(async () => (await jobNaming('broadcast_id', broadcastId))!.failed_at !== null);
      const job = (await jobNaming('broadcast_id', broadcastId))!;
      assert.equal(job.failed_runs, 3);
      assert.equal(job.last_error, 'stopped after 3 failed attempts: the segment table is gone');
      assert.equal(runs, 3);
      assert.deepEqual(log.levels(), ['warn', 'warn', 'error']);
      assert.deepEqual(
        recorded.map(({ job, reason }) => [job.payload.broadcast_id, reason]),
        [[broadcastId, 'stopped after 3 failed attempts: the segment table is gone']],
      );
      assert.equal(await failedTotal('broadcast-fan-out', 'attempts'), countedBefore + 1);
      // Kept, and never claimed again.
      worker.poke();
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(runs, 3);
    } finally {
      await worker.stop();
    }
  });

  test('a PermanentJobError fails a job at once, whatever the limit, even when its hook fails', async () => {
    const log = recordingLog();
    const broadcastId = randomUUID();
    await enqueueJob(t.db, { queue: 'broadcast-fan-out', payload: { broadcast_id: broadcastId } });
    const worker = await startWorker(
      t.db,
      {
        'broadcast-fan-out': async () => {
          throw new PermanentJobError('the broadcast names a topic that was deleted');
        },
      },
      {
        concurrency: 1,
        leaseSeconds: 30,
        pollIntervalMs: 100,
        log,
        maxAttempts: 100,
        // A hook that fails does not keep the job from failing for good (it would fail again for ever).
        failed: {
          'broadcast-fan-out': async () => {
            throw new Error('no such table: broadcasts');
          },
        },
      },
    );
    try {
      await waitFor(async () => (await jobNaming('broadcast_id', broadcastId))!.failed_at !== null);
      const job = (await jobNaming('broadcast_id', broadcastId))!;
      assert.equal(job.last_error, 'the broadcast names a topic that was deleted');
      assert.equal(job.attempts, 1);
      assert.deepEqual(
        log.lines.map((line) => line.message),
        [
          'job failed for good; it is kept as failed (mailroom jobs list --failed)',
          'could not record the failure on what the job acts on',
        ],
      );
    } finally {
      await worker.stop();
    }
  });
});

test('mailroom jobs list --failed and jobs retry, run as the CLI process', async () => {
  const { env, cleanup } = await databaseForProcesses('jobs');
  try {
    const db = onPostgres ? openPostgres(env.DATABASE_URL!, 2) : await openPGliteDirectory(env.MAILROOM_DATA_DIR!);
    const broadcastId = randomUUID();
    try {
      await migrate(db);
      await enqueueJob(db, { queue: 'broadcast-fan-out', payload: { broadcast_id: broadcastId } });
      const log = recordingLog();
      const worker = await startWorker(
        db,
        {
          'broadcast-fan-out': async () => {
            throw new PermanentJobError('the broadcast is gone');
          },
        },
        { concurrency: 1, leaseSeconds: 30, pollIntervalMs: 100, log },
      );
      try {
        await waitFor(async () => (await listFailedJobs(db)).length === 1);
      } finally {
        await worker.stop();
      }
    } finally {
      // The embedded database is one process's: the CLI opens it once this process has let it go.
      await db.close();
    }

    const listed = await runCli(['jobs', 'list', '--failed', '--kind', 'broadcast-fan-out', '--json'], env);
    assert.equal(listed.code, 0, listed.stderr);
    const data = (listed.json as { data: Array<Record<string, unknown>> }).data;
    assert.equal(data.length, 1);
    assert.deepEqual(
      { ...data[0], id: undefined, failed_at: undefined, created_at: undefined },
      {
        id: undefined,
        kind: 'broadcast-fan-out',
        payload: { broadcast_id: broadcastId },
        failed_runs: 1,
        last_error: 'the broadcast is gone',
        failed_at: undefined,
        created_at: undefined,
      },
    );
    const id = String(data[0]!.id);
    const text = await runCli(['jobs', 'list', '--failed'], env);
    assert.match(
      text.stdout,
      new RegExp(
        `^job ${id}  broadcast-fan-out  broadcast_id=${broadcastId}  failed \\S+ after 1 run: the broadcast is gone$`,
        'm',
      ),
    );
    assert.equal((await runCli(['jobs', 'list', '--failed', '--kind', 'contact-import'], env)).stdout, '(none)\n');
    const usage = await runCli(['jobs', 'list'], env);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--failed/);

    const retried = await runCli(['jobs', 'retry', id, '--json'], env);
    assert.equal(retried.code, 0, retried.stderr);
    assert.deepEqual(retried.json, { id: Number(id), retried: true });
    assert.deepEqual((await runCli(['jobs', 'list', '--failed', '--json'], env)).json, { data: [] });
    const again = await runCli(['jobs', 'retry', id, '--json'], env);
    assert.equal(again.code, 1);
    assert.equal((again.json as { error: { name: string } }).error.name, 'not_found');

    const check = onPostgres ? openPostgres(env.DATABASE_URL!, 1) : await openPGliteDirectory(env.MAILROOM_DATA_DIR!);
    try {
      const { rows } = await check.query<{ due: boolean; failed_at: Date | null }>(
        'SELECT run_at <= now() AS due, failed_at FROM jobs WHERE id = $1',
        [Number(id)],
      );
      assert.deepEqual(rows, [{ due: true, failed_at: null }]);
    } finally {
      await check.close();
    }
  } finally {
    await cleanup();
  }
});
