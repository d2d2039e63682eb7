import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import type { FailedJobHook, Job, JobHandler, JobResult } from '../queue/worker.ts';
import type { AutomationConnection, AutomationGraph, AutomationStep } from './automation-model.ts';
import { failRun, finishRunIfDone, followFrom, settleStep, type RunInWalk } from './run-graph.ts';
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

/** The run with its graph (the version it started with) and its trigger's payload; locked when asked. */
export async function readRun(
  db: Queryable,
  runId: string,
  options: { lock: boolean },
): Promise<(RunInWalk & { status: string }) | undefined> {
  const { rows } = await db.query<{
    id: string;
    organization_id: string;
    automation_id: string;
    contact_id: string;
    status: string;
    steps: AutomationStep[];
    connections: AutomationConnection[];
    payload: Record<string, unknown> | null;
  }>(
    `SELECT r.id, r.organization_id, r.automation_id, r.contact_id, r.status, v.steps, v.connections, e.payload
       FROM automation_runs r
       JOIN automation_versions v ON v.automation_id = r.automation_id AND v.version = r.version
       LEFT JOIN received_events e ON e.id = r.event_id
      WHERE r.id = $1 ${options.lock ? 'FOR UPDATE OF r' : ''}`,
    [runId],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    id: row.id,
    organizationId: row.organization_id,
    automationId: row.automation_id,
    contactId: row.contact_id,
    status: row.status,
    eventPayload: row.payload ?? {},
    graph: graphOf(row.steps, row.connections),
  };
}

/** A stored graph, with every connection's type spelled out. */
export function graphOf(steps: AutomationStep[], connections: AutomationConnection[]): AutomationGraph {
  return {
    steps,
    connections: connections.map((connection) => ({ ...connection, type: connection.type ?? 'default' })),
  };
}

async function readStep(db: Queryable, runId: string, seq: number): Promise<StepRow | undefined> {
  const { rows } = await db.query<StepRow>(
    'SELECT step_key, step_type, status, wake_at FROM automation_run_steps WHERE run_id = $1 AND seq = $2',
    [runId, seq],
  );
  return rows[0];
}

const ACTIVE = ['pending', 'running', 'waiting'];

export function stepJobHandler(context: EngineContext): JobHandler {
  return async (job: Job): Promise<JobResult> => {
    const runId = String(job.payload.run_id);
    const seq = Number(job.payload.seq);
    const first = await readStep(context.db, runId, seq);
    if (!first || !ACTIVE.includes(first.status)) return { done: true };
    const now = context.clock();
    if (first.step_type === 'send_email') return sendStep(context, runId, seq);
    // A job woken before its time (a test's clock, a clock step back) waits for it.
    if (first.wake_at && first.wake_at.getTime() > now.getTime()) {
      return { retryAt: first.wake_at, reason: 'not due yet' };
    }
    await context.db.transaction(async (tx) => {
      const run = await readRun(tx, runId, { lock: true });
      const step = await readStep(tx, runId, seq);
      if (!run || run.status !== 'running' || step?.status !== 'waiting') return;
      if (step.step_type === 'delay') {
        await settleStep(tx, runId, seq, { status: 'completed', at: now, output: { delayed_until: step.wake_at } });
        await followFrom(tx, run, step.step_key, 'default', { now });
      } else if (step.step_type === 'wait_for_event') {
        await settleStep(tx, runId, seq, { status: 'completed', at: now, output: { timed_out: true } });
        await followFrom(tx, run, step.step_key, 'timeout', { now });
      }
    });
    return { done: true };
  };
}

async function sendStep(context: EngineContext, runId: string, seq: number): Promise<JobResult> {
  const run = await readRun(context.db, runId, { lock: false });
  if (!run || run.status !== 'running') return { done: true };
  const stepRow = await readStep(context.db, runId, seq);
  const step = run.graph.steps.find((candidate) => candidate.key === stepRow?.step_key);
  if (!stepRow || !step) return { done: true };
  await context.db.query(
    `UPDATE automation_run_steps SET status = 'running', started_at = coalesce(started_at, $3)
      WHERE run_id = $1 AND seq = $2 AND status = 'pending'`,
    [runId, seq, context.clock()],
  );
  const result = await sendEmailStep(context.db, context.config, run, seq, step);
  if (result.kind === 'retry') return { retryAt: new Date(Date.now() + result.afterMs), reason: result.reason };
  const now = context.clock();
  await context.db.transaction(async (tx) => {
    const locked = await readRun(tx, runId, { lock: true });
    const current = await readStep(tx, runId, seq);
    if (!locked || locked.status !== 'running' || !current || !ACTIVE.includes(current.status)) return;
    if (result.kind === 'failed') {
      await settleStep(tx, runId, seq, { status: 'failed', at: now, error: result.error });
      await failRun(tx, runId, now, result.error);
      return;
    }
    const output =
      result.kind === 'sent' ? { email_id: result.emailId } : { skipped: result.reason, ...(result.detail ?? {}) };
    await settleStep(tx, runId, seq, { status: result.kind === 'sent' ? 'completed' : 'skipped', at: now, output });
    await followFrom(tx, locked, step.key, 'default', { now });
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
  await failRun(tx, runId, now, error);
  await finishRunIfDone(tx, runId, now);
};
