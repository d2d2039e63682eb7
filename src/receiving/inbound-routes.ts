import type { Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import type { Page, PageRequest } from '../platform/db/keyset-page.ts';
import { toView, type InboundRouteRow, type InboundRouteView, type RouteInput } from './inbound-routes-model.ts';
import { checkRoute, type CheckedRoute } from './inbound-routes-checks.ts';
import { forgetLookups } from '../platform/db/lookup-cache.ts';

export * from './inbound-routes-model.ts';

// The rows of inbound routes: create, read, update, delete and list an organization's routes, each
// checked as a whole (inbound-routes-checks.ts) before it is written. What a route is, and the
// constants of the API, are in inbound-routes-model.ts (exported from here too).

const COLUMNS = `id, description, priority, recipient_kind, recipient_pattern, header_name, header_pattern, actions,
  stop, enabled, created_at, updated_at`;

export async function createRoute(db: Queryable, organizationId: string, input: RouteInput): Promise<InboundRouteView> {
  if (!input.match) throw new ServiceError('missing_required_field', 'Missing required field: match', 'match');
  const route = await checkRoute(db, organizationId, {
    ...input,
    match: input.match,
    actions: input.actions ?? [{ type: 'store' }],
  });
  const { rows } = await db.query<InboundRouteRow>(
    `INSERT INTO inbound_routes (organization_id, description, priority, recipient_kind, recipient_pattern,
       header_name, header_pattern, actions, stop, enabled)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10) RETURNING ${COLUMNS}`,
    [organizationId, ...rowValues(route)],
  );
  forgetLookups(db); // this process's cached routes at once; the others' on the trigger's notification
  return toView(rows[0]!);
}

const rowValues = (route: CheckedRoute) => [
  route.description,
  route.priority,
  route.recipient_kind,
  route.recipient_pattern,
  route.header_name,
  route.header_pattern,
  JSON.stringify(route.actions),
  route.stop,
  route.enabled,
];

async function findRoute(db: Queryable, organizationId: string, id: string): Promise<InboundRouteRow> {
  if (!isUuid(id)) throw notFound('Inbound route');
  const { rows } = await db.query<InboundRouteRow>(
    `SELECT ${COLUMNS} FROM inbound_routes WHERE id = $1 AND organization_id = $2`,
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Inbound route');
  return rows[0];
}

export async function getRoute(db: Queryable, organizationId: string, id: string): Promise<InboundRouteView> {
  return toView(await findRoute(db, organizationId, id));
}

/** Changes the fields given; `match` and `actions` are replaced whole. The result is checked as a whole. */
export async function updateRoute(
  db: Queryable,
  organizationId: string,
  id: string,
  input: RouteInput,
): Promise<InboundRouteView> {
  const current = await findRoute(db, organizationId, id);
  const view = toView(current);
  const header = input.match ? (input.match.header ?? undefined) : view.match.header;
  const route = await checkRoute(db, organizationId, {
    description: input.description ?? current.description,
    priority: input.priority ?? current.priority,
    match: input.match
      ? { ...input.match, header }
      : { recipient: current.recipient_pattern, recipient_kind: current.recipient_kind, header },
    actions: input.actions ?? current.actions,
    stop: input.stop ?? current.stop,
    enabled: input.enabled ?? current.enabled,
  });
  const { rows } = await db.query<InboundRouteRow>(
    `UPDATE inbound_routes SET description = $3, priority = $4, recipient_kind = $5, recipient_pattern = $6,
            header_name = $7, header_pattern = $8, actions = $9::jsonb, stop = $10, enabled = $11, updated_at = now()
      WHERE id = $1 AND organization_id = $2 RETURNING ${COLUMNS}`,
    [id, organizationId, ...rowValues(route)],
  );
  if (!rows[0]) throw notFound('Inbound route');
  forgetLookups(db);
  return toView(rows[0]);
}

export async function deleteRoute(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Inbound route');
  const { rows } = await db.query<{ id: string }>(
    'DELETE FROM inbound_routes WHERE id = $1 AND organization_id = $2 RETURNING id',
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Inbound route');
  forgetLookups(db);
  return { id: rows[0].id };
}

/**
 * The organization's routes in the order they are tried (priority, then oldest), a page at a time: the
 * same limit/after/before as Mailroom's other lists (platform/db/keyset-page.ts), cut by keyset on
 * (priority, created_at, id), the order of the table's index.
 */
export async function listRoutes(
  db: Queryable,
  organizationId: string,
  page: PageRequest,
): Promise<Page<InboundRouteView>> {
  if (page.after !== undefined && page.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  const cursor = page.after ?? page.before;
  const field = page.after !== undefined ? 'after' : 'before';
  const params: unknown[] = [organizationId];
  let where = 'organization_id = $1';
  const forward = page.before === undefined;
  if (cursor !== undefined) {
    const { rowCount } = isUuid(cursor)
      ? await db.query('SELECT 1 FROM inbound_routes WHERE organization_id = $1 AND id = $2', [organizationId, cursor])
      : { rowCount: 0 };
    if (!rowCount) throw new ServiceError('validation_error', `${field}: no such item ${cursor}`, field);
    params.push(cursor);
    where += ` AND (priority, created_at, id) ${forward ? '>' : '<'}
      (SELECT c.priority, c.created_at, c.id FROM inbound_routes c WHERE c.id = $2::uuid)`;
  }
  const order = forward ? 'ASC' : 'DESC';
  const limit = page.limit === undefined ? '' : `LIMIT $${params.push(page.limit + 1)}`;
  const { rows } = await db.query<InboundRouteRow>(
    `SELECT ${COLUMNS} FROM inbound_routes WHERE ${where}
      ORDER BY priority ${order}, created_at ${order}, id ${order} ${limit}`,
    params,
  );
  const hasMore = page.limit !== undefined && rows.length > page.limit;
  const data = hasMore ? rows.slice(0, page.limit) : rows;
  if (!forward) data.reverse();
  return { object: 'list', has_more: hasMore, data: data.map(toView) };
}
