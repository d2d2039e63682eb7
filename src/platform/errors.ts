// The one error type every domain raises for a request it refuses: a code from the list below, a
// message a person can act on, and the field at fault when there is one. It knows nothing of the
// protocol that carries it: the HTTP layer maps each code to one status and the JSON envelope
// (platform/http/error-envelope.ts); another listener (SMTP) maps it to its own replies.

/** Refusals of the request itself: sent again unchanged, it meets the same refusal. */
const FINAL_CODES = [
  'missing_required_field',
  'validation_error',
  'invalid_attachment',
  'invalid_from_address',
  'template_not_found',
  'too_many_recipients',
  'invalid_idempotency_key',
  'unsupported_in_batch',
  'invalid_webhook_endpoint',
  'invalid_state',
  'not_found',
  'invalid_idempotent_request',
  'conflict',
  'payload_too_large',
] as const;

/**
 * Refusals that the same request may get past later: who is asking, limits, a request with the same
 * idempotency key still running, Mailroom's own failures.
 */
const PASSING_CODES = [
  'concurrent_idempotent_requests',
  'missing_api_key',
  'invalid_api_key',
  'restricted_api_key',
  'session_required',
  'invalid_credentials',
  'rate_limit_exceeded',
  'monthly_quota_exceeded',
  'request_timeout',
  'application_error',
  'service_unavailable',
] as const;

export const ERROR_CODES = [...FINAL_CODES, ...PASSING_CODES] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** What a refusal says, as plain data (stored with an idempotency key, listed per batch entry). */
export interface ErrorDetail {
  name: ErrorCode;
  message: string;
  field?: string;
}

export class ServiceError extends Error {
  override readonly name: ErrorCode;
  readonly field: string | undefined;

  constructor(name: ErrorCode, message: string, field?: string) {
    super(message);
    this.name = name;
    this.field = field;
  }

  detail(): ErrorDetail {
    return this.field === undefined
      ? { name: this.name, message: this.message }
      : { name: this.name, message: this.message, field: this.field };
  }

  static from(detail: ErrorDetail): ServiceError {
    return new ServiceError(detail.name, detail.message, detail.field);
  }
}

export const notFound = (what: string) => new ServiceError('not_found', `${what} not found`);

const FINAL: ReadonlySet<ErrorCode> = new Set(FINAL_CODES);

/**
 * Whether a refusal is the request's own fault, so that the same request would meet it again: such
 * refusals are remembered under an idempotency key. Credentials, limits and Mailroom's own failures
 * are not: a retry after them may succeed.
 */
export function isFinalRefusal(code: ErrorCode): boolean {
  return FINAL.has(code);
}
