import { isUniqueViolation, notifyAfterCommitTag, type Database, type Queryable } from '../platform/db/database.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import { forgetLookups, lookupCache, LOOKUPS_CHANNEL } from '../platform/db/lookup-cache.ts';
import { notFound, ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import type { EventSchemaMap } from './event-schema.ts';

// Event definitions (Resend's /events): a name, unique in its organization, with an optional payload
// schema. An event may be sent under a name that has no definition; when it has one with a schema, the
// payload is checked against it (send-event.ts). A definition is addressed by its id or by its name.
//
// Every event sent reads its definition's schema, so the schema is answered from memory (the look-up
// cache of platform/db/lookup-cache.ts), absent definitions included. Each statement that changes a
// definition notifies the look-up channel after its commit, so every process forgets what it cached,
// and this process forgets at once; an answer is used for 5 seconds at most in any case.

interface Definition {
  id: string;
  name: string;
  schema: EventSchemaMap | null;
  created_at: Date;
  updated_at: Date | null;
}

export interface DefinitionView {
  object: 'event';
  id: string;
  name: string;
  schema: EventSchemaMap | null;
  created_at: string;
  updated_at: string | null;
}

const COLUMNS = 'id, name, schema, created_at, updated_at';
const CHANGED = notifyAfterCommitTag(LOOKUPS_CHANNEL);

/** SQL: the definition `$2` (an id, as `$3` when it is one, or a name) of organization `$1`. */
const IDENTIFIED = `organization_id = $1 AND (name = $2 OR id = $3::uuid)`;
const identified = (organizationId: string, identifier: string) => [
  organizationId,
  identifier,
  isUuid(identifier) ? identifier : null,
];

export async function createDefinition(
  db: Database,
  organizationId: string,
  input: { name: string; schema: EventSchemaMap | null },
): Promise<{ id: string }> {
  try {
    const { rows } = await db.query<{ id: string }>(
      `${CHANGED} INSERT INTO event_definitions (organization_id, name, schema) VALUES ($1, $2, $3::jsonb) RETURNING id`,
      [organizationId, input.name, input.schema === null ? null : JSON.stringify(input.schema)],
    );
    return { id: rows[0]!.id };
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ServiceError('conflict', `An event named ${input.name} exists already`, 'name');
    }
    throw error;
  } finally {
    forgetLookups(db);
  }
}

/** Newest first, a page at a time (platform/db/keyset-page.ts). */
export async function listDefinitions(
  db: Queryable,
  organizationId: string,
  page: PageRequest,
): Promise<Page<Omit<DefinitionView, 'object'>>> {
  const listed = await keysetPage<Definition>(
    db,
    { table: 'event_definitions', columns: COLUMNS, organizationId, newestFirst: true },
    page,
  );
  return { ...listed, data: listed.data.map(toView) };
}

export async function getDefinition(
  db: Queryable,
  organizationId: string,
  identifier: string,
): Promise<DefinitionView> {
  // An id matches before a name that happens to read the same.
  const { rows } = await db.query<Definition>(
    `SELECT ${COLUMNS} FROM event_definitions WHERE ${IDENTIFIED}
      ORDER BY (id = $3::uuid) IS TRUE DESC LIMIT 1`,
    identified(organizationId, identifier),
  );
  if (!rows[0]) throw notFound('Event');
  return { object: 'event', ...toView(rows[0]) };
}

/** Replaces the schema (null removes it). */
export async function updateDefinition(
  db: Database,
  organizationId: string,
  identifier: string,
  schema: EventSchemaMap | null,
): Promise<{ id: string }> {
  try {
    const { rows } = await db.query<{ id: string }>(
      `${CHANGED} UPDATE event_definitions SET schema = $4::jsonb, updated_at = now()
        WHERE id = (SELECT id FROM event_definitions WHERE ${IDENTIFIED}
                     ORDER BY (id = $3::uuid) IS TRUE DESC LIMIT 1)
        RETURNING id`,
      [...identified(organizationId, identifier), schema === null ? null : JSON.stringify(schema)],
    );
    if (!rows[0]) throw notFound('Event');
    return { id: rows[0].id };
  } finally {
    forgetLookups(db);
  }
}

/** Events already received under the name stay as they are. */
export async function deleteDefinition(
  db: Database,
  organizationId: string,
  identifier: string,
): Promise<{ id: string }> {
  try {
    const { rows } = await db.query<{ id: string }>(
      `${CHANGED} DELETE FROM event_definitions
        WHERE id = (SELECT id FROM event_definitions WHERE ${IDENTIFIED}
                     ORDER BY (id = $3::uuid) IS TRUE DESC LIMIT 1)
        RETURNING id`,
      identified(organizationId, identifier),
    );
    if (!rows[0]) throw notFound('Event');
    return { id: rows[0].id };
  } finally {
    forgetLookups(db);
  }
}

/** The schema an event's payload must meet: null when the name has no definition, or one without a schema. */
export async function schemaOf(db: Database, organizationId: string, name: string): Promise<EventSchemaMap | null> {
  const cache = lookupCache<{ schema: EventSchemaMap | null }>(db, 'event-schemas');
  const found = await cache.through(
    `${organizationId} ${name}`,
    async () => {
      const { rows } = await db.query<{ schema: EventSchemaMap | null }>(
        'SELECT schema FROM event_definitions WHERE organization_id = $1 AND name = $2',
        [organizationId, name],
      );
      return { schema: rows[0]?.schema ?? null };
    },
    () => true,
  );
  return found.schema;
}

function toView(row: Definition): Omit<DefinitionView, 'object'> {
  return {
    id: row.id,
    name: row.name,
    schema: row.schema,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: row.updated_at === null ? null : new Date(row.updated_at).toISOString(),
  };
}
