import { parseMailbox } from '../platform/addresses.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { isFinalRefusal, notFound, ServiceError, type ErrorDetail } from '../platform/errors.ts';
import { isUuid, newRowId } from '../platform/ids.ts';
import {
  claimIdempotencyKey,
  releaseIdempotencyKey,
  rememberResult,
  rememberResultsFrom,
  type IdempotencyKey,
} from '../platform/idempotency.ts';
import { enqueueJobsFromRows } from '../queue/jobs.ts';
import { EVENT_QUEUE } from './automation-model.ts';
import { schemaOf } from './event-definitions.ts';
import { checkedEventName, checkedPayload, checkPayloadAgainst } from './event-schema.ts';

// Accepting an event (POST /events/send): the event is checked (its name, exactly one of contact_id and
// email, its payload against its definition's schema when it has one), then stored with its
// 'automation-event' job in one statement, which also checks that a contact_id names a contact of the
// organization and remembers the result under the request's idempotency key. The worker of that queue
// processes the event: for an email that no contact has yet, it creates the contact then, not here, so
// an event accepted costs one round trip (two with an Idempotency-Key, whose claim comes first).
//
// Events sent at the same time are stored together: while one statement is in flight, the next ones wait
// and go in one statement of many rows (one commit for all; platform/db/batcher.ts). Each request is
// answered once the statement holding it has committed.

export interface EventToSend {
  event: string;
  contact_id?: string;
  email?: string;
  payload?: unknown;
}

/** An accepted event's answer (Resend's, with the id of the event received), or the request's refusal. */
export type SendEventResult = { object: 'event'; event: string; id: string } | { refused: ErrorDetail };

export interface SendEventOutcome {
  result: SendEventResult;
  /** The stored result of an earlier request with the same idempotency key: nothing was done this time. */
  replayed: boolean;
}

/**
 * Accepts one event under an optional idempotency key. `input` may be the refusal its carrier met
 * reading the request (remembered under the key like any refusal).
 */
export async function sendEvent(
  db: Database,
  organizationId: string,
  input: EventToSend | ServiceError,
  idempotency: IdempotencyKey | undefined,
): Promise<SendEventOutcome> {
  if (idempotency) {
    const claim = await claimIdempotencyKey(db, idempotency);
    if (!claim.claimed) return { result: claim.result as SendEventResult, replayed: true };
  }
  let result: SendEventResult;
  try {
    if (input instanceof ServiceError) throw input;
    result = await accept(db, organizationId, input, idempotency);
  } catch (error) {
    if (!(error instanceof ServiceError)) {
      // Freed for a retry; when the database is down it cannot be, and the claim runs out its lease.
      if (idempotency) await releaseIdempotencyKey(db, idempotency).catch(() => {});
      throw error;
    }
    result = { refused: error.detail() };
    // An accepted event was remembered by the statement that stored it; a refusal the same request would
    // meet again is remembered now, and any other frees the key for a retry.
    if (idempotency && isFinalRefusal(error.name)) await rememberResult(db, idempotency, result);
    else if (idempotency) await releaseIdempotencyKey(db, idempotency);
  }
  return { result, replayed: false };
}

async function accept(
  db: Database,
  organizationId: string,
  input: EventToSend,
  idempotency: IdempotencyKey | undefined,
): Promise<SendEventResult> {
  const name = checkedEventName(input.event, 'event');
  const contact = contactOf(input);
  const payload = checkedPayload(input.payload);
  const schema = await schemaOf(db, organizationId, name);
  if (schema) checkPayloadAgainst(schema, payload);

  const id = newRowId();
  const result = { object: 'event' as const, event: name, id };
  const stored = await eventWriter(db).add({
    id,
    organization_id: organizationId,
    name,
    contact_id: contact.contactId ?? null,
    email: contact.email ?? null,
    payload,
    idempotency_key: idempotency?.key ?? null,
    result,
  });
  if (!stored) throw notFound('Contact');
  return result;
}

/** The contact the event is about: an id of the organization's (checked when stored), or an address. */
function contactOf(input: EventToSend): { contactId?: string; email?: string } {
  if (input.contact_id !== undefined && input.email !== undefined) {
    throw new ServiceError('validation_error', 'Give either contact_id or email, not both');
  }
  if (input.contact_id !== undefined) {
    if (!isUuid(input.contact_id)) {
      throw new ServiceError('validation_error', 'contact_id must be the id of a contact (a UUID)', 'contact_id');
    }
    return { contactId: input.contact_id };
  }
  if (input.email !== undefined) {
    const mailbox = parseMailbox(input.email, 'email');
    if (mailbox.name !== undefined) {
      throw new ServiceError(
        'validation_error',
        'Invalid address in email: give the bare address, without a name',
        'email',
      );
    }
    return { email: mailbox.address };
  }
  throw new ServiceError('missing_required_field', 'Give the contact the event is about: contact_id or email');
}

/** One event as the statement stores it. */
interface EventRow {
  id: string;
  organization_id: string;
  name: string;
  contact_id: string | null;
  email: string | null;
  payload: Record<string, unknown>;
  /** The request's idempotency key, under which `result` is remembered when the event is stored. */
  idempotency_key: string | null;
  result: unknown;
}

/**
 * Stores events, each with its job, and remembers each one's result under its idempotency key, in one
 * statement: an event naming a contact that is not its organization's is not stored (false).
 */
async function storeEvents(db: Queryable, events: EventRow[]): Promise<boolean[]> {
  const { rows } = await db.query<{ id: string }>(
    `WITH sent AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS e(id uuid, organization_id uuid, name text, contact_id uuid,
                                                        email text, payload jsonb, idempotency_key text, result jsonb)
     ),
     stored AS (
       INSERT INTO received_events (id, organization_id, name, contact_id, email, payload)
       SELECT e.id, e.organization_id, e.name, e.contact_id, e.email, e.payload FROM sent e
        WHERE e.contact_id IS NULL
           OR EXISTS (SELECT 1 FROM contacts c WHERE c.id = e.contact_id AND c.organization_id = e.organization_id)
       RETURNING id, organization_id
     ),
     queued AS (
       ${enqueueJobsFromRows({
         from: 'stored',
         queue: EVENT_QUEUE,
         payload: `jsonb_build_object('event_id', stored.id)`,
         shareKey: 'stored.organization_id::text',
       })}
     ),
     remembered AS (
       ${rememberResultsFrom(`(SELECT coalesce(jsonb_agg(jsonb_build_object('organization_id', e.organization_id,
                                      'key', e.idempotency_key, 'result', e.result)), '[]'::jsonb)
                                 FROM sent e JOIN stored s ON s.id = e.id
                                WHERE e.idempotency_key IS NOT NULL)`)}
     )
     SELECT id FROM stored`,
    [JSON.stringify(events)],
  );
  const storedIds = new Set(rows.map((row) => row.id));
  return events.map((event) => storedIds.has(event.id));
}

// One writer per database handle: a statement at a time, the events that arrive meanwhile in the next.
// A payload is at most 32 KiB, so a statement of 250 events stays under about 8 MiB.
const eventWriter = batcherPerDatabase<EventRow, boolean>({
  transaction: false,
  run: (db, events) => storeEvents(db, events),
  maxSize: 250,
});
