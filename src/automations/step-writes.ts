import type { Queryable, QueryResult } from '../platform/db/database.ts';
import { enqueueJobsFromRows } from '../queue/jobs.ts';

// The step rows one transaction of the engine writes, held back and written together: every step entered
// (with the job of one that waits or sends) and every step settled, in one statement, however many runs
// the transaction walks. Held rows are written before any other statement goes through (`query` writes
// them first), so whatever the walk reads or changes next (a contact, a run's status, the steps still
// active) sees every step entered and settled before it, as if each had been written at once.

/** A step entered: its row, and when its job is due (null: no job, the step took no time). */
export interface EnteredStep {
  run_id: string;
  seq: number;
  organization_id: string;
  automation_id: string;
  contact_id: string;
  step_key: string;
  step_type: string;
  status: string;
  wait_event: string | null;
  wake_at: Date | null;
  output: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
  started_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
  job_at: Date | null;
}

/** A step done (or skipped, or failed) with what it produced. */
export interface SettledStep {
  run_id: string;
  seq: number;
  status: string;
  at: Date;
  /** When the step began, if before it was settled (a send). */
  started_at: Date | null;
  /** Replaces the output when given. */
  output: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
}

export class StepWrites implements Queryable {
  private entered: EnteredStep[] = [];
  private settled: SettledStep[] = [];
  private readonly tx: Queryable;

  constructor(tx: Queryable) {
    this.tx = tx;
  }

  enter(step: EnteredStep): void {
    this.entered.push(step);
  }

  settle(step: SettledStep): void {
    // A step entered by this transaction and not yet written is written settled.
    const held = this.entered.find((row) => row.run_id === step.run_id && row.seq === step.seq);
    if (!held) {
      this.settled.push(step);
      return;
    }
    Object.assign(held, {
      status: step.status,
      completed_at: step.at,
      started_at: held.started_at ?? step.started_at ?? step.at,
      output: step.output ?? held.output,
      error: step.error,
      wait_event: null,
    });
  }

  async query<Row = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<Row>> {
    await this.flush();
    return this.tx.query<Row>(text, params);
  }

  /** Writes what is held, in one statement. */
  async flush(): Promise<void> {
    if (this.entered.length === 0 && this.settled.length === 0) return;
    const entered = this.entered;
    const settled = this.settled;
    this.entered = [];
    this.settled = [];
    await this.tx.query(FLUSH, [JSON.stringify(entered), JSON.stringify(settled)]);
  }
}

/** The transaction's held writes: `tx` itself when it already holds them, else a new holder over it. */
export const stepWritesOf = (tx: Queryable): StepWrites => (tx instanceof StepWrites ? tx : new StepWrites(tx));

const FLUSH = `WITH entering AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(run_id uuid, seq integer, organization_id uuid,
      automation_id uuid, contact_id uuid, step_key text, step_type text, status text, wait_event text,
      wake_at timestamptz, output jsonb, error jsonb, started_at timestamptz, completed_at timestamptz,
      created_at timestamptz, job_at timestamptz)),
  entered AS (
    INSERT INTO automation_run_steps (run_id, seq, organization_id, automation_id, contact_id, step_key, step_type,
           status, wait_event, wake_at, output, error, started_at, completed_at, created_at)
    SELECT run_id, seq, organization_id, automation_id, contact_id, step_key, step_type, status, wait_event, wake_at,
           output, error, started_at, completed_at, created_at FROM entering
    RETURNING 1),
  jobs_due AS (SELECT * FROM entering WHERE job_at IS NOT NULL),
  job AS (${enqueueJobsFromRows({
    from: 'jobs_due',
    queue: 'automation-step',
    payload: "jsonb_build_object('run_id', jobs_due.run_id::text, 'seq', jobs_due.seq::text)",
    runAt: 'jobs_due.job_at',
    shareKey: 'jobs_due.organization_id::text',
  })}),
  settled AS (
    UPDATE automation_run_steps s
       SET status = u.status, completed_at = u.at, started_at = coalesce(s.started_at, u.started_at, u.at),
           output = coalesce(u.output, s.output), error = u.error, wait_event = NULL
      FROM jsonb_to_recordset($2::jsonb) AS u(run_id uuid, seq integer, status text, at timestamptz,
           started_at timestamptz, output jsonb, error jsonb)
     -- A step cancelled meanwhile (its run's contact deleted by another walk of the transaction) stays so.
     WHERE s.run_id = u.run_id AND s.seq = u.seq AND s.status IN ('pending', 'running', 'waiting')
    RETURNING 1)
SELECT 1`;
