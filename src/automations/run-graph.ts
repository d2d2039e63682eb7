import type { Queryable } from '../platform/db/database.ts';
import { enqueueJob } from '../queue/jobs.ts';
import type { AutomationConnection, AutomationGraph, AutomationStep, ConnectionType } from './automation-model.ts';
import { parseDuration } from './durations.ts';
import { runInstantStep, type StepOutcome } from './instant-steps.ts';

// How a run walks its graph. Entering a step writes its row (automation_run_steps, numbered by `seq`) in
// the transaction that finished the step before it. A step that takes no time (trigger, condition,
// contact_update, contact_delete, add_to_segment) is done right there, in the same transaction, and the
// walk goes on: it happens exactly when that transaction commits, never twice. A step that waits or
// sends (delay, wait_for_event, send_email) gets a queue job keyed (run, seq) instead; the job's handler
// (step-jobs.ts) does it and goes on from there. A delay is a job due when the delay ends, not a
// sleeping process.

/** The run a walk acts for, read under its row lock. */
export interface RunInWalk {
  id: string;
  organizationId: string;
  automationId: string;
  contactId: string;
  /** The payload of the event that started the run: what `event.*` fields and variables read. */
  eventPayload: Record<string, unknown>;
  graph: AutomationGraph;
}

/** A walk enters at most this many steps in one transaction (a graph is checked to have no instant loop). */
const MAX_STEPS_PER_WALK = 500;

export interface WalkContext {
  now: Date;
}

/** The connection types a step's outcome follows. */
export function connectionsFrom(graph: AutomationGraph, key: string, type: ConnectionType): AutomationConnection[] {
  return graph.connections.filter((connection) => {
    if (connection.from !== key) return false;
    // From a wait, a plain connection is the one taken when the event arrives.
    const step = graph.steps.find((candidate) => candidate.key === key);
    const effective =
      connection.type === 'default' && step?.type === 'wait_for_event' ? 'event_received' : connection.type;
    return effective === type;
  });
}

/** Enters the steps the finished step `key` leads to by `type`, then ends the run if nothing is left. */
export async function followFrom(
  tx: Queryable,
  run: RunInWalk,
  key: string,
  type: ConnectionType,
  context: WalkContext,
): Promise<void> {
  const budget = { left: MAX_STEPS_PER_WALK };
  for (const connection of connectionsFrom(run.graph, key, type)) {
    await enterStep(tx, run, connection.to, context, budget);
  }
  await finishRunIfDone(tx, run.id, context.now);
}

/** Starts a run at its trigger (already written as the run's row). */
export async function startWalk(tx: Queryable, run: RunInWalk, context: WalkContext): Promise<void> {
  const trigger = run.graph.steps.find((step) => step.type === 'trigger');
  if (!trigger) throw new Error(`automation ${run.automationId} has no trigger`);
  await enterStep(tx, run, trigger.key, context, { left: MAX_STEPS_PER_WALK });
  await finishRunIfDone(tx, run.id, context.now);
}

async function enterStep(
  tx: Queryable,
  run: RunInWalk,
  key: string,
  context: WalkContext,
  budget: { left: number },
): Promise<void> {
  // A run already failed or ended (a contact_delete before, a failed branch) enters nothing more.
  const { rows: live } = await tx.query<{ status: string }>('SELECT status FROM automation_runs WHERE id = $1', [
    run.id,
  ]);
  if (live[0]?.status !== 'running') return;
  if (--budget.left < 0) {
    await failRun(tx, run.id, context.now, { name: 'step_limit', message: 'the run entered too many steps at once' });
    return;
  }
  const step = run.graph.steps.find((candidate) => candidate.key === key);
  if (!step) throw new Error(`automation ${run.automationId} has no step ${key}`);
  const seq = await nextSeq(tx, run.id);
  const now = context.now;

  if (step.type === 'send_email') {
    await insertStep(tx, run, seq, step, { status: 'pending', startedAt: null });
    await enqueueStepJob(tx, run, seq, now);
    return;
  }
  if (step.type === 'delay') {
    const wakeAt = new Date(now.getTime() + (parseDuration(String(step.config.duration)) ?? 0));
    await insertStep(tx, run, seq, step, { status: 'waiting', startedAt: now, wakeAt });
    await enqueueStepJob(tx, run, seq, wakeAt);
    return;
  }
  if (step.type === 'wait_for_event') {
    const timeout = typeof step.config.timeout === 'string' ? parseDuration(step.config.timeout) : undefined;
    const wakeAt = timeout === undefined ? null : new Date(now.getTime() + timeout);
    await insertStep(tx, run, seq, step, {
      status: 'waiting',
      startedAt: now,
      wakeAt,
      waitEvent: String(step.config.event_name),
    });
    // Without a timeout the wait ends only with its event: no job.
    if (wakeAt) await enqueueStepJob(tx, run, seq, wakeAt);
    return;
  }

  const outcome: StepOutcome = await runInstantStep(tx, run, step);
  await insertStep(tx, run, seq, step, {
    status: outcome.status,
    startedAt: now,
    completedAt: now,
    output: outcome.output,
    error: outcome.error,
  });
  if (outcome.status === 'failed') {
    await failRun(tx, run.id, now, outcome.error ?? null);
    return;
  }
  if (outcome.endsRun) {
    await endRun(tx, run.id, 'completed', now);
    return;
  }
  for (const connection of connectionsFrom(run.graph, key, outcome.follow ?? 'default')) {
    await enterStep(tx, run, connection.to, context, budget);
  }
}

async function nextSeq(tx: Queryable, runId: string): Promise<number> {
  const { rows } = await tx.query<{ seq: number }>(
    'SELECT coalesce(max(seq), 0) + 1 AS seq FROM automation_run_steps WHERE run_id = $1',
    [runId],
  );
  return rows[0]!.seq;
}

interface StepRowValues {
  status: string;
  startedAt: Date | null;
  completedAt?: Date | null;
  wakeAt?: Date | null;
  waitEvent?: string;
  output?: Record<string, unknown> | null;
  error?: Record<string, unknown> | null;
}

async function insertStep(tx: Queryable, run: RunInWalk, seq: number, step: AutomationStep, values: StepRowValues) {
  await tx.query(
    `INSERT INTO automation_run_steps (run_id, seq, organization_id, automation_id, contact_id, step_key, step_type,
            status, wait_event, wake_at, output, error, started_at, completed_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12::jsonb, $13, $14, $15)`,
    [
      run.id,
      seq,
      run.organizationId,
      run.automationId,
      run.contactId,
      step.key,
      step.type,
      values.status,
      values.waitEvent ?? null,
      values.wakeAt ?? null,
      values.output ? JSON.stringify(values.output) : null,
      values.error ? JSON.stringify(values.error) : null,
      values.startedAt,
      values.completedAt ?? null,
      values.startedAt ?? new Date(),
    ],
  );
}

async function enqueueStepJob(tx: Queryable, run: RunInWalk, seq: number, runAt: Date) {
  await enqueueJob(tx, {
    queue: 'automation-step',
    payload: { run_id: run.id, seq: String(seq) },
    shareKey: run.organizationId,
    runAt,
  });
}

/** Marks a step done (or skipped, or failed) with what it produced. */
export async function settleStep(
  tx: Queryable,
  runId: string,
  seq: number,
  values: { status: string; at: Date; output?: Record<string, unknown> | null; error?: Record<string, unknown> | null },
): Promise<void> {
  await tx.query(
    `UPDATE automation_run_steps
        SET status = $3, completed_at = $4, started_at = coalesce(started_at, $4),
            output = coalesce($5::jsonb, output), error = $6::jsonb, wait_event = NULL
      WHERE run_id = $1 AND seq = $2`,
    [
      runId,
      seq,
      values.status,
      values.at,
      values.output ? JSON.stringify(values.output) : null,
      values.error ? JSON.stringify(values.error) : null,
    ],
  );
}

/** Ends the run as completed once none of its steps is pending, running or waiting. */
export async function finishRunIfDone(tx: Queryable, runId: string, now: Date): Promise<void> {
  await tx.query(
    `UPDATE automation_runs SET status = 'completed', completed_at = $2
      WHERE id = $1 AND status = 'running'
        AND NOT EXISTS (SELECT 1 FROM automation_run_steps
                         WHERE run_id = $1 AND status IN ('pending', 'running', 'waiting'))`,
    [runId, now],
  );
}

/** Ends a run (completed by a contact_delete, cancelled): its steps not yet done are cancelled. */
export async function endRun(tx: Queryable, runId: string, status: 'completed' | 'cancelled', now: Date) {
  await tx.query(
    `UPDATE automation_run_steps SET status = 'cancelled', completed_at = $2, wait_event = NULL
      WHERE run_id = $1 AND status IN ('pending', 'running', 'waiting')`,
    [runId, now],
  );
  await tx.query('UPDATE automation_runs SET status = $2, completed_at = $3 WHERE id = $1', [runId, status, now]);
}

/** A step failed: the run fails, and its other branches' steps not yet done are cancelled. */
export async function failRun(tx: Queryable, runId: string, now: Date, _error: Record<string, unknown> | null) {
  await tx.query(
    `UPDATE automation_run_steps SET status = 'cancelled', completed_at = $2, wait_event = NULL
      WHERE run_id = $1 AND status IN ('pending', 'running', 'waiting')`,
    [runId, now],
  );
  await tx.query(
    `UPDATE automation_runs SET status = 'failed', completed_at = $2 WHERE id = $1 AND status = 'running'`,
    [runId, now],
  );
}
