import { ServiceError } from '../platform/errors.ts';
import { RESERVED_EVENT_PREFIX } from './automation-model.ts';

// The rules of an event's name, of a definition's payload schema, and of a payload checked against it.
//
// A name is 1 to 200 characters and never starts with `resend:` (Resend's own events). A schema is a
// flat map of payload key to type: `string`, `number`, `boolean` or `date` (an ISO 8601 date or date and
// time that Date.parse reads). A payload is a JSON object of at most MAX_PAYLOAD_BYTES; when its event
// has a schema, every key the schema declares must be there with its type, and keys it does not declare
// are let through as they are.

export const EVENT_SCHEMA_TYPES = ['string', 'number', 'boolean', 'date'] as const;
export type EventSchemaType = (typeof EVENT_SCHEMA_TYPES)[number];
export type EventSchemaMap = Record<string, EventSchemaType>;

export const MAX_EVENT_NAME_LENGTH = 200;
/** Keys one schema declares at most, and the length of each. */
export const MAX_SCHEMA_KEYS = 100;
export const MAX_SCHEMA_KEY_LENGTH = 100;
/** A payload's size at most, as JSON in UTF-8. */
export const MAX_PAYLOAD_BYTES = 32 * 1024;

/** The name as given, when it may name an event (`field` is where it came from: `name`, `event`). */
export function checkedEventName(name: string, field: string): string {
  if (name.length === 0 || name.length > MAX_EVENT_NAME_LENGTH) {
    throw new ServiceError('validation_error', `${field} must be 1 to ${MAX_EVENT_NAME_LENGTH} characters long`, field);
  }
  if (name.startsWith(RESERVED_EVENT_PREFIX)) {
    throw new ServiceError(
      'validation_error',
      `${field}: names starting with ${RESERVED_EVENT_PREFIX} are reserved for Resend's own events`,
      field,
    );
  }
  return name;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** A definition's schema as sent (absent or null: none), checked. */
export function checkedSchema(value: unknown): EventSchemaMap | null {
  if (value === undefined || value === null) return null;
  if (!isPlainObject(value)) {
    throw new ServiceError('validation_error', 'schema must be an object of payload keys to types, or null', 'schema');
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_SCHEMA_KEYS) {
    throw new ServiceError('validation_error', `schema declares more than ${MAX_SCHEMA_KEYS} keys`, 'schema');
  }
  const schema: EventSchemaMap = {};
  for (const [key, type] of entries) {
    const field = `schema.${key}`;
    if (key.length === 0 || key.length > MAX_SCHEMA_KEY_LENGTH) {
      throw new ServiceError('validation_error', `${field}: a key is 1 to ${MAX_SCHEMA_KEY_LENGTH} characters`, field);
    }
    if (typeof type !== 'string' || !(EVENT_SCHEMA_TYPES as readonly string[]).includes(type)) {
      throw new ServiceError('validation_error', `${field} must be one of ${EVENT_SCHEMA_TYPES.join(', ')}`, field);
    }
    schema[key] = type as EventSchemaType;
  }
  return schema;
}

/** A payload as sent (absent: empty), checked for its form and size. */
export function checkedPayload(value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new ServiceError('validation_error', 'payload must be a JSON object', 'payload');
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_PAYLOAD_BYTES) {
    throw new ServiceError(
      'payload_too_large',
      `payload is larger than ${MAX_PAYLOAD_BYTES / 1024} KiB as JSON`,
      'payload',
    );
  }
  return value;
}

// A calendar date, optionally with a time and an offset: the ISO 8601 forms Date.parse reads the same
// way everywhere (Date.parse alone also takes "Dec 6 2026" and other forms that vary by engine).
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

/** Whether a payload value has the type a schema declares for it. */
function hasType(value: unknown, type: EventSchemaType): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'date':
      return typeof value === 'string' && ISO_DATE.test(value) && !Number.isNaN(Date.parse(value));
  }
}

/** Refuses a payload that lacks a key its schema declares, or has it with another type. */
export function checkPayloadAgainst(schema: EventSchemaMap, payload: Record<string, unknown>): void {
  // In the order of the keys' names, so that a payload with several faults is always refused for the same one.
  for (const [key, type] of Object.entries(schema).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const field = `payload.${key}`;
    if (!Object.hasOwn(payload, key)) {
      throw new ServiceError('missing_required_field', `${field} is required by the event's schema (${type})`, field);
    }
    if (!hasType(payload[key], type)) {
      const what = type === 'date' ? 'an ISO 8601 date string' : `a ${type}`;
      throw new ServiceError('validation_error', `${field} must be ${what}, as the event's schema says`, field);
    }
  }
}
