import type { Queryable, Database } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import type { AutomationConnection, AutomationStep } from './automation-model.ts';
import { checkedGraph, type CheckedGraph } from './automation-graph.ts';

// An automation (Resend's /automations) is a name, a status and a graph of steps. Its graph is
// versioned: the automation's current graph is the row of automation_versions its `version` names, and a
// PATCH of steps and connections adds a new version and moves `version` (and `trigger_event`, what
// finds the automation when an event arrives) to it. A run keeps the version it started with, so runs
// already going finish the graph they began; the old versions stay for them.
//
// Status: `enabled` automations start runs for their trigger event; `disabled` ones start none. A PATCH
// to disabled only stops new runs (runs already going carry on); POST /stop disables it and cancels its
// running runs too (their steps not yet done read cancelled), in one transaction.

export type AutomationStatus = 'enabled' | 'disabled';

interface AutomationRow {
  id: string;
  name: string;
  status: AutomationStatus;
  version: number;
  created_at: Date;
  updated_at: Date;
}

export interface AutomationListItem {
  id: string;
  name: string;
  status: AutomationStatus;
  created_at: string;
  updated_at: string;
}

export interface AutomationView extends AutomationListItem {
  object: 'automation';
  steps: AutomationStep[];
  connections: AutomationConnection[];
}

export interface StepCount {
  key: string;
  type: string;
  /** Times a run entered the step (a loop enters it again), whatever became of it. */
  entered: number;
  waiting: number;
  completed: number;
  failed: number;
  skipped: number;
}

const COLUMNS = 'id, name, status, version, created_at, updated_at';
const iso = (date: Date) => new Date(date).toISOString();

export async function createAutomation(
  db: Queryable,
  organizationId: string,
  input: { name: string; status?: AutomationStatus; steps: unknown; connections: unknown },
): Promise<{ id: string }> {
  const graph = await checkedGraph(db, organizationId, input.steps, input.connections);
  // One statement: the automation and its first version are written together or not at all.
  const { rows } = await db.query<{ id: string }>(
    `WITH created AS (
       INSERT INTO automations (organization_id, name, status, version, trigger_event)
       VALUES ($1, $2, $3, 1, $4) RETURNING id
     ), first_version AS (
       INSERT INTO automation_versions (automation_id, version, steps, connections)
       SELECT id, 1, $5::jsonb, $6::jsonb FROM created
     )
     SELECT id FROM created`,
    [
      organizationId,
      input.name,
      input.status ?? 'disabled',
      graph.triggerEvent,
      JSON.stringify(graph.steps),
      JSON.stringify(graph.connections),
    ],
  );
  return { id: rows[0]!.id };
}

/** Newest first, a page at a time (platform/db/keyset-page.ts), of one status when asked. */
export async function listAutomations(
  db: Queryable,
  organizationId: string,
  query: PageRequest & { status?: AutomationStatus },
): Promise<Page<AutomationListItem>> {
  const { status, ...page } = query;
  const listed = await keysetPage<AutomationRow>(
    db,
    {
      table: 'automations',
      columns: COLUMNS,
      organizationId,
      newestFirst: true,
      // The status is one of two literals (the route's schema), never free text.
      ...(status === undefined ? {} : { where: `status = '${status === 'enabled' ? 'enabled' : 'disabled'}'` }),
    },
    page,
  );
  return { ...listed, data: listed.data.map(toListItem) };
}

/** One of the organization's automations, or undefined (also for a malformed id). */
export async function findAutomation(
  db: Queryable,
  organizationId: string,
  id: string,
  lock = false,
): Promise<AutomationRow | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await db.query<AutomationRow>(
    `SELECT ${COLUMNS} FROM automations WHERE id = $2 AND organization_id = $1${lock ? ' FOR UPDATE' : ''}`,
    [organizationId, id],
  );
  return rows[0];
}

/** The automation with its current graph. */
export async function getAutomation(db: Queryable, organizationId: string, id: string): Promise<AutomationView> {
  if (!isUuid(id)) throw notFound('Automation');
  const { rows } = await db.query<AutomationRow & { steps: AutomationStep[]; connections: AutomationConnection[] }>(
    `SELECT a.id, a.name, a.status, a.version, a.created_at, a.updated_at, v.steps, v.connections
       FROM automations a
       JOIN automation_versions v ON v.automation_id = a.id AND v.version = a.version
      WHERE a.id = $2 AND a.organization_id = $1`,
    [organizationId, id],
  );
  const row = rows[0];
  if (!row) throw notFound('Automation');
  return {
    object: 'automation',
    ...toListItem(row),
    steps: row.steps.map((step) => ({ key: step.key, type: step.type, config: step.config })),
    connections: row.connections.map((c) => ({ from: c.from, to: c.to, type: c.type ?? 'default' })),
  };
}

export interface AutomationChanges {
  name?: string;
  status?: AutomationStatus;
  /** Given together (the route refuses one without the other). */
  steps?: unknown;
  connections?: unknown;
}

/**
 * Applies the given changes in one transaction, the automation locked. A new graph is checked and
 * becomes a new version (unless it equals the current one); enabling re-checks the current graph,
 * since the templates, topics and segments it names may have changed since it was saved.
 */
export async function updateAutomation(
  db: Database,
  organizationId: string,
  id: string,
  changes: AutomationChanges,
): Promise<{ id: string }> {
  return db.transaction(async (tx) => {
    const current = await findAutomation(tx, organizationId, id, true);
    if (!current) throw notFound('Automation');
    let version = current.version;
    let graph: CheckedGraph | undefined;
    if (changes.steps !== undefined) {
      graph = await checkedGraph(tx, organizationId, changes.steps, changes.connections);
      const { rows } = await tx.query<{ same: boolean }>(
        `SELECT steps = $3::jsonb AND connections = $4::jsonb AS same
           FROM automation_versions WHERE automation_id = $1 AND version = $2`,
        [id, current.version, JSON.stringify(graph.steps), JSON.stringify(graph.connections)],
      );
      if (!rows[0]?.same) {
        version = current.version + 1;
        await tx.query(
          `INSERT INTO automation_versions (automation_id, version, steps, connections)
           VALUES ($1, $2, $3::jsonb, $4::jsonb)`,
          [id, version, JSON.stringify(graph.steps), JSON.stringify(graph.connections)],
        );
      }
    } else if (changes.status === 'enabled') {
      const { rows } = await tx.query<{ steps: unknown; connections: unknown }>(
        'SELECT steps, connections FROM automation_versions WHERE automation_id = $1 AND version = $2',
        [id, current.version],
      );
      graph = await checkedGraph(tx, organizationId, rows[0]!.steps, rows[0]!.connections);
    }
    await tx.query(
      `UPDATE automations
          SET name = coalesce($3, name), status = coalesce($4, status), version = $5,
              trigger_event = coalesce($6, trigger_event), updated_at = now()
        WHERE id = $2 AND organization_id = $1`,
      [organizationId, id, changes.name ?? null, changes.status ?? null, version, graph?.triggerEvent ?? null],
    );
    return { id };
  });
}

/** Its versions, runs and run steps go with it (ON DELETE CASCADE); a step job of a deleted run finds nothing to do. */
export async function deleteAutomation(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Automation');
  const { rows } = await db.query<{ id: string }>(
    'DELETE FROM automations WHERE id = $2 AND organization_id = $1 RETURNING id',
    [organizationId, id],
  );
  if (!rows[0]) throw notFound('Automation');
  return { id: rows[0].id };
}

/** A new automation with a copy of the current graph as its first version, named "<name> (copy)", disabled. */
export async function duplicateAutomation(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Automation');
  const { rows } = await db.query<{ id: string }>(
    `WITH source AS (
       SELECT a.name, a.trigger_event, v.steps, v.connections
         FROM automations a
         JOIN automation_versions v ON v.automation_id = a.id AND v.version = a.version
        WHERE a.id = $2 AND a.organization_id = $1
     ), copy AS (
       INSERT INTO automations (organization_id, name, status, version, trigger_event)
       SELECT $1, name || ' (copy)', 'disabled', 1, trigger_event FROM source RETURNING id
     ), first_version AS (
       INSERT INTO automation_versions (automation_id, version, steps, connections)
       SELECT copy.id, 1, source.steps, source.connections FROM copy, source
     )
     SELECT id FROM copy`,
    [organizationId, id],
  );
  if (!rows[0]) throw notFound('Automation');
  return { id: rows[0].id };
}

/**
 * Disables the automation and cancels its running runs, in one transaction: each run reads cancelled
 * with its completed_at, and its steps not yet done (pending, running, waiting) read cancelled. The
 * runs are updated first, so a step written by a run's job while this runs is either seen by the
 * steps' update (it committed first) or written for a run already cancelled, which its job then skips.
 */
export async function stopAutomation(db: Database, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Automation');
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ id: string }>(
      `UPDATE automations SET status = 'disabled', updated_at = now()
        WHERE id = $2 AND organization_id = $1 RETURNING id`,
      [organizationId, id],
    );
    if (!rows[0]) throw notFound('Automation');
    // The runs locked in the order of their ids, the order the engine locks several in.
    await tx.query(
      `UPDATE automation_runs SET status = 'cancelled', completed_at = now()
        WHERE id IN (SELECT id FROM automation_runs WHERE automation_id = $1 AND status = 'running'
                      ORDER BY id FOR UPDATE)`,
      [id],
    );
    await tx.query(
      `UPDATE automation_run_steps s SET status = 'cancelled', completed_at = now(), wait_event = NULL
         FROM automation_runs r
        WHERE s.automation_id = $1 AND s.status IN ('pending', 'running', 'waiting')
          AND r.id = s.run_id AND r.status = 'cancelled'`,
      [id],
    );
    return { id };
  });
}

/**
 * For each step of the current graph, how many times runs (of any version) entered it and how many of
 * those are waiting, completed, failed or skipped: counted by the index on (automation_id, step_key, status).
 */
export async function stepCounts(
  db: Queryable,
  organizationId: string,
  id: string,
): Promise<{ object: 'list'; data: StepCount[] }> {
  const automation = await getAutomation(db, organizationId, id);
  const { rows } = await db.query<{ step_key: string; status: string; count: number }>(
    `SELECT step_key, status, count(*)::int AS count
       FROM automation_run_steps WHERE automation_id = $1
      GROUP BY step_key, status`,
    [automation.id],
  );
  const counts = new Map<string, StepCount>();
  for (const step of automation.steps) {
    counts.set(step.key, {
      key: step.key,
      type: step.type,
      entered: 0,
      waiting: 0,
      completed: 0,
      failed: 0,
      skipped: 0,
    });
  }
  for (const row of rows) {
    const count = counts.get(row.step_key);
    if (!count) continue; // a step of an older version only
    count.entered += row.count;
    if (row.status === 'waiting' || row.status === 'completed' || row.status === 'failed' || row.status === 'skipped') {
      count[row.status] += row.count;
    }
  }
  return { object: 'list', data: [...counts.values()] };
}

function toListItem(row: AutomationRow): AutomationListItem {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}
