import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { createContact } from '../contacts/contacts.ts';
import type { Job, JobHandler, JobResult } from '../queue/worker.ts';
import { checkRule, ruleHolds } from './condition-rules.ts';
import { ruleContext } from './instant-steps.ts';
import { followFrom, settleStep, startWalk } from './run-graph.ts';
import { graphOf, readRun, type EngineContext } from './step-jobs.ts';
import type { AutomationConnection, AutomationStep } from './automation-model.ts';

// The job of one event an application sent (POST /events/send). In one transaction it resumes the runs
// of this contact waiting for an event of this name (whose filter, if any, the payload meets), starts a
// run of every enabled automation this event triggers, and marks the event processed: processed twice
// (the worker died before the job was removed), it finds the mark and does nothing. Runs are unique per
// (automation, event) as well. Waits are resumed before runs start, so a run never resumes on the
// event that started it. A contact given by address that does not exist yet is created first.

interface ReceivedEvent {
  id: string;
  organization_id: string;
  name: string;
  contact_id: string | null;
  email: string | null;
  payload: Record<string, unknown>;
  processed_at: Date | null;
}

export function eventJobHandler(context: EngineContext): JobHandler {
  return async (job: Job): Promise<JobResult> => {
    const eventId = String(job.payload.event_id);
    const event = await readEvent(context.db, eventId, false);
    if (!event || event.processed_at) return { done: true };
    const contactId = event.contact_id ?? (event.email ? await contactByAddress(context, event) : null);
    const now = context.clock();
    await context.db.transaction(async (tx) => {
      const locked = await readEvent(tx, eventId, true);
      if (!locked || locked.processed_at) return;
      const contact = contactId ? await contactOf(tx, locked.organization_id, contactId) : undefined;
      await tx.query('UPDATE received_events SET processed_at = $2, contact_id = $3 WHERE id = $1', [
        eventId,
        now,
        contact?.id ?? contactId,
      ]);
      // The contact was deleted since the event was sent: there is no one to run anything for.
      if (!contact) return;
      await resumeWaits(tx, locked, contact.id, now);
      await startRuns(tx, locked, contact, now);
    });
    return { done: true };
  };
}

async function readEvent(db: Queryable, id: string, lock: boolean): Promise<ReceivedEvent | undefined> {
  const { rows } = await db.query<ReceivedEvent>(
    `SELECT id, organization_id, name, contact_id, email, payload, processed_at FROM received_events
      WHERE id = $1 ${lock ? 'FOR UPDATE' : ''}`,
    [id],
  );
  return rows[0];
}

async function contactOf(db: Queryable, organizationId: string, id: string) {
  const { rows } = await db.query<{ id: string; email: string }>(
    'SELECT id, email FROM contacts WHERE id = $1 AND organization_id = $2',
    [id, organizationId],
  );
  return rows[0];
}

/** The contact with the event's address, created (as POST /contacts would) when there is none. */
async function contactByAddress(context: EngineContext, event: ReceivedEvent): Promise<string | null> {
  const find = async () => {
    const { rows } = await context.db.query<{ id: string }>(
      'SELECT id FROM contacts WHERE organization_id = $1 AND lower(email) = lower($2)',
      [event.organization_id, event.email],
    );
    return rows[0]?.id;
  };
  const found = await find();
  if (found) return found;
  try {
    return (await createContact(context.db, event.organization_id, { email: event.email! })).id;
  } catch (error) {
    // Created meanwhile by another event or request: that contact it is. An address the contacts refuse
    // starts nothing (the event is kept, processed, with no contact).
    if (error instanceof ServiceError) return (await find()) ?? null;
    throw error;
  }
}

async function startRuns(tx: Queryable, event: ReceivedEvent, contact: { id: string; email: string }, now: Date) {
  const { rows } = await tx.query<{
    id: string;
    version: number;
    steps: AutomationStep[];
    connections: AutomationConnection[];
  }>(
    `SELECT a.id, a.version, v.steps, v.connections
       FROM automations a JOIN automation_versions v ON v.automation_id = a.id AND v.version = a.version
      WHERE a.organization_id = $1 AND a.trigger_event = $2 AND a.status = 'enabled'
      ORDER BY a.id`,
    [event.organization_id, event.name],
  );
  for (const automation of rows) {
    const inserted = await tx.query<{ id: string }>(
      `INSERT INTO automation_runs (organization_id, automation_id, version, event_id, contact_id, contact_email,
              status, started_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $7)
       ON CONFLICT (automation_id, event_id) DO NOTHING RETURNING id`,
      [event.organization_id, automation.id, automation.version, event.id, contact.id, contact.email, now],
    );
    const runId = inserted.rows[0]?.id;
    if (!runId) continue;
    const run = {
      id: runId,
      organizationId: event.organization_id,
      automationId: automation.id,
      contactId: contact.id,
      eventPayload: event.payload,
      graph: graphOf(automation.steps, automation.connections),
    };
    await startWalk(tx, run, { now });
  }
}

async function resumeWaits(tx: Queryable, event: ReceivedEvent, contactId: string, now: Date) {
  const { rows } = await tx.query<{ run_id: string; seq: number }>(
    `SELECT run_id, seq FROM automation_run_steps
      WHERE organization_id = $1 AND contact_id = $2 AND wait_event = $3 AND status = 'waiting'
      ORDER BY run_id, seq`,
    [event.organization_id, contactId, event.name],
  );
  for (const waiting of rows) {
    const run = await readRun(tx, waiting.run_id, { lock: true });
    if (!run || run.status !== 'running') continue;
    const { rows: current } = await tx.query<{ step_key: string; status: string }>(
      'SELECT step_key, status FROM automation_run_steps WHERE run_id = $1 AND seq = $2',
      [waiting.run_id, waiting.seq],
    );
    if (current[0]?.status !== 'waiting') continue;
    const step = run.graph.steps.find((candidate) => candidate.key === current[0]!.step_key);
    if (!step) continue;
    // A wait's filter reads the payload of the event that arrived, and the contact.
    if (step.config.filter_rule !== undefined && step.config.filter_rule !== null) {
      const rule = checkRule(step.config.filter_rule, 'config.filter_rule');
      if (!ruleHolds(rule, await ruleContext(tx, run, event.payload))) continue;
    }
    await settleStep(tx, run.id, waiting.seq, {
      status: 'completed',
      at: now,
      output: { event_id: event.id, payload: event.payload },
    });
    await followFrom(tx, run, step.key, 'event_received', { now });
  }
}
