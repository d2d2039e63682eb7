import type { Config } from '../platform/config.ts';
import { messagesAccepted } from '../platform/metrics.ts';
import type { Database } from '../platform/db/database.ts';
import { isFinalRefusal, ServiceError, type ErrorDetail } from '../platform/errors.ts';
import {
  claimIdempotencyKey,
  releaseIdempotencyKey,
  rememberResult,
  type IdempotencyKey,
} from '../platform/idempotency.ts';
import { acceptMessages, type Outcome } from './accept-messages.ts';
import { MAX_BATCH, refuseFieldsNotInBatch, validateBatchEntry } from './batch-entry.ts';
import type { EmailMessage } from './message-schema.ts';
import { newRequestScope, prepareMessage, type PreparedMessage } from './prepare-message.ts';
import type { RateLimitState } from './sending-limits.ts';

// The accept core: every way of sending (POST /emails, POST /emails/batch, and any other carrier of a
// message) comes through here with plain data and gets plain outcomes back. It checks each message,
// applies the organization's limits, stores what is accepted with its delivery job, and remembers the
// result under the request's idempotency key. How a result is answered is the carrier's business.

/** What a send asked for, and, for an API key limited to one domain (Resend's domain_id), that domain. */
export type SendRequest = { onlyFromDomainId?: string | null } & (
  | {
      kind: 'single';
      /** The message, or the refusal its carrier met reading it (remembered like any refusal). */
      message: EmailMessage | ServiceError;
    }
  | {
      kind: 'batch';
      /** Strict: any invalid entry, or any refused by a limit, refuses the whole batch. */
      strict: boolean;
      /** The batch as received: checked here, entry by entry. */
      entries: unknown;
    }
);

/**
 * The result of a send, as remembered under an idempotency key: one outcome per submitted message, or
 * a refusal of the whole request.
 */
export type SendResult = { entries: Outcome[] } | { refused: ErrorDetail };

export interface SendOutcome {
  result: SendResult;
  /** The result of an earlier request with the same idempotency key: nothing was done this time. */
  replayed: boolean;
  /** The organization's rate-limit state after this send, when the send reached the limits. */
  rate?: RateLimitState;
}

export async function sendEmails(
  db: Database,
  config: Config,
  organizationId: string,
  request: SendRequest,
  idempotency: IdempotencyKey | undefined,
): Promise<SendOutcome> {
  if (idempotency) {
    const claim = await claimIdempotencyKey(db, idempotency);
    if (!claim.claimed) return { result: claim.result as SendResult, replayed: true };
  }
  let outcome: SendOutcome;
  try {
    outcome = await send(db, config, organizationId, request, idempotency);
  } catch (error) {
    if (!(error instanceof ServiceError)) {
      // Freed for a retry; when the database is down it cannot be, and the claim runs out its lease.
      if (idempotency) await releaseIdempotencyKey(db, idempotency).catch(() => {});
      throw error;
    }
    outcome = { result: { refused: error.detail() }, replayed: false };
  }
  if (idempotency) await settleKey(db, idempotency, outcome.result);
  return outcome;
}

/**
 * A result with an accepted message was remembered in the transaction that stored it. Any other is
 * remembered now when the same request would meet it again (a refusal of the request itself, every
 * entry of a batch refused as invalid); after a limit's refusal the key is freed for a retry.
 */
async function settleKey(db: Database, idempotency: IdempotencyKey, result: SendResult): Promise<void> {
  if ('entries' in result) {
    if (!result.entries.some((entry) => entry.accepted)) await rememberResult(db, idempotency, result);
  } else if (isFinalRefusal(result.refused.name)) {
    await rememberResult(db, idempotency, result);
  } else {
    await releaseIdempotencyKey(db, idempotency);
  }
}

async function send(
  db: Database,
  config: Config,
  organizationId: string,
  request: SendRequest,
  idempotency: IdempotencyKey | undefined,
): Promise<SendOutcome> {
  const now = new Date();
  if (request.kind === 'single') {
    if (request.message instanceof ServiceError) throw request.message;
    const scope = newRequestScope(config, request.onlyFromDomainId ?? null);
    const message = await prepareMessage(db, config, organizationId, request.message, now, scope);
    const { outcomes, rate } = await acceptMessages(db, [message], {
      organizationId,
      allOrNothing: true,
      idempotency,
      resultOf: (entries) => ({ entries }),
    });
    const [outcome] = outcomes;
    if (!outcome!.accepted) return { result: { refused: outcome!.error }, replayed: false };
    return { result: { entries: outcomes }, replayed: false, rate };
  }

  const entries = checkBatch(request.entries);
  if (request.strict) refuseUnsupportedInBatch(entries);
  // Each entry is checked on its own, by the rules of a single send; a refused entry does not stop the
  // others. A file host that did not answer fails the whole request (503, nothing stored), for the client
  // to retry it whole.
  const checked: Array<PreparedMessage | ServiceError> = [];
  const scope = newRequestScope(config, request.onlyFromDomainId ?? null);
  for (const entry of entries) {
    try {
      checked.push(await prepareMessage(db, config, organizationId, validateBatchEntry(entry), now, scope));
    } catch (error) {
      if (!(error instanceof ServiceError) || error.name === 'service_unavailable') throw error;
      checked.push(error);
    }
  }
  const invalid = checked.flatMap((c, index) => (c instanceof ServiceError ? [{ index, error: c }] : []));
  if (request.strict && invalid.length > 0) throw strictRefusal(invalid);

  const prepared = checked.filter((c): c is PreparedMessage => !(c instanceof ServiceError));
  const resultOf = (outcomes: Outcome[]) => batchResult(checked, outcomes);
  if (prepared.length === 0) return { result: resultOf([]), replayed: false };
  const { outcomes, rate } = await acceptMessages(db, prepared, {
    organizationId,
    allOrNothing: request.strict,
    idempotency,
    resultOf,
  });
  const result = resultOf(outcomes);
  return 'refused' in result ? { result, replayed: false } : { result, replayed: false, rate };
}

function checkBatch(entries: unknown): unknown[] {
  if (!Array.isArray(entries)) throw new ServiceError('validation_error', 'The body must be a JSON array of emails');
  if (entries.length === 0) throw new ServiceError('validation_error', 'The batch is empty');
  if (entries.length > MAX_BATCH) {
    throw new ServiceError(
      'validation_error',
      `A batch holds at most ${MAX_BATCH} emails; this one has ${entries.length}`,
    );
  }
  return entries;
}

/** One outcome per submitted entry, in order: its refusal, or what became of it when it was accepted. */
function batchResult(checked: Array<PreparedMessage | ServiceError>, outcomes: Outcome[]): SendResult {
  // Nothing accepted because a limit was already spent: the whole request is refused with that limit.
  const first = outcomes[0];
  if (first && !first.accepted && outcomes.every((o) => !o.accepted)) return { refused: first.error };
  let next = 0;
  return {
    entries: checked.map((entry) =>
      entry instanceof ServiceError ? { accepted: false, error: entry.detail() } : outcomes[next++]!,
    ),
  };
}

/**
 * A strict batch with template or topic_id in any entry is refused for that field before anything is
 * read or fetched, whatever else its entries hold: the entry's index is in the message.
 */
function refuseUnsupportedInBatch(entries: unknown[]): void {
  for (const [index, entry] of entries.entries()) {
    try {
      refuseFieldsNotInBatch(entry);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      throw new ServiceError(error.name, `Entry ${index}: ${error.message}`, error.field);
    }
  }
}

function strictRefusal(invalid: Array<{ index: number; error: ServiceError }>): ServiceError {
  const first = invalid[0]!;
  return new ServiceError(
    first.error.name,
    `Entry ${first.index}: ${first.error.message}` +
      (invalid.length > 1 ? ` (and ${invalid.length - 1} more invalid entries)` : ''),
    first.error.field === undefined ? String(first.index) : `${first.index}.${first.error.field}`,
  );
}

/** Counts a send's accepted messages in the metrics, by the carrier that brought them (not a replay's). */
export function countAccepted(carrier: 'api' | 'smtp', result: SendResult): void {
  const accepted = 'entries' in result ? result.entries.filter((entry) => entry.accepted).length : 0;
  if (accepted > 0) messagesAccepted.inc({ carrier }, accepted);
}
