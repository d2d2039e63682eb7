import { ServiceError, type ErrorCode, type ErrorDetail } from '../errors.ts';

// Each error code maps to exactly one HTTP status; every error body is the envelope
// { statusCode, name, message, field? }.

export const HTTP_STATUS: Record<ErrorCode, number> = {
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
  request_timeout: 408,
  payload_too_large: 413,
  rate_limit_exceeded: 429,
  monthly_quota_exceeded: 429,
  application_error: 500,
  service_unavailable: 503,
};

export interface ErrorBody {
  statusCode: number;
  name: ErrorCode;
  message: string;
  field?: string;
}

export function errorBody(error: ServiceError | ErrorDetail): ErrorBody {
  const detail = error instanceof ServiceError ? error.detail() : error;
  const body: ErrorBody = { statusCode: HTTP_STATUS[detail.name], name: detail.name, message: detail.message };
  if (detail.field !== undefined) body.field = detail.field;
  return body;
}
