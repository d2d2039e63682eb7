import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './errors.ts';

// Fastify's own 4xx errors (body parsing, content type, size) rewritten into the one envelope.
const FASTIFY_ERRORS: Record<string, () => ApiError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: () => new ApiError('payload_too_large', 'Request body is too large'),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () =>
    new ApiError('validation_error', 'Unsupported Content-Type: send the body as application/json'),
  FST_ERR_CTP_INVALID_JSON_BODY: () => new ApiError('validation_error', 'The body is not valid JSON'),
  // A path segment longer than any id or signed link Mailroom makes names nothing.
  FST_ERR_MAX_PARAM_LENGTH: () => new ApiError('not_found', 'Not found'),
};

export function handleError(error: FastifyError | ApiError | Error, request: FastifyRequest, reply: FastifyReply) {
  let apiError: ApiError;
  if (error instanceof ApiError) {
    apiError = error;
  } else {
    const { code, statusCode } = error as FastifyError;
    const known = code ? FASTIFY_ERRORS[code] : undefined;
    if (known) apiError = known();
    else if (statusCode === 404) apiError = new ApiError('not_found', 'Not found');
    else if (statusCode === 413) apiError = FASTIFY_ERRORS.FST_ERR_CTP_BODY_TOO_LARGE!();
    else if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
      // Fastify's remaining client errors (malformed JSON, prototype poisoning …): their messages are safe.
      apiError = new ApiError('validation_error', error.message);
    } else {
      // Anything else is our fault: log it with the request id, show none of it.
      request.log.error({ err: error, reqId: request.id }, 'unhandled error');
      apiError = new ApiError('application_error', `Internal server error (request id ${request.id})`);
    }
  }
  if (apiError.statusCode >= 500 && error instanceof ApiError) {
    request.log.error({ err: error, reqId: request.id }, apiError.message);
  }
  return reply.code(apiError.statusCode).type('application/json; charset=utf-8').send(apiError.toBody());
}

export function handleNotFound(request: FastifyRequest, reply: FastifyReply) {
  const body = new ApiError('not_found', `Route ${request.method} ${request.url.split('?')[0]} not found`).toBody();
  return reply.code(404).send(body);
}
