import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../platform/errors.ts';
import type { App } from '../platform/http/app-types.ts';
import { errorBody, HTTP_STATUS } from '../platform/http/error-envelope.ts';
import { idempotencyKeyOf } from '../platform/http/idempotency.ts';
import { keyDomainOf } from '../tenancy/principal.ts';
import { MAX_BATCH } from './batch-entry.ts';
import { EmailMessageSchema, SendResponseSchema } from './message-schema.ts';
import { countAccepted, sendEmails, type SendRequest, type SendResult } from './send-emails.ts';
import { peekRateLimit, retryAfterSeconds, type RateLimitState } from './sending-limits.ts';

const IdempotencyKeyHeader = Type.Optional(Type.String({ maxLength: 256, description: 'Replays within 24 hours' }));

export async function emailRoutes(app: App) {
  /**
   * Hands a send to the accept core under the request's Idempotency-Key and answers its result, with
   * the organization's rate-limit state in the headers (IETF RateLimit fields) whatever the outcome.
   */
  async function answerSend(request: FastifyRequest, reply: FastifyReply, send: SendRequest) {
    const organizationId = request.principal.organizationId;
    try {
      const idempotency = idempotencyKeyOf(request, organizationId);
      const onlyFromDomainId = keyDomainOf(request.principal);
      const outcome = await sendEmails(app.db, app.config, organizationId, { ...send, onlyFromDomainId }, idempotency);
      if (outcome.replayed) reply.header('idempotent-replayed', 'true');
      else countAccepted('api', outcome.result);
      setRateLimitHeaders(reply, outcome.rate ?? (await peekRateLimit(app.db, organizationId)));
      const { statusCode, body } = httpAnswer(send.kind, outcome.result);
      return reply.code(statusCode).send(body);
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
      answerSend(request, reply, {
        kind: 'single',
        message: request.validationError ? asServiceError(request.validationError) : request.body,
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
          'Each entry is an EmailMessage without template and topic_id (an entry with either is refused with ' +
          '400 unsupported_in_batch: send it through POST /emails), processed on its own. ' +
          'With `x-batch-validation: strict` any invalid entry refuses the whole batch.',
        body: Type.Array(Type.Unknown(), { minItems: 1, maxItems: MAX_BATCH }),
        headers: Type.Object({
          'idempotency-key': IdempotencyKeyHeader,
          'x-batch-validation': Type.Optional(Type.Union([Type.Literal('strict'), Type.Literal('permissive')])),
        }),
      },
    },
    (request, reply) =>
      answerSend(request, reply, {
        kind: 'batch',
        strict: String(request.headers['x-batch-validation'] ?? '').toLowerCase() === 'strict',
        entries: request.body,
      }),
  );
}

/** The schema's refusal of a body (Mailroom's validator raises ServiceErrors; anything else says why). */
function asServiceError(error: Error): ServiceError {
  return error instanceof ServiceError ? error : new ServiceError('validation_error', error.message);
}

function setRateLimitHeaders(reply: FastifyReply, state: RateLimitState) {
  reply.header('ratelimit-limit', state.limit);
  reply.header('ratelimit-remaining', state.remaining);
  reply.header('ratelimit-reset', state.resetSeconds);
  if (state.remaining < 1) reply.header('retry-after', retryAfterSeconds(state));
}

/**
 * A send's result over HTTP. A refused request is its error envelope. A single send answers its email's
 * id; a batch answers one entry per submitted message, in order, with the refusals also under `errors`.
 */
function httpAnswer(kind: SendRequest['kind'], result: SendResult): { statusCode: number; body: unknown } {
  if ('refused' in result) {
    // Mailroom's own failure: through the error handler, which logs it with the request id.
    if (HTTP_STATUS[result.refused.name] >= 500) throw ServiceError.from(result.refused);
    return { statusCode: HTTP_STATUS[result.refused.name], body: errorBody(result.refused) };
  }
  if (kind === 'single') {
    const [entry] = result.entries;
    if (entry?.accepted) return { statusCode: 200, body: { object: 'email', id: entry.id } };
    // A single send accepts its one message or is refused as a whole.
    throw new Error('A single send has no accepted message and no refusal');
  }
  const errors: Array<Record<string, unknown>> = [];
  const data = result.entries.map((outcome, index) => {
    if (outcome.accepted) return { object: 'email', id: outcome.id };
    const { statusCode, name, message, field } = errorBody(outcome.error);
    const detail = { index, statusCode, name, message, ...(field ? { field } : {}) };
    errors.push(detail);
    return { object: 'error', id: null, ...detail };
  });
  return { statusCode: 200, body: errors.length > 0 ? { object: 'list', data, errors } : { object: 'list', data } };
}
