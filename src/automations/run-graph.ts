import type { Queryable } from '../platform/db/database.ts';
import type { AutomationConnection, AutomationGraph, AutomationStep, ConnectionType } from './automation-model.ts';
import { parseDuration } from './durations.ts';
import { runInstantStep, type StepOutcome } from './instant-steps.ts';
import { stepWritesOf, type StepWrites } from './step-writes.ts';

// How a run walks its graph. Entering a step writes its row (automation_run_steps, numbered by `seq`) in
// the transaction that finished the step before it. A step that takes no time (trigger, condition,
// contact_update, contact_delete, add_to_segment) is done right there, in the same transaction, and the
// walk goes on: it happens exactly when that transaction commits, never twice. A step that waits or
// sends (delay, wait_for_event, send_email) gets a queue job keyed (run, seq) instead; the job's handler
// (step-jobs.ts) does it and goes on from there. A delay is a job due when the delay ends, not a
// sleeping process. The rows a walk enters and settles are held and written together (step-writes.ts):
// the steps of every run a transaction walks cost one statement.

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

/** Steps one run may enter in all (a loop through a delay comes back many times): past it, the run fails. */
export const MAX_STEPS_PER_RUN = 10_000;

/** What the walks of one transaction share: whether one of them deleted the contact they all run for. */
export interface SharedWalkState {
  contactDeleted: boolean;
}

export interface WalkContext {
  now: Date;
  /** The highest step number the run has so far (read with the run, under its lock). */
  lastSeq: number;
  shared?: SharedWalkState;
}

/**
 * What one walk knows while it holds the run's lock, so that it asks the database nothing it can tell:
 * the next step number, whether the run is still running (only this walk can end it meanwhile), and
 * whether it left a step pending or waiting (then the run cannot be done).
 */
interface Walk {
  run: RunInWalk;
  /** The transaction, holding the step rows back until the next other statement or the walk's end. */
  tx: StepWrites;
  now: Date;
  nextSeq: number;
  live: boolean;
  leftActive: boolean;
  budget: number;
  shared: SharedWalkState;
}

const newWalk = (tx: StepWrites, run: RunInWalk, context: WalkContext): Walk => ({
  run,
  tx,
  now: context.now,
  nextSeq: context.lastSeq + 1,
  live: true,
  leftActive: false,
  budget: MAX_STEPS_PER_WALK,
  shared: context.shared ?? { contactDeleted: false },
});

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
  const walk = newWalk(stepWritesOf(tx), run, context);
  for (const connection of connectionsFrom(run.graph, key, type)) await enterStep(walk, connection.to);
  await endWalk(tx, walk);
}

/** Starts a run at its trigger (its row just written, with no step yet). */
export async function startWalk(tx: Queryable, run: RunInWalk, now: Date, shared: SharedWalkState): Promise<void> {
  const trigger = run.graph.steps.find((step) => step.type === 'trigger');
  if (!trigger) throw new Error(`automation ${run.automationId} has no trigger`);
  const walk = newWalk(stepWritesOf(tx), run, { now, lastSeq: 0, shared });
  await enterStep(walk, trigger.key);
  await endWalk(tx, walk);
}

/**
 * A walk that left nothing pending or waiting may have been the run's last: it completes then. The rows
 * it holds are written now, unless the caller holds them for more walks (`tx` is its StepWrites).
 */
async function endWalk(tx: Queryable, walk: Walk): Promise<void> {
  if (walk.live && !walk.leftActive) await finishRunIfDone(walk.tx, walk.run.id, walk.now);
  if (walk.tx !== tx) await walk.tx.flush();
}

async function enterStep(walk: Walk, key: string): Promise<void> {
  const { tx } = walk;
  // A run this walk ended (a contact_delete, a failed step) enters nothing more; nor does one whose
  // contact another walk of this transaction deleted (the deletion cancelled it).
  if (!walk.live || walk.shared.contactDeleted) return;
  const { run, now } = walk;
  if (--walk.budget < 0 || walk.nextSeq > MAX_STEPS_PER_RUN) {
    await failRun(tx, run.id, now);
    walk.live = false;
    return;
  }
  const step = run.graph.steps.find((candidate) => candidate.key === key);
  if (!step) throw new Error(`automation ${run.automationId} has no step ${key}`);
  const seq = walk.nextSeq++;

  if (step.type === 'send_email') {
    insertStep(tx, run, seq, step, { status: 'pending', startedAt: null }, now);
    walk.leftActive = true;
    return;
  }
  if (step.type === 'delay') {
    const wakeAt = new Date(now.getTime() + (parseDuration(String(step.config.duration)) ?? 0));
    insertStep(tx, run, seq, step, { status: 'waiting', startedAt: now, wakeAt }, wakeAt);
    walk.leftActive = true;
    return;
  }
  if (step.type === 'wait_for_event') {
    const timeout = typeof step.config.timeout === 'string' ? parseDuration(step.config.timeout) : undefined;
    const wakeAt = timeout === undefined ? null : new Date(now.getTime() + timeout);
    const values = { status: 'waiting', startedAt: now, wakeAt, waitEvent: String(step.config.event_name) };
    // Without a timeout the wait ends only with its event: no job.
    insertStep(tx, run, seq, step, values, wakeAt);
    walk.leftActive = true;
    return;
  }

  const outcome: StepOutcome = await runInstantStep(tx, run, step);
  const values = {
    status: outcome.status,
    startedAt: now,
    completedAt: now,
    output: outcome.output,
    error: outcome.error,
  };
  insertStep(tx, run, seq, step, values, null);
  if (outcome.status === 'failed') {
    await failRun(tx, run.id, now);
    walk.live = false;
    return;
  }
  if (outcome.endsRun) {
    await endRun(tx, run.id, 'completed', now);
    walk.live = false;
    walk.shared.contactDeleted = true;
    return;
  }
  for (const connection of connectionsFrom(run.graph, key, outcome.follow ?? 'default')) {
    await enterStep(walk, connection.to);
  }
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

/** Enters a step: its row and, when `jobAt` is given, its job keyed (run, seq) due then (written with the walk's). */
function insertStep(
  tx: StepWrites,
  run: RunInWalk,
  seq: number,
  step: AutomationStep,
  values: StepRowValues,
  jobAt: Date | null,
) {
  tx.enter({
    run_id: run.id,
    seq,
    organization_id: run.organizationId,
    automation_id: run.automationId,
    contact_id: run.contactId,
    step_key: step.key,
    step_type: step.type,
    status: values.status,
    wait_event: values.waitEvent ?? null,
    wake_at: values.wakeAt ?? null,
    output: values.output ?? null,
    error: values.error ?? null,
    started_at: values.startedAt,
    completed_at: values.completedAt ?? null,
    created_at: values.startedAt ?? new Date(),
    job_at: jobAt,
  });
}

/**
 * Marks a step done (or skipped, or failed) with what it produced: held with the transaction's other step
 * rows when `tx` holds them, else written now.
 */
export async function settleStep(
  tx: Queryable,
  runId: string,
  seq: number,
  values: {
    status: string;
    at: Date;
    /** When the step began, if it began before it was settled (a send). */
    startedAt?: Date;
    output?: Record<string, unknown> | null;
    error?: Record<string, unknown> | null;
  },
): Promise<void> {
  const writes = stepWritesOf(tx);
  writes.settle({
    run_id: runId,
    seq,
    status: values.status,
    at: values.at,
    started_at: values.startedAt ?? null,
    output: values.output ?? null,
    error: values.error ?? null,
  });
  if (writes !== tx) await writes.flush();
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
export async function failRun(tx: Queryable, runId: string, now: Date) {
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
