import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.ts';
import { isConnectionLost, waitedTooLong } from '../db/database.ts';
import { errorBody, HTTP_STATUS } from './error-envelope.ts';

// When a client should retry after a 503: about the time a lost primary takes to be replaced (or a
// restart), and longer than one connection attempt, so a retry does not land in the same outage.
export const RETRY_AFTER_SECONDS = 5;

// Fastify's own 4xx errors (body parsing, content type, size) rewritten into the one envelope.
const FASTIFY_ERRORS: Record<string, () => ServiceError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: () => new ServiceError('payload_too_large', 'Request body is too large'),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () =>
    new ServiceError('validation_error', 'Unsupported Content-Type: send the body as application/json'),
  FST_ERR_CTP_INVALID_JSON_BODY: () => new ServiceError('validation_error', 'The body is not valid JSON'),
  // A path segment longer than any id or signed link Mailroom makes names nothing.
  FST_ERR_MAX_PARAM_LENGTH: () => new ServiceError('not_found', 'Not found'),
};

export function handleError(error: FastifyError | ServiceError | Error, request: FastifyRequest, reply: FastifyReply) {
  let serviceError: ServiceError;
  if (error instanceof ServiceError) {
    serviceError = error;
  } else {
    const { code, statusCode } = error as FastifyError;
    const known = code ? FASTIFY_ERRORS[code] : undefined;
    if (known) serviceError = known();
    else if (statusCode === 404) serviceError = new ServiceError('not_found', 'Not found');
    else if (statusCode === 413) serviceError = FASTIFY_ERRORS.FST_ERR_CTP_BODY_TOO_LARGE!();
    else if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
      // Fastify's remaining client errors (malformed JSON, prototype poisoning …): their messages are safe.
      serviceError = new ServiceError('validation_error', error.message);
    } else if (isConnectionLost(error)) {
      // The database is down or restarting: the request may succeed later. A send whose COMMIT was cut
      // off may have been stored; retried with the same Idempotency-Key it gets its stored result.
      request.log.warn({ err: error, reqId: request.id }, 'database unavailable');
      serviceError = new ServiceError(
        'service_unavailable',
        'The database is unavailable; retry later (a send with the same Idempotency-Key)',
      );
    } else if (waitedTooLong(error)) {
      // A lock held elsewhere or a statement past its time limit (the accept path sets both): busy, not broken.
      request.log.warn({ err: error, reqId: request.id }, 'database busy');
      serviceError = new ServiceError('service_unavailable', 'The database is busy; retry later');
    } else {
      // Anything else is our fault: log it with the request id, show none of it.
      request.log.error({ err: error, reqId: request.id }, 'unhandled error');
      serviceError = new ServiceError('application_error', `Internal server error (request id ${request.id})`);
    }
  }
  const status = HTTP_STATUS[serviceError.name];
  if (status >= 500 && error instanceof ServiceError) {
    request.log.error({ err: error, reqId: request.id }, serviceError.message);
  }
  // A 503 is an outage (the database gone, a primary being replaced, busy): the client is told when to
  // come back instead of guessing.
  if (serviceError.name === 'service_unavailable' && !reply.hasHeader('retry-after')) {
    reply.header('retry-after', String(RETRY_AFTER_SECONDS));
  }
  return reply.code(status).type('application/json; charset=utf-8').send(errorBody(serviceError));
}

export function handleNotFound(request: FastifyRequest, reply: FastifyReply) {
  const body = errorBody(
    new ServiceError('not_found', `Route ${request.method} ${request.url.split('?')[0]} not found`),
  );
  return reply.code(404).send(body);
}

/**
 * A request Node refused before any route saw it: one too slow to arrive (408 `request_timeout`), or
 * malformed (400 `validation_error`). Answered in the envelope, then the connection is closed.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable || error.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' || error.code === 'ERR_HTTP_HEADERS_TIMEOUT';
  const refusal = timedOut
    ? new ServiceError('request_timeout', 'The request did not arrive in time')
    : new ServiceError('validation_error', 'Malformed HTTP request');
  const status = HTTP_STATUS[refusal.name];
  const body = JSON.stringify(errorBody(refusal));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
