import type { Queryable } from '../platform/db/database.ts';
import { isForeignKeyViolation } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import { checkFilterReferences, parseSegmentFilter, type SegmentFilter } from './segment-filter.ts';
import { segmentAudienceCondition } from './segment-filter-sql.ts';

// A segment is a named group of an organization's contacts (Resend's /segments). Its contacts are those
// added to it (POST /contacts with `segments`, or POST /contacts/:id/segments/:segment_id), who stay
// until removed or deleted, and, when it has a filter (segment-filter.ts), every contact the filter
// matches at the moment the segment's contacts are asked for: its list, its contacts_count, a broadcast
// to it. An audience (Resend's older /audiences) is the same segment under its older name. Deleting a
// segment deletes its memberships, never its contacts. Membership changes emit no contact.updated;
// contact events carry the segment_ids the contact was added to as they stand
// (webhooks/event-payloads.ts).

export interface Segment {
  id: string;
  name: string;
  created_at: Date;
  filter: SegmentFilter | null;
  contacts_count: number;
}

/**
 * The API shape; contacts_count (its contacts today) is Mailroom's own field beside Resend's. `filter`
 * is there when the segment has one (Resend's GetSegmentResponse types it as an object, never null).
 */
export interface SegmentView {
  object: 'segment';
  id: string;
  name: string;
  filter?: SegmentFilter;
  created_at: string;
  contacts_count: number;
}

// The count of a segment with a filter is computed afterwards (countAudiences), NULL here.
const COLUMNS = `id, name, created_at, filter,
  CASE WHEN filter IS NULL
       THEN (SELECT count(*)::int FROM contact_segments cs WHERE cs.segment_id = segments.id) END AS contacts_count`;

/** A filter as given to POST or PATCH /segments, parsed and checked against the organization. */
async function checkedFilter(db: Queryable, organizationId: string, given: unknown): Promise<SegmentFilter> {
  const filter = parseSegmentFilter(given, 'filter');
  await checkFilterReferences(db, organizationId, filter, 'filter');
  return filter;
}

export async function createSegment(
  db: Queryable,
  organizationId: string,
  name: string,
  filter?: unknown,
): Promise<{ id: string }> {
  const checked = filter === undefined ? null : await checkedFilter(db, organizationId, filter);
  const { rows } = await db.query<{ id: string }>(
    'INSERT INTO segments (organization_id, name, filter) VALUES ($1, $2, $3::jsonb) RETURNING id',
    [organizationId, name, checked === null ? null : JSON.stringify(checked)],
  );
  return { id: rows[0]!.id };
}

/**
 * Bind parameters in one statement that evaluates several segments' conditions, far below PostgreSQL's
 * 65,535 (a filter of 200 property rules takes some 600).
 */
export const CONDITION_PARAMS_MAX = 10_000;
/**
 * Subqueries in one such statement. Planning time grows faster than their number (on PostgreSQL 15, one
 * filter of 200 property rules, some 1,200 subqueries, plans in about 0.1 s; sixteen of them in one
 * statement took over a minute), so a filter that has many goes in a statement of its own.
 */
export const CONDITION_SUBQUERIES_MAX = 1_500;
/** Segments evaluated in one statement (each a column of the count, well below the 1,664 a row may have). */
export const CONDITIONS_PER_STATEMENT_MAX = 500;

const subqueriesOf = (condition: string) => condition.match(/\bSELECT\b/g)?.length ?? 0;

/**
 * The segments' audience conditions (segment-filter.ts) in chunks, one statement each: at most
 * CONDITIONS_PER_STATEMENT_MAX segments whose conditions take at most CONDITION_PARAMS_MAX parameters
 * beside the `fixed` ones and hold at most CONDITION_SUBQUERIES_MAX subqueries (a single segment over a
 * bound goes alone). So an organization's filters, however many and large, never exceed what one
 * statement may bind, and each statement plans in a time proportionate to what it evaluates.
 */
function conditionChunks<T extends { id: string; filter: SegmentFilter | null }>(
  segments: T[],
  fixed: unknown[],
): Array<{ segments: T[]; conditions: string[]; params: unknown[] }> {
  const chunks: Array<{ segments: T[]; conditions: string[]; params: unknown[] }> = [];
  let chunk = { segments: [] as T[], conditions: [] as string[], params: [...fixed], subqueries: 0 };
  for (const segment of segments) {
    let params = [...chunk.params];
    let condition = segmentAudienceCondition(segment, params);
    const full =
      chunk.segments.length >= CONDITIONS_PER_STATEMENT_MAX ||
      params.length - fixed.length > CONDITION_PARAMS_MAX ||
      chunk.subqueries + subqueriesOf(condition) > CONDITION_SUBQUERIES_MAX;
    if (full && chunk.segments.length > 0) {
      chunks.push(chunk);
      params = [...fixed];
      condition = segmentAudienceCondition(segment, params);
      chunk = { segments: [], conditions: [], params, subqueries: 0 };
    }
    chunk.segments.push(segment);
    chunk.conditions.push(condition);
    chunk.params = params;
    chunk.subqueries += subqueriesOf(condition);
  }
  if (chunk.segments.length > 0) chunks.push(chunk);
  return chunks;
}

/**
 * Fills in contacts_count for the segments with a filter: one pass over the organization's contacts
 * counts a chunk of them at once (conditionChunks).
 */
async function countAudiences(db: Queryable, organizationId: string, segments: Segment[]): Promise<Segment[]> {
  const filtered = segments.filter((segment) => segment.filter !== null);
  if (filtered.length === 0) return segments;
  const byId = new Map<string, number>();
  for (const chunk of conditionChunks(filtered, [organizationId])) {
    const counts = chunk.conditions.map((condition, index) => `count(*) FILTER (WHERE ${condition})::int AS n${index}`);
    const { rows } = await db.query<Record<string, number>>(
      `SELECT ${counts.join(', ')} FROM contacts c WHERE c.organization_id = $1`,
      chunk.params,
    );
    chunk.segments.forEach((segment, index) => byId.set(segment.id, rows[0]![`n${index}`]!));
  }
  return segments.map((segment) =>
    byId.has(segment.id) ? { ...segment, contacts_count: byId.get(segment.id)! } : segment,
  );
}

/** Oldest first, a page at a time (platform/db/keyset-page.ts). */
export async function listSegments(
  db: Queryable,
  organizationId: string,
  page: PageRequest,
): Promise<Page<SegmentView>> {
  const listed = await keysetPage<Segment>(
    db,
    { table: 'segments', columns: COLUMNS, organizationId, newestFirst: false },
    page,
  );
  return { ...listed, data: (await countAudiences(db, organizationId, listed.data)).map(toView) };
}

/** One of the organization's segments, or undefined (also for a malformed id). */
export async function findSegment(db: Queryable, organizationId: string, id: string): Promise<Segment | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await db.query<Segment>(`SELECT ${COLUMNS} FROM segments WHERE id = $2 AND organization_id = $1`, [
    organizationId,
    id,
  ]);
  return rows[0];
}

export async function getSegment(db: Queryable, organizationId: string, id: string): Promise<SegmentView> {
  const segment = await findSegment(db, organizationId, id);
  if (!segment) throw notFound('Segment');
  return toView((await countAudiences(db, organizationId, [segment]))[0]!);
}

/** PATCH /segments/:id: a new name, a new filter, or (filter null) none; what is not given stays. */
export async function updateSegment(
  db: Queryable,
  organizationId: string,
  id: string,
  changes: { name?: string; filter?: unknown },
): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Segment');
  const filter =
    changes.filter === undefined || changes.filter === null
      ? changes.filter
      : await checkedFilter(db, organizationId, changes.filter);
  const { rows } = await db.query<{ id: string }>(
    `UPDATE segments SET name = coalesce($3, name),
            filter = CASE WHEN $4::boolean THEN $5::jsonb ELSE filter END, updated_at = now()
      WHERE id = $2 AND organization_id = $1 RETURNING id`,
    [organizationId, id, changes.name ?? null, filter !== undefined, filter ? JSON.stringify(filter) : null],
  );
  if (!rows[0]) throw notFound('Segment');
  return { id: rows[0].id };
}

/** Memberships go with it (ON DELETE CASCADE); the contacts stay. */
export async function deleteSegment(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Segment');
  const { rows } = await db.query<{ id: string }>(
    'DELETE FROM segments WHERE id = $2 AND organization_id = $1 RETURNING id',
    [organizationId, id],
  );
  if (!rows[0]) throw notFound('Segment');
  return { id: rows[0].id };
}

/**
 * The segments a contact (an id read from the database) is in, oldest segment first, a page at a time:
 * those it was added to, and those whose filter matches it now (the organization's filters evaluated
 * on its one row, a chunk of them per statement).
 */
export async function segmentsOfContact(
  db: Queryable,
  organizationId: string,
  contactId: string,
  page: PageRequest,
): Promise<Page<{ id: string; name: string; created_at: string }>> {
  if (!isUuid(contactId)) throw new Error(`not a contact id: ${contactId}`);
  const matched = await segmentsMatching(db, organizationId, contactId);
  const byFilter = matched.length ? ` OR id IN (${matched.map((id) => `'${id}'`).join(', ')})` : '';
  const listed = await keysetPage<Segment>(
    db,
    {
      table: 'segments',
      columns: COLUMNS,
      organizationId,
      newestFirst: false,
      where: `id IN (SELECT segment_id FROM contact_segments WHERE contact_id = '${contactId}')${byFilter}`,
    },
    page,
  );
  return {
    ...listed,
    data: listed.data.map((segment) => ({
      id: segment.id,
      name: segment.name,
      created_at: new Date(segment.created_at).toISOString(),
    })),
  };
}

/**
 * The organization's segments with a filter that matches the contact (ids read from the database): the
 * filters evaluated on its one row, a chunk of them per statement (conditionChunks).
 */
async function segmentsMatching(db: Queryable, organizationId: string, contactId: string): Promise<string[]> {
  const { rows: filtered } = await db.query<{ id: string; filter: SegmentFilter }>(
    'SELECT id, filter FROM segments WHERE organization_id = $1 AND filter IS NOT NULL ORDER BY id',
    [organizationId],
  );
  const matched: string[] = [];
  for (const chunk of conditionChunks(filtered, [organizationId, contactId])) {
    const tests = chunk.conditions.map(
      (condition, index) => `CASE WHEN ${condition} THEN '${chunk.segments[index]!.id}'::uuid END`,
    );
    const { rows } = await db.query<{ ids: string[] }>(
      `SELECT array_remove(ARRAY[${tests.join(', ')}], NULL)::text[] AS ids FROM contacts c
        WHERE c.organization_id = $1 AND c.id = $2`,
      chunk.params,
    );
    matched.push(...(rows[0]?.ids ?? []));
  }
  return matched;
}

/**
 * Segment ids as POST /contacts gives them (Resend's OpenAPI: strings; its SDK: `{ id }`), lower-cased,
 * each once, in id order (the order contact events list a new contact's segments in); a malformed id is
 * a 400 on `field`.
 */
export function checkedSegmentIds(ids: Array<string | { id: string }>, field: string): string[] {
  const seen = new Set<string>();
  for (const given of ids) {
    const id = typeof given === 'string' ? given : given.id;
    if (!isUuid(id))
      throw new ServiceError('validation_error', `${field}: ${JSON.stringify(id)} is not a segment id`, field);
    seen.add(id.toLowerCase());
  }
  return [...seen].sort();
}

/**
 * Checks that every id is a segment of the organization (a 400 on `field` naming the others), locking
 * them (FOR SHARE) until the caller's transaction ends so that none is deleted before the memberships
 * are written.
 */
export async function checkSegmentsExist(tx: Queryable, organizationId: string, ids: string[], field: string) {
  if (ids.length === 0) return;
  const { rows } = await tx.query<{ id: string }>(
    'SELECT id FROM segments WHERE organization_id = $1 AND id = ANY ($2::uuid[]) ORDER BY id FOR SHARE',
    [organizationId, ids],
  );
  if (rows.length < ids.length) {
    const found = new Set(rows.map((row) => row.id));
    const missing = ids.filter((id) => !found.has(id));
    throw new ServiceError('validation_error', `${field}: no such segment: ${missing.join(', ')}`, field);
  }
}

/** Adds the contact (an id read from the database) to segments already checked; present memberships stay. */
export async function addMemberships(tx: Queryable, contactId: string, segmentIds: string[]) {
  if (segmentIds.length === 0) return;
  await tx.query(
    `INSERT INTO contact_segments (contact_id, segment_id)
     SELECT $1, segment_id FROM unnest($2::uuid[]) AS segment_id
     ON CONFLICT (contact_id, segment_id) DO NOTHING`,
    [contactId, segmentIds],
  );
}

/** POST /contacts/:id/segments/:segment_id: the contact joins the segment (already in it: nothing changes). */
export async function addToSegment(db: Queryable, organizationId: string, contactId: string, segmentId: string) {
  const segment = await findSegment(db, organizationId, segmentId);
  if (!segment) throw notFound('Segment');
  try {
    await addMemberships(db, contactId, [segment.id]);
  } catch (error) {
    // The contact or the segment was deleted between the reads and this write.
    if (isForeignKeyViolation(error)) throw notFound('Segment');
    throw error;
  }
  return { segmentId: segment.id };
}

/** DELETE /contacts/:id/segments/:segment_id: a contact not in the segment is a 404. */
export async function removeFromSegment(db: Queryable, organizationId: string, contactId: string, segmentId: string) {
  const segment = await findSegment(db, organizationId, segmentId);
  if (!segment) throw notFound('Segment');
  const { rowCount } = await db.query('DELETE FROM contact_segments WHERE contact_id = $1 AND segment_id = $2', [
    contactId,
    segment.id,
  ]);
  if (rowCount === 0) {
    // A contact the segment's filter matches is in it without having been added: only the filter's
    // change removes it.
    throw new ServiceError('not_found', 'The contact was not added to this segment');
  }
  return { segmentId: segment.id };
}

function toView(segment: Segment): SegmentView {
  return {
    object: 'segment',
    id: segment.id,
    name: segment.name,
    ...(segment.filter === null ? {} : { filter: segment.filter }),
    created_at: new Date(segment.created_at).toISOString(),
    contacts_count: segment.contacts_count,
  };
}
