import type { Queryable } from '../platform/db/database.ts';
import { Batcher } from '../platform/db/batcher.ts';
import { ensureContactsIn } from '../contacts/contacts.ts';
import type { Job, JobHandler, JobResult } from '../queue/worker.ts';
import { checkRule, ruleHolds } from './condition-rules.ts';
import { ruleContext } from './instant-steps.ts';
import { followFrom, settleStep, startWalk, type SharedWalkState } from './run-graph.ts';
import { StepWrites } from './step-writes.ts';
import { graphOf, readRun, type EngineContext } from './step-jobs.ts';
import type { AutomationConnection, AutomationStep } from './automation-model.ts';

// The jobs of the events applications send (POST /events/send). For each event, in one transaction, the
// engine finds (or, for an address that is no contact yet, creates) the event's contact, resumes the runs
// of this contact waiting for an event of this name (whose filter, if any, the payload meets), starts a
// run of every enabled automation this event triggers, and marks the event processed: processed twice
// (the worker died before the job was removed), it finds the mark and does nothing. Runs are unique per
// (automation, event) as well. Waits are resumed before runs start, so a run never resumes on the event
// that started it.
//
// The event jobs running at once in a process are processed together, in one transaction and a handful
// of statements whatever their number (each step is a set: all the events' contacts, all their runs, all
// the steps their walks enter). One contact's events are taken in the order they were received, a round
// each, so that the second sees what the first did (a wait it started resumes on it).

/** Events processed by one transaction at most. */
const MAX_EVENTS_PER_BATCH = 500;

interface ReceivedEvent {
  id: string;
  organization_id: string;
  name: string;
  email: string | null;
  payload: Record<string, unknown>;
  processed_at: Date | null;
  /** The contact the event names, by id or by address, if it exists. */
  found_id: string | null;
}

type Contact = { id: string; email: string };

export function eventJobHandler(context: EngineContext): JobHandler {
  const batches = new Batcher<string, void>(context.db, {
    maxSize: MAX_EVENTS_PER_BATCH,
    run: async (tx, eventIds) => {
      await processEvents(tx, eventIds, context.clock());
      return eventIds.map(() => undefined);
    },
  });
  return async (job: Job): Promise<JobResult> => {
    await batches.add(String(job.payload.event_id));
    return { done: true };
  };
}

/** Processes the events not processed yet among `eventIds` (see the top of this file). */
export async function processEvents(tx: Queryable, eventIds: string[], now: Date): Promise<void> {
  const events = await readEvents(tx, eventIds);
  for (const round of roundsByContact(events)) await processRound(tx, round, now);
}

/** The events, locked (in id order), with the contact each names (by id, or by address), in one read. */
async function readEvents(db: Queryable, ids: string[]): Promise<Array<ReceivedEvent & { received_at: Date }>> {
  const { rows } = await db.query<ReceivedEvent & { received_at: Date }>(
    `SELECT e.id, e.organization_id, e.name, e.email, e.payload, e.processed_at, e.received_at,
            coalesce(by_id.id, by_address.id) AS found_id
       FROM received_events e
       LEFT JOIN contacts by_id ON by_id.id = e.contact_id AND by_id.organization_id = e.organization_id
       LEFT JOIN contacts by_address ON e.contact_id IS NULL AND by_address.organization_id = e.organization_id
                                    AND lower(by_address.email) = lower(e.email)
      WHERE e.id = ANY($1::uuid[]) AND e.processed_at IS NULL
      ORDER BY e.id FOR UPDATE OF e`,
    [[...new Set(ids)]],
  );
  return rows;
}

/**
 * The events in rounds: each contact's first event in the first round, its second in the second, and so
 * on, in the order received; an event whose contact is not known yet (an address) is its address's.
 */
function roundsByContact(events: Array<ReceivedEvent & { received_at: Date }>): ReceivedEvent[][] {
  const ordered = [...events].sort(
    (a, b) => a.received_at.getTime() - b.received_at.getTime() || (a.id < b.id ? -1 : 1),
  );
  const rounds: ReceivedEvent[][] = [];
  const seen = new Map<string, number>();
  for (const event of ordered) {
    const contactKey = `${event.organization_id}:${event.found_id ?? (event.email ?? event.id).toLowerCase()}`;
    const round = seen.get(contactKey) ?? 0;
    seen.set(contactKey, round + 1);
    (rounds[round] ??= []).push(event);
  }
  return rounds;
}

/** One round: events of distinct contacts. */
async function processRound(tx: Queryable, events: ReceivedEvent[], now: Date): Promise<void> {
  const contacts = await contactsOf(tx, events);
  await tx.query(
    `UPDATE received_events e SET processed_at = $3, contact_id = c.contact_id
       FROM unnest($1::uuid[], $2::uuid[]) AS c(id, contact_id) WHERE e.id = c.id`,
    [events.map((event) => event.id), events.map((event) => contacts.get(event.id)?.id ?? null), now],
  );
  // An event whose contact was deleted since it was sent has no one to run anything for.
  const withContact = events.filter((event) => contacts.has(event.id));
  const shared = new Map(withContact.map((event) => [event.id, { contactDeleted: false }]));
  const waiting = await waitingFor(tx, withContact, contacts);
  // The waiting runs locked together, in id order (as every other locker of runs takes them), before
  // each event resumes its own.
  if (waiting.size > 0) {
    await tx.query('SELECT 1 FROM automation_runs WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [
      [...new Set([...waiting.values()].flat())].sort(),
    ]);
  }
  for (const event of withContact) {
    if (waiting.has(event.id)) await resumeWaits(tx, event, contacts.get(event.id)!.id, now, shared.get(event.id)!);
  }
  // A resumed run's contact_delete step deleted the contact: there is no one to start runs for.
  const starting = withContact.filter((event) => !shared.get(event.id)!.contactDeleted);
  if (starting.length > 0) await startRuns(tx, starting, contacts, now, shared);
}

/**
 * Each event's contact: one named by an address that is no contact yet is created (as POST /contacts
 * would); an address the contacts refuse has none. Existing ones are locked against deletion until the
 * runs started for them are written: a deletion then cancels them.
 */
async function contactsOf(tx: Queryable, events: ReceivedEvent[]): Promise<Map<string, Contact>> {
  const contacts = new Map<string, Contact>();
  const foundIds = [...new Set(events.flatMap((event) => (event.found_id ? [event.found_id] : [])))].sort();
  if (foundIds.length > 0) {
    const { rows } = await tx.query<Contact>(
      'SELECT id, email FROM contacts WHERE id = ANY($1::uuid[]) ORDER BY id FOR KEY SHARE',
      [foundIds],
    );
    const byId = new Map(rows.map((row) => [row.id, row]));
    for (const event of events) {
      const contact = event.found_id ? byId.get(event.found_id) : undefined;
      if (contact) contacts.set(event.id, contact);
    }
  }
  // An address with no contact yet, or whose contact was deleted since the event was read (by an earlier
  // round's walk, or the API), has one made.
  const byAddress = events.filter((event) => !contacts.has(event.id) && event.email);
  for (const organizationId of [...new Set(byAddress.map((event) => event.organization_id))].sort()) {
    const theirs = byAddress.filter((event) => event.organization_id === organizationId);
    const ensured = await ensureContactsIn(
      tx,
      organizationId,
      theirs.map((event) => event.email!),
    );
    for (const event of theirs) {
      const contact = ensured.get(event.email!);
      if (contact) contacts.set(event.id, contact);
    }
  }
  return contacts;
}

/** The events (of this round) for whose contact and name some run is waiting, with those runs. */
async function waitingFor(
  tx: Queryable,
  events: ReceivedEvent[],
  contacts: Map<string, Contact>,
): Promise<Map<string, string[]>> {
  if (events.length === 0) return new Map();
  const { rows } = await tx.query<{ organization_id: string; contact_id: string; wait_event: string; run_id: string }>(
    `SELECT s.organization_id, s.contact_id, s.wait_event, s.run_id
       FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS w(organization_id, contact_id, name)
       JOIN automation_run_steps s ON s.organization_id = w.organization_id AND s.contact_id = w.contact_id
                                  AND s.wait_event = w.name AND s.status = 'waiting'`,
    [
      events.map((event) => event.organization_id),
      events.map((event) => contacts.get(event.id)!.id),
      events.map((event) => event.name),
    ],
  );
  const runs = new Map<string, string[]>();
  for (const row of rows) {
    const key = `${row.organization_id}:${row.contact_id}:${row.wait_event}`;
    runs.set(key, [...(runs.get(key) ?? []), row.run_id]);
  }
  const waiting = new Map<string, string[]>();
  for (const event of events) {
    const found = runs.get(`${event.organization_id}:${contacts.get(event.id)!.id}:${event.name}`);
    if (found) waiting.set(event.id, found);
  }
  return waiting;
}

async function startRuns(
  tx: Queryable,
  events: ReceivedEvent[],
  contacts: Map<string, Contact>,
  now: Date,
  shared: Map<string, SharedWalkState>,
) {
  // The runs are written with the automations they start from, in one statement.
  const incoming = events.map((event) => ({
    event_id: event.id,
    organization_id: event.organization_id,
    name: event.name,
    contact_id: contacts.get(event.id)!.id,
    contact_email: contacts.get(event.id)!.email,
  }));
  const { rows } = await tx.query<{
    run_id: string;
    automation_id: string;
    event_id: string;
    steps: AutomationStep[];
    connections: AutomationConnection[];
  }>(
    `WITH incoming AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb)
           AS r(event_id uuid, organization_id uuid, name text, contact_id uuid, contact_email text)),
     triggered AS (
       SELECT a.id, a.organization_id, a.trigger_event, a.version, v.steps, v.connections
         FROM automations a JOIN automation_versions v ON v.automation_id = a.id AND v.version = a.version
        WHERE (a.organization_id, a.trigger_event) IN (SELECT organization_id, name FROM incoming)
          AND a.status = 'enabled'
        ORDER BY a.id
          -- A stop committing meanwhile is waited for (and then starts nothing); one after sees these runs.
          FOR SHARE OF a),
     started AS (
       INSERT INTO automation_runs (organization_id, automation_id, version, event_id, contact_id, contact_email,
              status, started_at, created_at)
       SELECT i.organization_id, t.id, t.version, i.event_id, i.contact_id, i.contact_email, 'running', $2, $2
         FROM incoming i JOIN triggered t ON t.organization_id = i.organization_id AND t.trigger_event = i.name
        ORDER BY i.event_id, t.id
       ON CONFLICT (automation_id, event_id) DO NOTHING
       RETURNING id, automation_id, event_id)
     SELECT started.id AS run_id, started.automation_id, started.event_id, triggered.steps, triggered.connections
       FROM started JOIN triggered ON triggered.id = started.automation_id
      ORDER BY started.event_id, started.automation_id`,
    [JSON.stringify(incoming), now],
  );
  const byId = new Map(events.map((event) => [event.id, event]));
  // Every run's steps are written together, once all have walked.
  const writes = new StepWrites(tx);
  for (const started of rows) {
    const event = byId.get(started.event_id)!;
    const run = {
      id: started.run_id,
      organizationId: event.organization_id,
      automationId: started.automation_id,
      contactId: contacts.get(event.id)!.id,
      eventPayload: event.payload,
      graph: graphOf(started.steps, started.connections),
    };
    await startWalk(writes, run, now, shared.get(event.id)!);
  }
  await writes.flush();
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
