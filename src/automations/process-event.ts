import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { ensureContactIn } from '../contacts/contacts.ts';
import type { Job, JobHandler, JobResult } from '../queue/worker.ts';
import { checkRule, ruleHolds } from './condition-rules.ts';
import { ruleContext } from './instant-steps.ts';
import { followFrom, settleStep, startWalk, type SharedWalkState } from './run-graph.ts';
import { graphOf, readRun, type EngineContext } from './step-jobs.ts';
import type { AutomationConnection, AutomationStep } from './automation-model.ts';

// The job of one event an application sent (POST /events/send). In one transaction it finds (or, for an
// address that is no contact yet, creates) the event's contact, resumes the runs of this contact waiting
// for an event of this name (whose filter, if any, the payload meets), starts a run of every enabled
// automation this event triggers, and marks the event processed: processed twice (the worker died before
// the job was removed), it finds the mark and does nothing. Runs are unique per (automation, event) as
// well. Waits are resumed before runs start, so a run never resumes on the event that started it.

interface ReceivedEvent {
  id: string;
  organization_id: string;
  name: string;
  email: string | null;
  payload: Record<string, unknown>;
  processed_at: Date | null;
  /** The contact the event names, by id or by address, if it exists. */
  found_id: string | null;
  found_email: string | null;
}

export function eventJobHandler(context: EngineContext): JobHandler {
  return async (job: Job): Promise<JobResult> => {
    const eventId = String(job.payload.event_id);
    const now = context.clock();
    await context.db.transaction(async (tx) => {
      const event = await readEvent(tx, eventId);
      if (!event || event.processed_at) return;
      const contact = await contactOf(tx, event);
      await tx.query('UPDATE received_events SET processed_at = $2, contact_id = $3 WHERE id = $1', [
        eventId,
        now,
        contact?.id ?? null,
      ]);
      // The contact was deleted since the event was sent: there is no one to run anything for.
      if (!contact) return;
      const shared = { contactDeleted: false };
      await resumeWaits(tx, event, contact.id, now, shared);
      // A resumed run's contact_delete step deleted the contact: there is no one to start runs for.
      if (!shared.contactDeleted) await startRuns(tx, event, contact, now, shared);
    });
    return { done: true };
  };
}

/** The event, locked, with the contact it names (by id, or by address), in one read. */
async function readEvent(db: Queryable, id: string): Promise<ReceivedEvent | undefined> {
  const { rows } = await db.query<ReceivedEvent>(
    `SELECT e.id, e.organization_id, e.name, e.email, e.payload, e.processed_at,
            coalesce(by_id.id, by_address.id) AS found_id, coalesce(by_id.email, by_address.email) AS found_email
       FROM received_events e
       LEFT JOIN contacts by_id ON by_id.id = e.contact_id AND by_id.organization_id = e.organization_id
       LEFT JOIN contacts by_address ON e.contact_id IS NULL AND by_address.organization_id = e.organization_id
                                    AND lower(by_address.email) = lower(e.email)
      WHERE e.id = $1 FOR UPDATE OF e`,
    [id],
  );
  return rows[0];
}

/** The event's contact; one named by an address that is no contact yet is created (as POST /contacts would). */
async function contactOf(tx: Queryable, event: ReceivedEvent): Promise<{ id: string; email: string } | undefined> {
  if (event.found_id) {
    // Locked against deletion until the runs started for it are written: a deletion then cancels them.
    const { rows } = await tx.query<{ id: string; email: string }>(
      'SELECT id, email FROM contacts WHERE id = $1 FOR KEY SHARE',
      [event.found_id],
    );
    return rows[0];
  }
  if (!event.email) return undefined;
  try {
    return await ensureContactIn(tx, event.organization_id, event.email);
  } catch (error) {
    // An address the contacts refuse starts nothing (the event is kept, processed, with no contact).
    if (error instanceof ServiceError) return undefined;
    throw error;
  }
}

async function startRuns(
  tx: Queryable,
  event: ReceivedEvent,
  contact: { id: string; email: string },
  now: Date,
  shared: SharedWalkState,
) {
  // The runs are written with the automations they start from, in one statement.
  const { rows } = await tx.query<{
    run_id: string;
    automation_id: string;
    steps: AutomationStep[];
    connections: AutomationConnection[];
  }>(
    `WITH triggered AS (
       SELECT a.id, a.version, v.steps, v.connections
         FROM automations a JOIN automation_versions v ON v.automation_id = a.id AND v.version = a.version
        WHERE a.organization_id = $1 AND a.trigger_event = $2 AND a.status = 'enabled'
          -- A stop committing meanwhile is waited for (and then starts nothing); one after sees these runs.
          FOR SHARE OF a),
     started AS (
       INSERT INTO automation_runs (organization_id, automation_id, version, event_id, contact_id, contact_email,
              status, started_at, created_at)
       SELECT $1, id, version, $3, $4, $5, 'running', $6, $6 FROM triggered ORDER BY id
       ON CONFLICT (automation_id, event_id) DO NOTHING
       RETURNING id, automation_id)
     SELECT started.id AS run_id, started.automation_id, triggered.steps, triggered.connections
       FROM started JOIN triggered ON triggered.id = started.automation_id
      ORDER BY started.automation_id`,
    [event.organization_id, event.name, event.id, contact.id, contact.email, now],
  );
  for (const started of rows) {
    const run = {
      id: started.run_id,
      organizationId: event.organization_id,
      automationId: started.automation_id,
      contactId: contact.id,
      eventPayload: event.payload,
      graph: graphOf(started.steps, started.connections),
    };
    await startWalk(tx, run, now, shared);
  }
}

async function resumeWaits(tx: Queryable, event: ReceivedEvent, contactId: string, now: Date, shared: SharedWalkState) {
  const { rows } = await tx.query<{ run_id: string; seq: number }>(
    `SELECT run_id, seq FROM automation_run_steps
      WHERE organization_id = $1 AND contact_id = $2 AND wait_event = $3 AND status = 'waiting'
      ORDER BY run_id, seq`,
    [event.organization_id, contactId, event.name],
  );
  for (const waiting of rows) {
    const state = await readRun(tx, waiting.run_id, { lock: true, seq: waiting.seq });
    if (!state || state.run.status !== 'running' || state.step?.status !== 'waiting') continue;
    const { run } = state;
    const step = run.graph.steps.find((candidate) => candidate.key === state.step!.step_key);
    if (!step) continue;
    // A wait's filter reads the payload of the event that arrived, and the contact.
    if (step.config.filter_rule !== undefined && step.config.filter_rule !== null) {
      const rule = checkRule(step.config.filter_rule, 'config.filter_rule');
      if (!ruleHolds(rule, await ruleContext(tx, run, event.payload))) continue;
    }
    if (shared.contactDeleted) return;
    await settleStep(tx, run.id, waiting.seq, {
      status: 'completed',
      at: now,
      output: { event_id: event.id, payload: event.payload },
    });
    await followFrom(tx, run, step.key, 'event_received', { now, lastSeq: state.lastSeq, shared });
  }
}
