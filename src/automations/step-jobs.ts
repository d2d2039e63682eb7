import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { Batcher } from '../platform/db/batcher.ts';
import { refundRateTokens, takeRateTokens } from '../emails/sending-limits.ts';
import type { FailedJobHook, Job, JobHandler, JobResult } from '../queue/worker.ts';
import type { AutomationConnection, AutomationGraph, AutomationStep } from './automation-model.ts';
import {
  endRun,
  failRun,
  finishRunIfDone,
  followFrom,
  settleStep,
  type RunInWalk,
  type SharedWalkState,
} from './run-graph.ts';
import { sendEmailSteps, type ContactToSend, type SendStep, type SendStepResult } from './send-email-step.ts';
import { StepWrites } from './step-writes.ts';

// The jobs of the steps runs entered (run-graph.ts): a send_email step's message, a delay's end, a wait's
// timeout. Each job is keyed (run, seq) and reads the step's row first: a row no longer pending or
// waiting (done by an earlier run of this job whose worker died before the job was removed, resumed by
// its event, cancelled) means there is nothing left to do. What the step does (a send's message
// included) and the walk on from it commit in one transaction, under the run's row lock, so two jobs of
// one run never walk it at once.
//
// The step jobs running at once in a process are done together, in one transaction: their runs locked
// and read by one statement each, their messages stored by one, the steps settled and entered by one. Two
// jobs of one run go in rounds, the second seeing what the first did.

export interface EngineContext {
  db: Database;
  config: Config;
  /** The engine's time: when delays end and waits time out (a test's clock in tests). */
  clock: () => Date;
}

/** Step jobs done by one transaction at most. */
const MAX_STEPS_PER_BATCH = 500;

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
  /** The run's contact as it is now, for a send (undefined: deleted). */
  contact: ContactToSend | undefined;
}

interface StepRef {
  runId: string;
  seq: number;
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
  const states = await readRuns(db, [{ runId, seq: options.seq ?? 0 }], options);
  return states[0];
}

/** readRun for several (run, step) pairs (of distinct runs when locking), in order; undefined for a run not found. */
async function readRuns(
  db: Queryable,
  refs: StepRef[],
  options: { lock: boolean },
): Promise<Array<RunState | undefined>> {
  // The locks first, in a statement of their own (in id order): a statement that waited for a lock would
  // read the steps as they were before the holder committed, not as it left them.
  if (options.lock) {
    await db.query('SELECT 1 FROM automation_runs WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [
      [...new Set(refs.map((ref) => ref.runId))].sort(),
    ]);
  }
  const { rows } = await db.query<{
    n: number;
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
    contact: ContactToSend | null;
  }>(
    `SELECT w.n, r.id, r.organization_id, r.automation_id, r.contact_id, r.status, v.steps, v.connections, e.payload,
            (SELECT coalesce(max(seq), 0) FROM automation_run_steps m WHERE m.run_id = r.id) AS last_seq,
            s.step_key, s.step_type, s.status AS step_status, s.wake_at,
            -- Contacts hold addresses as parsed (ASCII throughout): lower(email) is the suppression list's key.
            CASE WHEN c.id IS NOT NULL THEN jsonb_build_object('email', c.email, 'first_name', c.first_name,
              'last_name', c.last_name, 'unsubscribed', c.unsubscribed,
              'properties', coalesce(c.properties, '{}'::jsonb), 'suppression_reason', sup.reason) END AS contact
       FROM unnest($1::uuid[], $2::int[]) WITH ORDINALITY AS w(run_id, seq, n)
       JOIN automation_runs r ON r.id = w.run_id
       JOIN automation_versions v ON v.automation_id = r.automation_id AND v.version = r.version
       LEFT JOIN received_events e ON e.id = r.event_id
       LEFT JOIN automation_run_steps s ON s.run_id = r.id AND s.seq = w.seq
       LEFT JOIN contacts c ON c.id = r.contact_id AND c.organization_id = r.organization_id
       LEFT JOIN suppressions sup ON sup.organization_id = c.organization_id AND sup.address = lower(c.email)`,
    [refs.map((ref) => ref.runId), refs.map((ref) => ref.seq)],
  );
  const states: Array<RunState | undefined> = refs.map(() => undefined);
  for (const row of rows) {
    states[Number(row.n) - 1] = {
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
      contact: row.contact ?? undefined,
    };
  }
  return states;
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
  const batches = new Batcher<StepRef, JobResult>(context.db, {
    // Each round opens its transaction itself, after taking the rate limit's tokens.
    transaction: false,
    maxSize: MAX_STEPS_PER_BATCH,
    run: (_db, refs) => runStepJobs(context, refs),
  });
  return (job: Job) => batches.add({ runId: String(job.payload.run_id), seq: Number(job.payload.seq) });
}

/** Does the steps of `refs`: each job's result, in order. */
async function runStepJobs(context: EngineContext, refs: StepRef[]): Promise<JobResult[]> {
  const results: JobResult[] = refs.map(() => ({ done: true }));
  // Rounds: a run's first job in the first, its second in the second, and so on.
  const rounds: number[][] = [];
  const seen = new Map<string, number>();
  for (const [index, ref] of refs.entries()) {
    const round = seen.get(ref.runId) ?? 0;
    seen.set(ref.runId, round + 1);
    (rounds[round] ??= []).push(index);
  }
  for (const round of rounds) {
    const roundResults = await runRoundWithTokens(
      context,
      round.map((index) => refs[index]!),
    );
    round.forEach((index, i) => (results[index] = roundResults[i]!));
  }
  return results;
}

/**
 * A round in its transaction, with the rate limit's tokens for the messages it looks likely to send taken
 * before (they are taken on the database handle, and the embedded database's one connection is the
 * transaction's while it runs); those left unused, or all when the transaction fails, go back after it.
 */
async function runRoundWithTokens(context: EngineContext, refs: StepRef[]): Promise<JobResult[]> {
  const { db } = context;
  const taken = new Map<string, number>();
  const tokens = new Map<string, number>();
  let committed = false;
  try {
    for (const [organizationId, wanted] of await sendsDue(db, refs)) {
      taken.set(organizationId, (await takeRateTokens(db, organizationId, wanted)).granted);
      tokens.set(organizationId, taken.get(organizationId)!);
    }
    const results = await db.transaction((tx) => runRound(context, tx, refs, tokens));
    committed = true;
    return results;
  } finally {
    // Losing a refund only costs a few tokens: it never turns the round into a failure.
    for (const [organizationId, count] of committed ? tokens : taken) {
      if (count > 0) await refundRateTokens(db, organizationId, count).catch(() => {});
    }
  }
}

/** How many of these steps are sends still to do, by organization, in a fixed order. */
async function sendsDue(db: Queryable, refs: StepRef[]): Promise<Array<[string, number]>> {
  const { rows } = await db.query<{ organization_id: string; sends: number }>(
    `SELECT s.organization_id, count(*)::int AS sends
       FROM unnest($1::uuid[], $2::int[]) AS w(run_id, seq)
       JOIN automation_run_steps s ON s.run_id = w.run_id AND s.seq = w.seq
      WHERE s.step_type = 'send_email' AND s.status IN ('pending', 'running')
      GROUP BY 1 ORDER BY 1`,
    [refs.map((ref) => ref.runId), refs.map((ref) => ref.seq)],
  );
  return rows.map((row) => [row.organization_id, row.sends]);
}

/** Steps of distinct runs. */
async function runRound(
  context: EngineContext,
  tx: Queryable,
  refs: StepRef[],
  tokens: Map<string, number>,
): Promise<JobResult[]> {
  const results: JobResult[] = refs.map(() => ({ done: true }));
  const states = await readRuns(tx, refs, { lock: true });
  const now = context.clock();
  const sends: Array<{ index: number; state: RunState; step: AutomationStep }> = [];
  const timers: Array<{ seq: number; state: RunState }> = [];
  for (const [index, state] of states.entries()) {
    if (!state || state.run.status !== 'running' || !state.step || !ACTIVE.includes(state.step.status)) continue;
    if (state.step.step_type === 'send_email') {
      const step = state.run.graph.steps.find((candidate) => candidate.key === state.step!.step_key);
      if (step) sends.push({ index, state, step });
    } else if (state.step.status === 'waiting') {
      // A job woken before its time (a test's clock, a clock step back) waits for it.
      if (state.step.wake_at && state.step.wake_at.getTime() > now.getTime()) {
        results[index] = { retryAt: state.step.wake_at, reason: 'not due yet' };
      } else timers.push({ seq: refs[index]!.seq, state });
    }
  }
  // The messages first (statements of their own), then every step's row, held and written together.
  const sent = await sendEmailSteps(
    tx,
    context.db,
    tokens,
    context.config,
    sends.map(({ state, step }): SendStep => ({ run: state.run, step, contact: state.contact })),
    now,
  );
  const writes = new StepWrites(tx);
  // Runs of one contact share whether a walk of this round deleted it (which cancelled the others).
  const shared = new Map<string, SharedWalkState>();
  const sharedOf = (state: RunState) => {
    let contact = shared.get(state.run.contactId);
    if (!contact) shared.set(state.run.contactId, (contact = { contactDeleted: false }));
    return contact;
  };
  for (const [i, { index, state, step }] of sends.entries()) {
    results[index] = await afterSend(writes, state, refs[index]!.seq, step, sent[i]!, now, sharedOf(state));
  }
  // In the order they came due (then by run), whatever order the jobs were claimed in.
  timers.sort(
    (a, b) =>
      (a.state.step!.wake_at?.getTime() ?? 0) - (b.state.step!.wake_at?.getTime() ?? 0) ||
      (a.state.run.id < b.state.run.id ? -1 : 1),
  );
  for (const { seq, state } of timers) {
    const step = state.step!;
    const walk = { now, lastSeq: state.lastSeq, shared: sharedOf(state) };
    if (walk.shared.contactDeleted) continue;
    if (step.step_type === 'delay') {
      await settleStep(writes, state.run.id, seq, {
        status: 'completed',
        at: now,
        output: { delayed_until: step.wake_at },
      });
      await followFrom(writes, state.run, step.step_key, 'default', walk);
    } else if (step.step_type === 'wait_for_event') {
      await settleStep(writes, state.run.id, seq, { status: 'completed', at: now, output: { timed_out: true } });
      await followFrom(writes, state.run, step.step_key, 'timeout', walk);
    }
  }
  await writes.flush();
  return results;
}

/** Settles a send step by what became of its message, and walks on from it. */
async function afterSend(
  tx: StepWrites,
  state: RunState,
  seq: number,
  step: AutomationStep,
  result: SendStepResult,
  now: Date,
  shared: SharedWalkState,
): Promise<JobResult> {
  const { run } = state;
  // Another run of this round deleted the contact, which cancelled this run: nothing more to do.
  if (shared.contactDeleted) return { done: true };
  if (result.kind === 'retry') return { retryAt: new Date(now.getTime() + result.afterMs), reason: result.reason };
  if (result.kind === 'failed') {
    await settleStep(tx, run.id, seq, { status: 'failed', at: now, error: result.error });
    await failRun(tx, run.id, now);
    return { done: true };
  }
  if (result.kind === 'skipped' && result.reason === 'contact_deleted') {
    // Deleting a contact cancels its runs; one that got here first is cancelled now.
    await endRun(tx, run.id, 'cancelled', now);
    return { done: true };
  }
  const output =
    result.kind === 'sent' ? { email_id: result.emailId } : { skipped: result.reason, ...(result.detail ?? {}) };
  const status = result.kind === 'sent' ? 'completed' : 'skipped';
  await settleStep(tx, run.id, seq, { status, at: now, output });
  await followFrom(tx, run, step.key, 'default', { now, lastSeq: state.lastSeq, shared });
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
