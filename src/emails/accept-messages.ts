import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError, type ErrorDetail } from '../platform/errors.ts';
import { rememberResult, type IdempotencyKey } from '../platform/idempotency.ts';
import { queueDelivery } from './delivery-job.ts';
import type { EmailStatus } from './statuses.ts';
import type { PreparedMessage } from './prepare-message.ts';
import { refundRateTokens, reserveQuota, takeRateTokens, type RateLimitState } from './sending-limits.ts';
import { recordTimelineEntry } from './timeline.ts';

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

/** Thrown inside the transaction to roll it back when nothing at all was accepted. */
class NothingAccepted extends Error {
  constructor() {
    super('nothing accepted');
  }
}

/**
 * Takes rate-limit tokens, then checks the monthly quota, stores the messages, queues their delivery and
 * charges the quota in one transaction: when it commits, every accepted message, its recipients, attachments, `accepted`
 * timeline entry and delivery job exist, and not before. Messages past the point where the rate limit
 * (then the quota) runs out are refused in order; all-or-nothing refuses them all instead.
 */
export async function acceptMessages<Result>(
  db: Database,
  messages: PreparedMessage[],
  options: AcceptOptions<Result>,
): Promise<{ outcomes: Outcome[]; rate: RateLimitState }> {
  const { organizationId } = options;
  const taken = await takeRateTokens(db, organizationId, messages.length);
  const granted = options.allOrNothing && taken.granted < messages.length ? 0 : taken.granted;
  let accepted = 0;
  const outcomesFor = (count: number, fitting: number): Outcome[] =>
    messages.map((message, i): Outcome => {
      if (i < count) return { accepted: true, id: message.id };
      return { accepted: false, error: limitError(i < fitting ? 'quota' : 'rate', taken.state) };
    });
  // Tokens taken for messages that were not accepted go back; losing a refund only costs a few tokens, so
  // a failure here never turns a committed acceptance into an error.
  const refund = (count: number) => refundRateTokens(db, organizationId, count).catch(() => {});
  try {
    if (granted === 0) throw new NothingAccepted();
    await db.transaction(async (tx) => {
      const candidates = messages.slice(0, granted);
      const quota = await reserveQuota(
        tx,
        organizationId,
        candidates.map((m) => m.recipientCount),
      );
      accepted = options.allOrNothing && quota.fitted < candidates.length ? 0 : quota.fitted;
      if (accepted === 0) throw new NothingAccepted();
      for (const message of candidates.slice(0, accepted)) {
        await insertMessage(tx, organizationId, message);
        await queueDelivery(tx, message.id, message.scheduledAt);
      }
      if (options.idempotency) {
        await rememberResult(tx, options.idempotency, options.resultOf(outcomesFor(accepted, granted)));
      }
      // Last before the commit: the usage row stays locked from here to the end of the transaction.
      await quota.charge(accepted);
    });
  } catch (error) {
    await refund(taken.granted);
    if (!(error instanceof NothingAccepted)) throw error;
    return { outcomes: outcomesFor(0, granted), rate: stateAfterRefund(taken.state, taken.granted) };
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

async function insertMessage(tx: Queryable, organizationId: string, m: PreparedMessage): Promise<void> {
  await tx.query(
    `INSERT INTO emails (id, organization_id, domain_id, "from", "to", cc, bcc, reply_to, subject, html, text,
       tags, headers, topic_id, template, message_id, status, scheduled_at, recipient_count)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7::jsonb, $8::jsonb, $9, $10, $11, $12::jsonb, $13::jsonb,
       $14::uuid, $15::jsonb, $16, $17, $18::timestamptz, $19)`,
    [
      m.id,
      organizationId,
      m.domainId,
      m.from.name === undefined ? m.from.address : `${m.from.name} <${m.from.address}>`,
      JSON.stringify(m.to),
      JSON.stringify(m.cc),
      JSON.stringify(m.bcc),
      JSON.stringify(m.replyTo),
      m.subject,
      m.html ?? null,
      m.text ?? null,
      m.tags === undefined ? null : JSON.stringify(m.tags),
      m.headers === undefined ? null : JSON.stringify(m.headers),
      m.topicId ?? null,
      m.template === undefined ? null : JSON.stringify(m.template),
      m.messageId,
      (m.scheduledAt ? 'scheduled' : 'queued') satisfies EmailStatus,
      m.scheduledAt ?? null,
      m.recipientCount,
    ],
  );
  await tx.query(
    `INSERT INTO email_recipients (email_id, address, kind)
     SELECT $1, r.address, r.kind FROM jsonb_to_recordset($2::jsonb) AS r(address text, kind text)`,
    [m.id, JSON.stringify(m.recipients)],
  );
  for (const [position, a] of m.attachments.entries()) {
    await tx.query(
      `INSERT INTO email_attachments (email_id, position, filename, content_type, content_id, content)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [m.id, position, a.filename, a.contentType, a.contentId ?? null, a.content],
    );
  }
  await recordTimelineEntry(tx, {
    emailId: m.id,
    organizationId,
    kind: 'accepted',
    data: m.scheduledAt ? { scheduled_at: m.scheduledAt.toISOString() } : undefined,
  });
}
