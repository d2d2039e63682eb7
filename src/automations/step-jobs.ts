import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import type { FailedJobHook, Job, JobHandler, JobResult } from '../queue/worker.ts';
import type { AutomationConnection, AutomationGraph, AutomationStep } from './automation-model.ts';
import { endRun, failRun, finishRunIfDone, followFrom, settleStep, type RunInWalk } from './run-graph.ts';
import { sendEmailStep } from './send-email-step.ts';

// The job of one step a run entered (run-graph.ts): a send_email step's message, a delay's end, a wait's
// timeout. Each job is keyed (run, seq) and reads the step's row first: a row no longer pending or
// waiting (done by an earlier run of this job whose worker died before the job was removed, resumed by
// its event, cancelled) means there is nothing left to do. What the step does and the walk on from it
// commit in one transaction, under the run's row lock, so two jobs of one run never walk it at once.

export interface EngineContext {
  db: Database;
  config: Config;
  /** The engine's time: when delays end and waits time out (a test's clock in tests). */
  clock: () => Date;
}

interface StepRow {
  step_key: string;
  step_type: string;
  status: string;
  wake_at: Date | null;
}

/** A run with its graph and the state of one of its steps, as one read. */
export interface RunState {
  run: RunInWalk & { status: string };
  /** The step asked for; undefined when the run has no such step. */
  step: StepRow | undefined;
  /** The run's highest step number: where a walk from here numbers on. */
  lastSeq: number;
}

/**
 * The run with its graph (the version it started with), its trigger's payload, one step's row and its
 * highest step number, in one read; the run's row locked when asked.
 */
export async function readRun(
  db: Queryable,
  runId: string,
  options: { lock: boolean; seq?: number },
): Promise<RunState | undefined> {
  // The lock first, in a statement of its own: a statement that waited for the lock would read the steps
  // as they were before the holder committed, not as it left them.
  if (options.lock) {
    const locked = await db.query('SELECT 1 FROM automation_runs WHERE id = $1 FOR UPDATE', [runId]);
    if (locked.rows.length === 0) return undefined;
  }
  const { rows } = await db.query<{
    id: string;
    organization_id: string;
    automation_id: string;
    contact_id: string;
    status: string;
    steps: AutomationStep[];
    connections: AutomationConnection[];
    payload: Record<string, unknown> | null;
    last_seq: number;
    step_key: string | null;
    step_type: string;
    step_status: string;
    wake_at: Date | null;
  }>(
    `SELECT r.id, r.organization_id, r.automation_id, r.contact_id, r.status, v.steps, v.connections, e.payload,
            (SELECT coalesce(max(seq), 0) FROM automation_run_steps m WHERE m.run_id = r.id) AS last_seq,
            s.step_key, s.step_type, s.status AS step_status, s.wake_at
       FROM automation_runs r
       JOIN automation_versions v ON v.automation_id = r.automation_id AND v.version = r.version
       LEFT JOIN received_events e ON e.id = r.event_id
       LEFT JOIN automation_run_steps s ON s.run_id = r.id AND s.seq = $2
      WHERE r.id = $1`,
    [runId, options.seq ?? 0],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    run: {
      id: row.id,
      organizationId: row.organization_id,
      automationId: row.automation_id,
      contactId: row.contact_id,
      status: row.status,
      eventPayload: row.payload ?? {},
      graph: graphOf(row.steps, row.connections),
    },
    step:
      row.step_key === null
        ? undefined
        : { step_key: row.step_key, step_type: row.step_type, status: row.step_status, wake_at: row.wake_at },
    lastSeq: row.last_seq,
  };
}

/** A stored graph, with every connection's type spelled out. */
export function graphOf(steps: AutomationStep[], connections: AutomationConnection[]): AutomationGraph {
  return {
    steps,
    connections: connections.map((connection) => ({ ...connection, type: connection.type ?? 'default' })),
  };
}

const ACTIVE = ['pending', 'running', 'waiting'];

export function stepJobHandler(context: EngineContext): JobHandler {
  return async (job: Job): Promise<JobResult> => {
    const runId = String(job.payload.run_id);
    const seq = Number(job.payload.seq);
    const first = await readRun(context.db, runId, { lock: false, seq });
    if (!first || first.run.status !== 'running' || !first.step || !ACTIVE.includes(first.step.status)) {
      return { done: true };
    }
    if (first.step.step_type === 'send_email') return sendStep(context, first, seq);
    const now = context.clock();
    // A job woken before its time (a test's clock, a clock step back) waits for it.
    if (first.step.wake_at && first.step.wake_at.getTime() > now.getTime()) {
      return { retryAt: first.step.wake_at, reason: 'not due yet' };
    }
    await context.db.transaction(async (tx) => {
      const state = await readRun(tx, runId, { lock: true, seq });
      const step = state?.step;
      if (!state || state.run.status !== 'running' || step?.status !== 'waiting') return;
      const walk = { now, lastSeq: state.lastSeq };
      if (step.step_type === 'delay') {
        await settleStep(tx, runId, seq, { status: 'completed', at: now, output: { delayed_until: step.wake_at } });
        await followFrom(tx, state.run, step.step_key, 'default', walk);
      } else if (step.step_type === 'wait_for_event') {
        await settleStep(tx, runId, seq, { status: 'completed', at: now, output: { timed_out: true } });
        await followFrom(tx, state.run, step.step_key, 'timeout', walk);
      }
      // (The step was read as waiting under the run's lock, which every change of it takes first.)
    });
    return { done: true };
  };
}

async function sendStep(context: EngineContext, first: RunState, seq: number): Promise<JobResult> {
  const { run } = first;
  const step = run.graph.steps.find((candidate) => candidate.key === first.step!.step_key);
  if (!step) return { done: true };
  const startedAt = context.clock();
  const result = await sendEmailStep(context.db, context.config, run, seq, step);
  if (result.kind === 'retry') return { retryAt: new Date(Date.now() + result.afterMs), reason: result.reason };
  const now = context.clock();
  await context.db.transaction(async (tx) => {
    const state = await readRun(tx, run.id, { lock: true, seq });
    if (!state || state.run.status !== 'running' || !state.step || !ACTIVE.includes(state.step.status)) return;
    if (result.kind === 'failed') {
      await settleStep(tx, run.id, seq, { status: 'failed', at: now, startedAt, error: result.error });
      await failRun(tx, run.id, now);
      return;
    }
    if (result.kind === 'skipped' && result.reason === 'contact_deleted') {
      // Deleting a contact cancels its runs; one that got here first is cancelled now.
      await endRun(tx, run.id, 'cancelled', now);
      return;
    }
    const output =
      result.kind === 'sent' ? { email_id: result.emailId } : { skipped: result.reason, ...(result.detail ?? {}) };
    const status = result.kind === 'sent' ? 'completed' : 'skipped';
    await settleStep(tx, run.id, seq, { status, at: now, startedAt, output });
    await followFrom(tx, state.run, step.key, 'default', { now, lastSeq: state.lastSeq });
  });
  return { done: true };
}

/** A step job that failed for good (its attempts spent) fails its step and its run, with the reason. */
export const stepJobFailed: FailedJobHook = async (tx, job, reason) => {
  const runId = String(job.payload.run_id);
  const seq = Number(job.payload.seq);
  const now = new Date();
  const error = { name: 'application_error', message: reason };
  await tx.query(
    `UPDATE automation_run_steps SET status = 'failed', completed_at = $3, error = $4::jsonb, wait_event = NULL
      WHERE run_id = $1 AND seq = $2 AND status IN ('pending', 'running', 'waiting')`,
    [runId, seq, now, JSON.stringify(error)],
  );
  await failRun(tx, runId, now);
  await finishRunIfDone(tx, runId, now);
};
