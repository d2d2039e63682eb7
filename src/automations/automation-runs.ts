import type { Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import type { RunStatus, RunStepStatus, StepType } from './automation-model.ts';
import { findAutomation } from './automations.ts';

// Reading an automation's runs (Resend's /automations/:id/runs): the list, newest first, of the given
// statuses; one run with the steps it entered, in the order entered (a step a loop comes back to is
// there once per time). The engine writes them; this file only reads.

export const RUN_STATUSES: readonly RunStatus[] = ['running', 'completed', 'failed', 'cancelled'];

interface RunRow {
  id: string;
  status: RunStatus;
  started_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
}

export interface RunListItem {
  id: string;
  status: RunStatus;
  started_at: string | null;
  completed_at: string | null;
  created_at: string;
}

export interface RunStepView {
  key: string;
  type: StepType;
  status: RunStepStatus;
  started_at: string | null;
  completed_at: string | null;
  output: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
  created_at: string;
}

export interface RunView extends RunListItem {
  object: 'automation_run';
  steps: RunStepView[];
}

const iso = (date: Date) => new Date(date).toISOString();
const isoOrNull = (date: Date | null) => (date === null ? null : iso(date));

/** `status` as the query string gives it: statuses separated by commas (`running,failed`). */
export function parseRunStatuses(text: string | undefined): RunStatus[] | undefined {
  if (text === undefined) return undefined;
  const statuses = text.split(',').map((status) => status.trim());
  for (const status of statuses) {
    if (!(RUN_STATUSES as readonly string[]).includes(status)) {
      throw new ServiceError(
        'validation_error',
        `status: unknown run status ${JSON.stringify(status)}: one or more of ${RUN_STATUSES.join(', ')}, separated by commas`,
        'status',
      );
    }
  }
  return statuses as RunStatus[];
}

export async function listRuns(
  db: Queryable,
  organizationId: string,
  automationId: string,
  query: PageRequest & { status?: string },
): Promise<Page<RunListItem>> {
  const { status, ...page } = query;
  const statuses = parseRunStatuses(status);
  const automation = await findAutomation(db, organizationId, automationId);
  if (!automation) throw notFound('Automation');
  // The automation's id is a uuid read from its row and the statuses are checked literals: neither is free text.
  const only = statuses === undefined ? '' : ` AND status IN (${statuses.map((s) => `'${s}'`).join(', ')})`;
  const listed = await keysetPage<RunRow>(
    db,
    {
      table: 'automation_runs',
      columns: 'id, status, started_at, completed_at, created_at',
      organizationId,
      newestFirst: true,
      where: `automation_id = '${automation.id}'${only}`,
    },
    page,
  );
  return { ...listed, data: listed.data.map(toListItem) };
}

export async function getRun(
  db: Queryable,
  organizationId: string,
  automationId: string,
  runId: string,
): Promise<RunView> {
  if (!isUuid(automationId) || !isUuid(runId)) throw notFound('Automation run');
  const { rows } = await db.query<RunRow>(
    `SELECT id, status, started_at, completed_at, created_at FROM automation_runs
      WHERE id = $3 AND automation_id = $2 AND organization_id = $1`,
    [organizationId, automationId, runId],
  );
  const run = rows[0];
  if (!run) throw notFound('Automation run');
  const steps = await db.query<{
    step_key: string;
    step_type: StepType;
    status: RunStepStatus;
    started_at: Date | null;
    completed_at: Date | null;
    output: Record<string, unknown> | null;
    error: Record<string, unknown> | null;
    created_at: Date;
  }>(
    `SELECT step_key, step_type, status, started_at, completed_at, output, error, created_at
       FROM automation_run_steps WHERE run_id = $1 ORDER BY seq`,
    [run.id],
  );
  return {
    object: 'automation_run',
    ...toListItem(run),
    steps: steps.rows.map((step) => ({
      key: step.step_key,
      type: step.step_type,
      status: step.status,
      started_at: isoOrNull(step.started_at),
      completed_at: isoOrNull(step.completed_at),
      output: step.output,
      error: step.error,
      created_at: iso(step.created_at),
    })),
  };
}

function toListItem(run: RunRow): RunListItem {
  return {
    id: run.id,
    status: run.status,
    started_at: isoOrNull(run.started_at),
    completed_at: isoOrNull(run.completed_at),
    created_at: iso(run.created_at),
  };
}
