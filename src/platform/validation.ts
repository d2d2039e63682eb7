import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ServiceError } from './errors.ts';

// Schema validation (TypeBox schemas, Ajv). Bodies are validated as sent: no type coercion and no
// silent dropping of unknown fields, so a typo in a field name is an error, not a message sent without
// it. Query strings and path parameters arrive as text, so they are coerced ("10" -> 10).
//
// Ajv's first error is turned into one a person can act on: a value outside an enum (a union of
// constants) names the allowed values; a value that fits none of a union's forms names the forms (or
// says the schema's own `errorMessage`, for a union whose forms need explaining); a value of the right
// form that fails inside it names what is wrong there.
function makeAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    removeAdditional: false,
    useDefaults: true,
    allErrors: false,
    strict: false,
    // Each error carries the schema it failed, which is where a union's allowed values are read.
    verbose: true,
  });
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
  const errors = validate.errors ?? [];
  const where = httpPart === 'body' ? '' : `${httpPart ?? 'request'} `;
  if (errors.length === 0) return new ServiceError('validation_error', `Invalid ${where}request`);
  const found = telling(errors, errors.length - 1);
  const first = found.error;
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
  if (found.says !== undefined) {
    return new ServiceError('validation_error', `${named(httpPart, field)} ${found.says}`, field);
  }
  const subject = field ? `${where}field ${field}` : `${where || 'request '}body`;
  return new ServiceError('validation_error', `Invalid ${subject}: ${first.message ?? 'invalid value'}`, field);
}

/** The error to report, and what to say of it when Ajv's own message would not tell what to send. */
interface Telling {
  error: ErrorObject;
  says?: string;
}

/**
 * Ajv (with allErrors off) lists a refused union's branch errors, each branch's own last, then the
 * union's. From the error at `index`: a union of constants says its values; a union whose value has the
 * form of one branch (its failure is not a type mismatch at the union's own place) is explained by that
 * branch; a value of no branch's form names the forms.
 */
function telling(errors: ErrorObject[], index: number): Telling {
  const error = errors[index]!;
  const allowed = allowedValues(error);
  if (allowed) return { error, says: oneOf(allowed) };
  if (error.keyword !== 'anyOf' && error.keyword !== 'oneOf') return { error };

  // The last error of each branch, by branch number.
  const lastOfBranch = new Map<number, number>();
  const prefix = `${error.schemaPath}/`;
  for (let i = 0; i < index; i++) {
    const schemaPath = errors[i]!.schemaPath;
    if (!schemaPath.startsWith(prefix)) continue;
    lastOfBranch.set(Number.parseInt(schemaPath.slice(prefix.length), 10), i);
  }
  // Branches of a referenced schema have paths of their own: Ajv's first error is all there is to say.
  if (lastOfBranch.size === 0) return { error: errors[0]! };
  const atUnion = (e: ErrorObject) => e.instancePath === error.instancePath;
  for (const branchLast of lastOfBranch.values()) {
    const candidate = errors[branchLast]!;
    if (!(atUnion(candidate) && candidate.keyword === 'type')) return telling(errors, branchLast);
  }
  const own = (error.parentSchema as { errorMessage?: unknown } | undefined)?.errorMessage;
  if (typeof own === 'string') return { error, says: own };
  const forms = [...lastOfBranch.values()].map((i) => (errors[i]!.params as { type?: unknown }).type);
  return { error, says: `must be ${[...new Set(forms.flat().map(String))].join(' or ')}` };
}

/** The values a constant, an enum, or a union of constants (null included) allows; undefined for any other error. */
function allowedValues(error: ErrorObject): unknown[] | undefined {
  if (error.keyword === 'enum') return (error.params as { allowedValues: unknown[] }).allowedValues;
  if (error.keyword === 'const') return [(error.params as { allowedValue: unknown }).allowedValue];
  if (error.keyword === 'anyOf' || error.keyword === 'oneOf') return constantsOf(error.parentSchema);
  return undefined;
}

function constantsOf(schema: unknown): unknown[] | undefined {
  if (schema === null || typeof schema !== 'object') return undefined;
  const s = schema as Record<string, unknown>;
  if ('const' in s) return [s.const];
  if (Array.isArray(s.enum)) return s.enum;
  if (s.type === 'null') return [null];
  const branches = s.anyOf ?? s.oneOf;
  if (!Array.isArray(branches)) return undefined;
  const values = branches.map(constantsOf);
  return values.every((v) => v !== undefined) ? values.flat() : undefined;
}

function oneOf(values: unknown[]): string {
  const shown = values.map((v) => (typeof v === 'string' ? v : JSON.stringify(v)));
  return shown.length === 1 ? `must be ${shown[0]}` : `must be one of: ${shown.join(', ')}`;
}

/** How a message names the value at fault: the field of a body, or the parameter or header. */
function named(httpPart: string | undefined, field: string | undefined): string {
  if (field === undefined) return httpPart === 'body' ? 'The body' : `The ${httpPart ?? 'request'}`;
  if (httpPart === 'querystring') return `Query parameter ${field}`;
  if (httpPart === 'params') return `Path parameter ${field}`;
  if (httpPart === 'headers') return `Header ${field}`;
  return field;
}
