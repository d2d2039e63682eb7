import type { Queryable } from '../../platform/db/database.ts';
import { ServiceError } from '../../platform/errors.ts';
import { checkedChoices, type TopicChoice } from '../contact-topics.ts';
import { checkSegmentsExist, checkedSegmentIds } from '../segments.ts';
import type { PropertyType } from '../contact-properties.ts';

// What an upload says besides its file, as Resend's POST /contacts/imports sends it: form fields holding
// JSON (column_map, segments, topics) and on_conflict. Everything here is checked before the import is
// queued, so a mistake that would fail every row (bad JSON, an unknown property, a segment or topic that
// is not the organization's) is a 400 at upload instead of a million row errors later.

export type OnConflict = 'upsert' | 'skip';

/** Which CSV column holds each field; a property also says its type (the contact property's own). */
export interface ColumnMap {
  email: string;
  first_name?: string;
  last_name?: string;
  unsubscribed?: string;
  properties: Record<string, { column: string; type: PropertyType }>;
}

export interface ImportOptions {
  /** Absent: the columns are found by their header (email, first_name, last_name, unsubscribed). */
  columnMap: ColumnMap | undefined;
  onConflict: OnConflict;
  segmentIds: string[];
  topics: TopicChoice[];
}

/** The form fields of an upload, as strings (absent when not sent). */
export interface ImportFields {
  column_map?: string;
  on_conflict?: string;
  segments?: string;
  topics?: string;
}

export const FIELD_NAMES: ReadonlyArray<keyof ImportFields> = ['column_map', 'on_conflict', 'segments', 'topics'];

const CONTACT_FIELDS = ['email', 'first_name', 'last_name', 'unsubscribed'] as const;

/** Checks the fields against each other and against the organization's properties, segments and topics. */
export async function checkedImportOptions(
  db: Queryable,
  organizationId: string,
  fields: ImportFields,
): Promise<ImportOptions> {
  const onConflict = fields.on_conflict ?? 'skip';
  if (onConflict !== 'upsert' && onConflict !== 'skip') {
    throw new ServiceError('validation_error', 'on_conflict: must be upsert or skip', 'on_conflict');
  }
  const columnMap = fields.column_map === undefined ? undefined : await checkedColumnMap(db, organizationId, fields);
  const segments = jsonField(fields, 'segments');
  if (segments !== undefined && !Array.isArray(segments)) {
    throw new ServiceError('validation_error', 'segments: must be a JSON array of { "id": ... }', 'segments');
  }
  const segmentIds = checkedSegmentIds(
    ((segments ?? []) as unknown[]).map((segment) => {
      if (typeof segment === 'string') return segment;
      const id = (segment as { id?: unknown } | null)?.id;
      if (typeof id !== 'string') {
        throw new ServiceError('validation_error', 'segments: each must be { "id": "<segment id>" }', 'segments');
      }
      return id;
    }),
    'segments',
  );
  await checkSegmentsExist(db, organizationId, segmentIds, 'segments');
  const topicsGiven = jsonField(fields, 'topics') ?? [];
  if (!Array.isArray(topicsGiven)) {
    throw new ServiceError('validation_error', 'topics: must be a JSON array of { "id", "subscription" }', 'topics');
  }
  for (const topic of topicsGiven as Array<Record<string, unknown> | null>) {
    if (typeof topic?.id !== 'string' || (topic.subscription !== 'opt_in' && topic.subscription !== 'opt_out')) {
      throw new ServiceError(
        'validation_error',
        'topics: each must be { "id": "<topic id>", "subscription": "opt_in" or "opt_out" }',
        'topics',
      );
    }
  }
  const topics = checkedChoices(topicsGiven as TopicChoice[]);
  if (topics.length > 0) {
    const { rows } = await db.query<{ id: string }>(
      'SELECT id FROM topics WHERE organization_id = $1 AND id = ANY ($2::uuid[])',
      [organizationId, topics.map((topic) => topic.id)],
    );
    const found = new Set(rows.map((row) => row.id));
    const missing = topics.filter((topic) => !found.has(topic.id)).map((topic) => topic.id);
    if (missing.length > 0) {
      throw new ServiceError('validation_error', `topics: no such topic: ${missing.join(', ')}`, 'topics');
    }
  }
  return { columnMap, onConflict, segmentIds, topics };
}

function jsonField(fields: ImportFields, name: 'column_map' | 'segments' | 'topics'): unknown {
  const text = fields[name];
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new ServiceError('validation_error', `${name}: not valid JSON`, name);
  }
}

const fieldError = (message: string) => new ServiceError('validation_error', `column_map: ${message}`, 'column_map');

/**
 * The column map: column names are non-empty strings; `email` is required; each property must exist
 * already (POST /contact-properties) and, when a type is given, be of that type. Mailroom's properties
 * are strings or numbers, so a `boolean` mapping is refused.
 */
async function checkedColumnMap(db: Queryable, organizationId: string, fields: ImportFields): Promise<ColumnMap> {
  const given = jsonField(fields, 'column_map');
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw fieldError('must be a JSON object such as {"email":"Email"}');
  }
  const map = given as Record<string, unknown>;
  for (const key of Object.keys(map)) {
    if (!(CONTACT_FIELDS as readonly string[]).includes(key) && key !== 'properties') {
      throw fieldError(
        `unknown field ${JSON.stringify(key)} (use email, first_name, last_name, unsubscribed, properties)`,
      );
    }
  }
  const column = (field: string, value: unknown): string | undefined => {
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string' || value.trim() === '') throw fieldError(`${field} must name a column`);
    return value;
  };
  const email = column('email', map.email);
  if (email === undefined) throw fieldError('email is required: the column holding each contact’s address');
  const properties: ColumnMap['properties'] = {};
  const givenProperties = map.properties ?? {};
  if (givenProperties === null || typeof givenProperties !== 'object' || Array.isArray(givenProperties)) {
    throw fieldError('properties must be an object of key to { "column", "type" }');
  }
  const entries = Object.entries(givenProperties as Record<string, unknown>);
  const { rows } = await db.query<{ key: string; type: PropertyType }>(
    'SELECT key, type FROM contact_properties WHERE organization_id = $1 AND key = ANY ($2::text[])',
    [organizationId, entries.map(([key]) => key)],
  );
  const types = new Map(rows.map((row) => [row.key, row.type]));
  for (const [key, mapping] of entries) {
    const spec = typeof mapping === 'string' ? { column: mapping } : (mapping as Record<string, unknown> | null);
    if (spec === null || typeof spec !== 'object') throw fieldError(`properties.${key} must be { "column", "type" }`);
    const type = types.get(key);
    if (type === undefined) {
      throw fieldError(
        `properties.${key}: no contact property has this key; create it first with POST /contact-properties`,
      );
    }
    if (spec.type !== undefined && spec.type !== type) {
      throw fieldError(`properties.${key}: the property is of type ${type}, not ${JSON.stringify(spec.type)}`);
    }
    properties[key] = { column: column(`properties.${key}.column`, spec.column) ?? '', type };
    if (properties[key].column === '') throw fieldError(`properties.${key}.column must name a column`);
  }
  return {
    email,
    first_name: column('first_name', map.first_name),
    last_name: column('last_name', map.last_name),
    unsubscribed: column('unsubscribed', map.unsubscribed),
    properties,
  };
}

/** The options as stored with the import (the worker reads them back). */
export function storedOptions(options: ImportOptions) {
  return {
    column_map: options.columnMap ?? null,
    on_conflict: options.onConflict,
    segment_ids: options.segmentIds,
    topics: options.topics,
  };
}
