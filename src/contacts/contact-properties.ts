import type { Database, Queryable } from '../platform/db/database.ts';
import { isUniqueViolation } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';

// A contact property is a key an organization defines before its contacts may carry a value for it
// (Resend's /contact-properties): a type, string or number, and an optional fallback of that type, the
// value a contact without one of its own reads as. Key and type are fixed once created, so that the
// values contacts already hold stay of the property's type; only the fallback changes. Deleting a
// property deletes every contact's value for it.

export type PropertyType = 'string' | 'number';
export type PropertyValue = string | number;

/** Letters, digits and underscores, not starting with a digit, so a key also reads as a template variable. */
export const PROPERTY_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,49}$/;
/** A contact's own fields: a property of the same name would shadow them when a message is personalized. */
const RESERVED_KEYS = new Set(['email', 'first_name', 'last_name', 'unsubscribed']);
/** The longest string value, a contact's or a fallback. */
export const PROPERTY_STRING_MAX = 2000;

export interface ContactProperty {
  id: string;
  key: string;
  type: PropertyType;
  fallback_value: PropertyValue | null;
  created_at: Date;
  updated_at: Date;
}

/** The API shape (the SDK's ApiContactProperty): fallback_value is null when there is none. */
export interface ContactPropertyView {
  object: 'contact_property';
  id: string;
  key: string;
  type: PropertyType;
  fallback_value: PropertyValue | null;
  created_at: string;
}

const COLUMNS = 'id, key, type, fallback_value, created_at, updated_at';

export async function createContactProperty(
  db: Queryable,
  organizationId: string,
  input: { key: string; type: PropertyType; fallback_value?: PropertyValue | null },
): Promise<{ id: string }> {
  if (!PROPERTY_KEY.test(input.key)) {
    throw new ServiceError(
      'validation_error',
      'key: use 1 to 50 letters, digits and underscores, not starting with a digit',
      'key',
    );
  }
  if (RESERVED_KEYS.has(input.key.toLowerCase())) {
    throw new ServiceError('validation_error', `key: ${input.key} is a contact field already`, 'key');
  }
  // A JSON body with a __proto__ key is refused before any route reads it, so no contact could take a value.
  if (input.key === '__proto__') {
    throw new ServiceError('validation_error', 'key: __proto__ cannot be a key of a JSON body', 'key');
  }
  const fallback = checkedValue(input.type, input.fallback_value ?? null, 'fallback_value');
  try {
    const { rows } = await db.query<{ id: string }>(
      `INSERT INTO contact_properties (organization_id, key, type, fallback_value)
       VALUES ($1, $2, $3, $4::jsonb) RETURNING id`,
      [organizationId, input.key, input.type, fallback === null ? null : JSON.stringify(fallback)],
    );
    return { id: rows[0]!.id };
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ServiceError('conflict', `A contact property with key ${input.key} exists already`, 'key');
    }
    throw error;
  }
}

/** Oldest first, a page at a time (platform/db/keyset-page.ts). */
export async function listContactProperties(
  db: Queryable,
  organizationId: string,
  page: PageRequest,
): Promise<Page<ContactPropertyView>> {
  const listed = await keysetPage<ContactProperty>(
    db,
    { table: 'contact_properties', columns: COLUMNS, organizationId, newestFirst: false },
    page,
  );
  return { ...listed, data: listed.data.map(toView) };
}

export async function getContactProperty(
  db: Queryable,
  organizationId: string,
  id: string,
): Promise<ContactPropertyView> {
  if (!isUuid(id)) throw notFound('Contact property');
  const { rows } = await db.query<ContactProperty>(
    `SELECT ${COLUMNS} FROM contact_properties WHERE id = $2 AND organization_id = $1`,
    [organizationId, id],
  );
  if (!rows[0]) throw notFound('Contact property');
  return toView(rows[0]);
}

/** Sets or (null) clears the fallback; the value must be of the property's type. */
export async function updateContactProperty(
  db: Queryable,
  organizationId: string,
  id: string,
  fallbackValue: PropertyValue | null,
): Promise<{ id: string }> {
  const property = await getContactProperty(db, organizationId, id);
  const fallback = checkedValue(property.type, fallbackValue, 'fallback_value');
  const { rows } = await db.query<{ id: string }>(
    `UPDATE contact_properties SET fallback_value = $3::jsonb, updated_at = now()
      WHERE id = $2 AND organization_id = $1 RETURNING id`,
    [organizationId, property.id, fallback === null ? null : JSON.stringify(fallback)],
  );
  if (!rows[0]) throw notFound('Contact property');
  return { id: rows[0].id };
}

/**
 * Deletes the property and every contact's value for it: a property of the same key made later starts
 * with no values (it may be of the other type). The property row is locked first and the values cleared by
 * a later statement, so a contact write that held the property (checkedContactProperties locks it FOR
 * SHARE) has committed and its value is seen and cleared too. The contacts emit no contact.updated.
 */
export async function deleteContactProperty(db: Database, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Contact property');
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ id: string; key: string }>(
      'SELECT id, key FROM contact_properties WHERE id = $2 AND organization_id = $1 FOR UPDATE',
      [organizationId, id],
    );
    if (!rows[0]) throw notFound('Contact property');
    await tx.query(
      `UPDATE contacts SET properties = properties - $2::text WHERE organization_id = $1 AND properties ? $2::text`,
      [organizationId, rows[0].key],
    );
    await tx.query('DELETE FROM contact_properties WHERE id = $1', [rows[0].id]);
    return { id: rows[0].id };
  });
}

/**
 * A contact's property values as given to POST or PATCH /contacts, checked against the organization's
 * properties: `set` holds the values to write, `cleared` the keys given null. An undefined key or a value
 * of another type is a 400 naming `properties.<key>`. The properties read are locked (FOR SHARE) until
 * the caller's transaction ends, so none is deleted between this check and the write.
 */
export async function checkedContactProperties(
  tx: Queryable,
  organizationId: string,
  input: Record<string, unknown>,
): Promise<{ set: Record<string, PropertyValue>; cleared: string[] }> {
  const keys = Object.keys(input);
  if (keys.length === 0) return { set: {}, cleared: [] };
  const { rows } = await tx.query<{ key: string; type: PropertyType }>(
    `SELECT key, type FROM contact_properties WHERE organization_id = $1 AND key = ANY ($2::text[])
      ORDER BY key FOR SHARE`,
    [organizationId, keys],
  );
  const types = new Map(rows.map((row) => [row.key, row.type]));
  const set: Record<string, PropertyValue> = {};
  const cleared: string[] = [];
  for (const key of keys) {
    const type = types.get(key);
    if (type === undefined) {
      throw new ServiceError(
        'validation_error',
        `properties.${key}: no contact property has this key; create it first with POST /contact-properties`,
        `properties.${key}`,
      );
    }
    const value = checkedValue(type, input[key], `properties.${key}`);
    if (value === null) cleared.push(key);
    else set[key] = value;
  }
  return { set, cleared };
}

/** A value of the property's type (a string of at most PROPERTY_STRING_MAX characters, or a finite number), or null. */
function checkedValue(type: PropertyType, value: unknown, field: string): PropertyValue | null {
  if (value === null) return null;
  if (type === 'string') {
    if (typeof value !== 'string') throw new ServiceError('validation_error', `${field}: must be a string`, field);
    if (value.length > PROPERTY_STRING_MAX) {
      throw new ServiceError('validation_error', `${field}: at most ${PROPERTY_STRING_MAX} characters`, field);
    }
    return value;
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ServiceError('validation_error', `${field}: must be a number`, field);
  }
  return value;
}

/**
 * SQL for a contact's properties as GET /contacts/:id gives them (the SDK's `{ [key]: { type, value } }`):
 * every property of the organization the contact has a value for, or that has a fallback, with the
 * value a message would use, the contact's own else the fallback. `contact` names a row of `contacts`.
 */
export const contactPropertiesSql = (contact: string) =>
  `coalesce((SELECT jsonb_object_agg(p.key, jsonb_build_object('type', p.type,
                                     'value', coalesce(${contact}.properties -> p.key, p.fallback_value)))
               FROM contact_properties p
              WHERE p.organization_id = ${contact}.organization_id
                AND coalesce(${contact}.properties -> p.key, p.fallback_value) IS NOT NULL), '{}'::jsonb)`;

function toView(property: ContactProperty): ContactPropertyView {
  return {
    object: 'contact_property',
    id: property.id,
    key: property.key,
    type: property.type,
    fallback_value: property.fallback_value,
    created_at: new Date(property.created_at).toISOString(),
  };
}
