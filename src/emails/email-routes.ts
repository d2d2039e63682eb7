import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../platform/http/app-types.ts';
import { ServiceError } from '../platform/errors.ts';
import { errorBody } from '../platform/http/error-envelope.ts';
import { idempotent, type IdempotencyClaim, type StoredAnswer } from '../platform/http/idempotency.ts';
import { acceptMessages, type Outcome } from './accept-messages.ts';
import { MAX_BATCH, validateBatchEntry } from './batch-entry.ts';
import { EmailMessageSchema, SendResponseSchema, type EmailMessage } from './message-schema.ts';
import { prepareMessage, type PreparedMessage } from './prepare-message.ts';
import { peekRateLimit, retryAfterSeconds, type RateLimitState } from './sending-limits.ts';

const IdempotencyKeyHeader = Type.Optional(Type.String({ maxLength: 256, description: 'Replays within 24 hours' }));

export async function emailRoutes(app: App) {
  /**
   * Answers a send: under its Idempotency-Key, and with the organization's rate-limit state in the
   * headers (IETF RateLimit fields) whatever the outcome.
   */
  async function answerSend(
    request: FastifyRequest,
    reply: FastifyReply,
    work: (claim: IdempotencyClaim | undefined) => Promise<{ answer: StoredAnswer; rate: RateLimitState }>,
  ) {
    const organizationId = request.principal.organizationId;
    let rate: RateLimitState | undefined;
    try {
      const { answer, replayed } = await idempotent(app.db, request, async (claim) => {
        const done = await work(claim);
        rate = done.rate;
        return done.answer;
      });
      if (replayed) reply.header('idempotent-replayed', 'true');
      setRateLimitHeaders(reply, rate ?? (await peekRateLimit(app.db, organizationId)));
      return reply.code(answer.statusCode).send(answer.body);
    } catch (error) {
      setRateLimitHeaders(reply, await peekRateLimit(app.db, organizationId));
      throw error;
    }
  }

  app.post(
    '/emails',
    {
      config: { access: 'send' },
      // Validation errors reach the handler, so that an Idempotency-Key remembers them too.
      attachValidation: true,
      schema: {
        summary: 'Send an email',
        body: EmailMessageSchema,
        headers: Type.Object({ 'idempotency-key': IdempotencyKeyHeader }),
        response: { 200: SendResponseSchema },
      },
    },
    (request, reply) =>
      answerSend(request, reply, async (idempotency) => {
        if (request.validationError) throw request.validationError;
        const organizationId = request.principal.organizationId;
        const message = await prepareMessage(app.db, app.config, organizationId, request.body, new Date());
        const result = await acceptMessages(app.db, [message], {
          organizationId,
          allOrNothing: true,
          idempotency,
          answer: ([outcome]) => {
            if (!outcome!.accepted) throw outcome!.error;
            return { statusCode: 200, body: { object: 'email', id: outcome!.id } };
          },
        });
        return { answer: result.answer, rate: result.rate };
      }),
  );

  app.post(
    '/emails/batch',
    {
      config: { access: 'send' },
      attachValidation: true,
      schema: {
        summary: 'Send up to 100 emails',
        description:
          'Each entry is an EmailMessage without template and topic_id, processed on its own. ' +
          'With `x-batch-validation: strict` any invalid entry refuses the whole batch.',
        body: Type.Array(Type.Unknown(), { minItems: 1, maxItems: MAX_BATCH }),
        headers: Type.Object({
          'idempotency-key': IdempotencyKeyHeader,
          'x-batch-validation': Type.Optional(Type.Union([Type.Literal('strict'), Type.Literal('permissive')])),
        }),
      },
    },
    (request, reply) =>
      answerSend(request, reply, async (idempotency) => {
        const organizationId = request.principal.organizationId;
        const strict = String(request.headers['x-batch-validation'] ?? '').toLowerCase() === 'strict';
        const entries = request.body;
        if (!Array.isArray(entries))
          throw new ServiceError('validation_error', 'The body must be a JSON array of emails');
        if (entries.length === 0) throw new ServiceError('validation_error', 'The batch is empty');
        if (entries.length > MAX_BATCH) {
          throw new ServiceError(
            'validation_error',
            `A batch holds at most ${MAX_BATCH} emails; this one has ${entries.length}`,
          );
        }

        // Each entry is checked on its own; a refused entry does not stop the others.
        const now = new Date();
        const checked: Array<PreparedMessage | ServiceError> = [];
        for (const entry of entries) {
          try {
            const message = validateBatchEntry(entry);
            checked.push(await prepareMessage(app.db, app.config, organizationId, message as EmailMessage, now));
          } catch (error) {
            if (!(error instanceof ServiceError)) throw error;
            checked.push(error);
          }
        }
        const invalid = checked.flatMap((c, index) => (c instanceof ServiceError ? [{ index, error: c }] : []));
        if (strict && invalid.length > 0) throw strictRefusal(invalid);

        const prepared = checked.filter((c): c is PreparedMessage => !(c instanceof ServiceError));
        const answer = (outcomes: Outcome[]) => batchAnswer(checked, outcomes);
        if (prepared.length === 0) return { answer: answer([]), rate: await peekRateLimit(app.db, organizationId) };
        const result = await acceptMessages(app.db, prepared, {
          organizationId,
          allOrNothing: strict,
          idempotency,
          answer,
        });
        return { answer: result.answer, rate: result.rate };
      }),
  );
}

function setRateLimitHeaders(reply: FastifyReply, state: RateLimitState) {
  reply.header('ratelimit-limit', state.limit);
  reply.header('ratelimit-remaining', state.remaining);
  reply.header('ratelimit-reset', state.resetSeconds);
  if (state.remaining < 1) reply.header('retry-after', retryAfterSeconds(state));
}

/** The batch answer: one entry per submitted message, in order, and the refusals listed under errors. */
function batchAnswer(checked: Array<PreparedMessage | ServiceError>, outcomes: Outcome[]): StoredAnswer {
  let next = 0;
  const errors: Array<Record<string, unknown>> = [];
  const data = checked.map((entry, index) => {
    const outcome: Outcome = entry instanceof ServiceError ? { accepted: false, error: entry } : outcomes[next++]!;
    if (outcome.accepted) return { object: 'email', id: outcome.id };
    const { statusCode, name, message, field } = errorBody(outcome.error);
    const detail = { index, statusCode, name, message, ...(field ? { field } : {}) };
    errors.push(detail);
    return { object: 'error', id: null, ...detail };
  });
  // Nothing accepted because a limit was already spent: the whole request is refused with that 429.
  const first = outcomes[0];
  if (first && !first.accepted && outcomes.every((o) => !o.accepted)) throw first.error;
  return { statusCode: 200, body: errors.length > 0 ? { object: 'list', data, errors } : { object: 'list', data } };
}

function strictRefusal(invalid: Array<{ index: number; error: ServiceError }>): ServiceError {
  const first = invalid[0]!;
  const body = errorBody(first.error);
  return new ServiceError(
    first.error.name,
    `Entry ${first.index}: ${body.message}` +
      (invalid.length > 1 ? ` (and ${invalid.length - 1} more invalid entries)` : ''),
    body.field === undefined ? String(first.index) : `${first.index}.${body.field}`,
  );
}
