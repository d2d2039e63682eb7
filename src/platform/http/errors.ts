// The one error type of the API. Each name maps to exactly one status; the envelope is
// { statusCode, name, message, field? } (DESIGN §2). Throw an ApiError anywhere in a request and the
// error handler writes it out; anything else becomes a 500 that hides its details.

export const ERROR_STATUS = {
  missing_required_field: 400,
  validation_error: 400,
  invalid_attachment: 400,
  invalid_from_address: 400,
  template_not_found: 400,
  too_many_recipients: 400,
  invalid_idempotency_key: 400,
  unsupported_in_batch: 400,
  invalid_webhook_endpoint: 400,
  invalid_state: 400,
  missing_api_key: 401,
  invalid_api_key: 401,
  restricted_api_key: 401,
  session_required: 401,
  invalid_credentials: 401,
  not_found: 404,
  invalid_idempotent_request: 409,
  concurrent_idempotent_requests: 409,
  conflict: 409,
  payload_too_large: 413,
  rate_limit_exceeded: 429,
  monthly_quota_exceeded: 429,
  application_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorName = keyof typeof ERROR_STATUS;

export interface ErrorBody {
  statusCode: number;
  name: ErrorName;
  message: string;
  field?: string;
}

export class ApiError extends Error {
  override readonly name: ErrorName;
  readonly statusCode: number;
  readonly field: string | undefined;

  constructor(name: ErrorName, message: string, field?: string) {
    super(message);
    this.name = name;
    this.statusCode = ERROR_STATUS[name];
    this.field = field;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { statusCode: this.statusCode, name: this.name, message: this.message };
    if (this.field !== undefined) body.field = this.field;
    return body;
  }
}

export const notFound = (what: string) => new ApiError('not_found', `${what} not found`);
