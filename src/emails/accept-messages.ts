import type { Database } from '../platform/db/database.ts';
import { ServiceError, type ErrorDetail } from '../platform/errors.ts';
import type { IdempotencyKey } from '../platform/idempotency.ts';
import { commitAcceptance } from './group-commit.ts';
import type { PreparedMessage } from './prepare-message.ts';
import { refundRateTokens, takeRateTokens, type RateLimitState } from './sending-limits.ts';

/** What became of one message: accepted under its id, or refused and why. */
export type Outcome = { accepted: true; id: string } | { accepted: false; error: ErrorDetail };

export interface AcceptOptions<Result> {
  organizationId: string;
  /** Strict batches and single sends: either every message is accepted or none is. */
  allOrNothing: boolean;
  /** The request's idempotency key: `resultOf(outcomes)` is remembered under it in the same transaction. */
  idempotency: IdempotencyKey | undefined;
  resultOf(outcomes: Outcome[]): Result;
}

/**
 * Takes rate-limit tokens, then, in the next group commit (group-commit.ts), checks the monthly quota,
 * stores the messages, queues their delivery and charges the quota in one transaction: when it commits,
 * every accepted message, its recipients, attachments, `accepted` timeline entry and delivery job exist,
 * and not before. Messages past the point where the rate limit (then the quota) runs out are refused in
 * order; all-or-nothing refuses them all instead.
 */
export async function acceptMessages<Result>(
  db: Database,
  messages: PreparedMessage[],
  options: AcceptOptions<Result>,
): Promise<{ outcomes: Outcome[]; rate: RateLimitState }> {
  const { organizationId } = options;
  const taken = await takeRateTokens(db, organizationId, messages.length);
  const granted = options.allOrNothing && taken.granted < messages.length ? 0 : taken.granted;
  const outcomesFor = (count: number, fitting: number): Outcome[] =>
    messages.map((message, i): Outcome => {
      if (i < count) return { accepted: true, id: message.id };
      return { accepted: false, error: limitError(i < fitting ? 'quota' : 'rate', taken.state) };
    });
  // Tokens taken for messages that were not accepted go back; losing a refund only costs a few tokens, so
  // a failure here never turns a committed acceptance into an error.
  const refund = (count: number) => refundRateTokens(db, organizationId, count).catch(() => {});
  let accepted = 0;
  try {
    if (granted > 0) {
      accepted = await commitAcceptance(db, {
        organizationId,
        messages: messages.slice(0, granted),
        allOrNothing: options.allOrNothing,
        idempotency: options.idempotency,
        resultOf: (count) => options.resultOf(outcomesFor(count, granted)),
      });
    }
  } catch (error) {
    await refund(taken.granted);
    throw error;
  }
  await refund(taken.granted - accepted);
  return { outcomes: outcomesFor(accepted, granted), rate: stateAfterRefund(taken.state, taken.granted - accepted) };
}

function stateAfterRefund(state: RateLimitState, refunded: number): RateLimitState {
  return refunded > 0 ? { ...state, remaining: Math.min(state.limit, state.remaining + refunded) } : state;
}

function limitError(which: 'rate' | 'quota', state: RateLimitState): ServiceError {
  if (which === 'quota') {
    return new ServiceError(
      'monthly_quota_exceeded',
      'The monthly quota of recipients of this organization is used up',
    );
  }
  return new ServiceError(
    'rate_limit_exceeded',
    `Rate limit of ${state.limit} messages per second exceeded; retry after ${Math.max(1, state.resetSeconds)} s`,
  );
}
