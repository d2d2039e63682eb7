import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ServiceError } from './errors.ts';

// Schema validation (TypeBox schemas, Ajv). Bodies are validated as sent: no type coercion and no
// silent dropping of unknown fields, so a typo in a field name is an error, not a message sent without
// it. Query strings and path parameters arrive as text, so they are coerced ("10" -> 10).
function makeAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({ coerceTypes, removeAdditional: false, useDefaults: true, allErrors: false, strict: false });
  addFormats.default(ajv);
  return ajv;
}

/** For JSON bodies and values checked outside a route (batch entries). */
export const bodyAjv = makeAjv(false);
/** For query strings and path parameters. */
export const textAjv = makeAjv(true);

/** A checker for a value that is validated outside a route's schema (e.g. each entry of a batch). */
export function compileBodyValidator<T>(schema: object): (data: unknown) => T {
  const validate = bodyAjv.compile(schema);
  return (data) => {
    if (!validate(data)) throw toServiceError(validate, 'body');
    return data as T;
  };
}

/** The first schema violation as a ServiceError naming the field; `part` says where (body, querystring …). */
export function toServiceError(validate: ValidateFunction, httpPart: string | undefined): ServiceError {
  const first = validate.errors?.[0];
  const where = httpPart === 'body' ? '' : `${httpPart ?? 'request'} `;
  if (!first) return new ServiceError('validation_error', `Invalid ${where}request`);
  const path = first.instancePath.replace(/^\//, '').replaceAll('/', '.');
  if (first.keyword === 'required') {
    const missing = (first.params as { missingProperty: string }).missingProperty;
    const field = path ? `${path}.${missing}` : missing;
    return new ServiceError('missing_required_field', `Missing required ${where}field: ${field}`, field);
  }
  if (first.keyword === 'additionalProperties') {
    const extra = (first.params as { additionalProperty: string }).additionalProperty;
    const field = path ? `${path}.${extra}` : extra;
    return new ServiceError('validation_error', `Unknown ${where}field: ${field}`, field);
  }
  const field = path || undefined;
  const subject = field ? `${where}field ${field}` : `${where || 'request '}body`;
  return new ServiceError('validation_error', `Invalid ${subject}: ${first.message ?? 'invalid value'}`, field);
}
