// Background jobs that failed for good (a permanent error, or MAILROOM_JOB_MAX_ATTEMPTS failed runs):
// listed, and put back in the queue once their cause is fixed.
import { notFound } from '../../platform/errors.ts';
import { QUEUES } from '../../queue/jobs.ts';
import { listFailedJobs, retryFailedJob, type FailedJob } from '../../queue/failures.ts';
import { listing, UsageError, wholeNumber, type Command } from '../command.ts';

/** What a failed job acts on, as `key=value` of its payload. */
const target = (job: FailedJob) =>
  Object.entries(job.payload)
    .map(([key, value]) => `${key}=${String(value)}`)
    .join(' ');

const runs = (n: number) => `${n} run${n === 1 ? '' : 's'}`;

export const jobCommands: Record<string, Command> = {
  'jobs list': {
    usage: 'jobs list --failed [--kind K] [--limit N]',
    description: 'list the background jobs that failed for good, the most recent first, with their last error',
    options: {
      failed: { type: 'boolean', default: false, help: 'the jobs that failed for good (required: the only list)' },
      kind: { type: 'string', help: `only jobs of this kind: ${QUEUES.join(', ')}` },
      limit: { type: 'string', help: 'at most this many (1 to 1000, default 100)' },
    },
    async run({ values, withDatabase }) {
      if (!values.failed) throw new UsageError('jobs list lists the failed jobs: give --failed');
      const kind = values.kind as string | undefined;
      if (kind !== undefined && !(QUEUES as readonly string[]).includes(kind)) {
        throw new UsageError(`--kind is one of ${QUEUES.join(', ')}`);
      }
      const limit = wholeNumber(values, 'limit') ?? 100;
      if (limit < 1 || limit > 1000) throw new UsageError('--limit is 1 to 1000');
      const jobs = await withDatabase((db) => listFailedJobs(db, { kind, limit }));
      const data = jobs.map((job) => ({
        id: job.id,
        kind: job.kind,
        payload: job.payload,
        failed_runs: job.failedRuns,
        last_error: job.lastError,
        failed_at: job.failedAt.toISOString(),
        created_at: job.createdAt.toISOString(),
      }));
      return {
        json: { data },
        text: listing(
          jobs,
          (job) =>
            `job ${job.id}  ${job.kind}  ${target(job)}  failed ${job.failedAt.toISOString()} after ${runs(job.failedRuns)}: ${job.lastError ?? ''}`,
        ),
      };
    },
  },

  'jobs retry': {
    usage: 'jobs retry ID',
    description: 'make a failed job due again now, with a fresh count of attempts (once its cause is fixed)',
    options: {},
    positionals: [{ name: 'ID', help: 'the job (its id, as jobs list --failed shows it)' }],
    async run({ positionals, withDatabase }) {
      const id = positionals[0]!;
      if (!/^\d{1,15}$/.test(id)) throw new UsageError('ID is a job id: a whole number (jobs list --failed)');
      const retried = await withDatabase((db) => retryFailedJob(db, Number(id)));
      if (!retried) throw notFound(`failed job ${id}`);
      return { json: { id: Number(id), retried: true }, text: `job ${id} is due again` };
    },
  },
};
