import type { Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { addressKey } from '../platform/address-key.ts';
import { parseMailbox } from '../platform/addresses.ts';
import { hasControlCharacter } from '../platform/text.ts';
import type { Page, PageRequest } from '../platform/db/keyset-page.ts';
import type { RouteAction } from './route-types.ts';
import { compilePattern, testPattern } from './route-patterns.ts';

// Inbound routes (Mailroom's own API, like Mailgun's routes): an organization's rules for the mail its
// receiving domains take. Each route matches recipients by one of five kinds, optionally also a header,
// and contributes actions; routes are tried by priority (lowest first, then oldest) and `stop` ends the
// walk. The recipient pattern is kept as the API writes it, so what is read back is what was written:
//   exact      `support@example.com`  that address, without case
//   domain     `*@example.com`        every address at that domain (not its subdomains)
//   plus_tag   `+orders`              every address whose tag (after the first '+' of the part before @)
//                                     is `orders`, at any of the organization's receiving domains
//   regex      `^help-[0-9]+@example\.com$`  over the whole address (anchored), without case
//   catch_all  `*`                    every address at the organization's receiving domains

export const RECIPIENT_KINDS = ['exact', 'domain', 'plus_tag', 'regex', 'catch_all'] as const;
export type RecipientKind = (typeof RECIPIENT_KINDS)[number];
export const MAX_FORWARD_ADDRESSES = 10;
export const MAX_ACTIONS = 10;
export const DEFAULT_REJECT_MESSAGE = 'Message refused by the recipient domain';

export interface InboundRouteRow {
  id: string;
  description: string;
  priority: number;
  recipient_kind: RecipientKind;
  recipient_pattern: string;
  header_name: string | null;
  header_pattern: string | null;
  actions: RouteAction[];
  stop: boolean;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface InboundRouteView {
  object: 'inbound_route';
  id: string;
  description: string;
  priority: number;
  match: { recipient: string; recipient_kind: RecipientKind; header?: { name: string; pattern: string } };
  actions: RouteAction[];
  stop: boolean;
  enabled: boolean;
  created_at: string;
  updated_at: string;
}

/** The API's body for a route (all fields, as on create; an update gives some and keeps the rest). */
export interface RouteInput {
  description?: string;
  priority?: number;
  match?: { recipient?: string; recipient_kind: RecipientKind; header?: { name: string; pattern: string } | null };
  actions?: Array<{ type: string; to?: string[]; endpoint_id?: string; message?: string }>;
  stop?: boolean;
  enabled?: boolean;
}

const COLUMNS = `id, description, priority, recipient_kind, recipient_pattern, header_name, header_pattern, actions,
  stop, enabled, created_at, updated_at`;

export function toView(row: InboundRouteRow): InboundRouteView {
  const header =
    row.header_name === null || row.header_pattern === null
      ? undefined
      : { name: row.header_name, pattern: row.header_pattern };
  return {
    object: 'inbound_route',
    id: row.id,
    description: row.description,
    priority: row.priority,
    match: { recipient: row.recipient_pattern, recipient_kind: row.recipient_kind, ...(header ? { header } : {}) },
    actions: row.actions,
    stop: row.stop,
    enabled: row.enabled,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

// ---- matching ----

/** A route ready to be tried: its patterns compiled once per walk. */
export interface CompiledRoute {
  row: Pick<InboundRouteRow, 'id' | 'recipient_kind' | 'recipient_pattern' | 'actions' | 'stop'> &
    Partial<Pick<InboundRouteRow, 'header_name' | 'header_pattern'>>;
  recipient(address: string): boolean;
  header(headers: Record<string, string>): boolean;
}

export function compileRoute(row: CompiledRoute['row']): CompiledRoute {
  return {
    row,
    recipient: recipientMatcher(row.recipient_kind, row.recipient_pattern),
    header: headerMatcher(row.header_name ?? null, row.header_pattern ?? null),
  };
}

/** The tag of an address: what follows the first '+' of the part before @ (none: undefined). */
export function plusTag(address: string): string | undefined {
  const local = address.slice(0, address.lastIndexOf('@'));
  const plus = local.indexOf('+');
  return plus < 0 ? undefined : local.slice(plus + 1);
}

function recipientMatcher(kind: RecipientKind, pattern: string): (address: string) => boolean {
  switch (kind) {
    case 'exact': {
      const key = addressKey(pattern);
      return (address) => addressKey(address) === key;
    }
    case 'domain': {
      const domain = addressKey(`x${pattern.slice(1)}`).slice(2);
      return (address) => addressKey(address).endsWith(`@${domain}`);
    }
    case 'plus_tag': {
      const tag = pattern.slice(1).toLowerCase();
      return (address) => plusTag(address)?.toLowerCase() === tag;
    }
    case 'regex': {
      // Stored patterns were checked when written; one that no longer compiles matches nothing.
      let compiled: RegExp | undefined;
      try {
        compiled = compilePattern(pattern, 'match.recipient', true);
      } catch {
        return () => false;
      }
      return (address) => testPattern(compiled, address);
    }
    case 'catch_all':
      return () => true;
  }
}

function headerMatcher(name: string | null, pattern: string | null): (headers: Record<string, string>) => boolean {
  if (name === null || pattern === null) return () => true;
  let compiled: RegExp;
  try {
    compiled = compilePattern(pattern, 'match.header.pattern', false);
  } catch {
    return () => false;
  }
  return (headers) => {
    const value = headerValue(headers, name);
    return value !== undefined && testPattern(compiled, value);
  };
}

/** A header's value from a flat map whose names may be in any case. */
function headerValue(headers: Record<string, string>, name: string): string | undefined {
  // Own properties only: a route on a header named `constructor` or `__proto__` must not find Object's.
  if (Object.hasOwn(headers, name)) return headers[name];
  const lower = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === lower) return value;
  return undefined;
}

// ---- checking what the API is given ----

/** A route as the API's body makes it, checked: a row without what the database fills in. */
type CheckedRoute = Omit<InboundRouteRow, 'id' | 'created_at' | 'updated_at'>;

const HEADER_NAME = /^[!-9;-~]{1,100}$/; // printable ASCII without ":" (RFC 5322 ftext)

/** The pattern as stored for a recipient of `kind`, or a 400 naming match.recipient. */
async function checkRecipient(
  db: Queryable,
  organizationId: string,
  kind: RecipientKind,
  recipient: string | undefined,
): Promise<string> {
  const field = 'match.recipient';
  const refuse = (why: string) => new ServiceError('validation_error', `${field}: ${why}`, field);
  if (kind === 'catch_all') {
    // Explicit on purpose: the kind says it, and a recipient, when given, can only be `*`.
    if (recipient !== undefined && recipient !== '*') throw refuse('a catch_all route has the recipient "*" (or none)');
    return '*';
  }
  if (recipient === undefined || recipient.trim() === '') {
    throw new ServiceError('missing_required_field', `Missing required field: ${field}`, field);
  }
  if (hasControlCharacter(recipient)) throw refuse('it contains a line break or control character');
  const value = recipient.trim();
  switch (kind) {
    case 'exact': {
      if (value.includes('<')) throw refuse('give the bare address, without a name or <>');
      const { address, domain } = parseMailbox(value, field);
      await requireOwnDomain(db, organizationId, domain, field);
      return addressKey(address);
    }
    case 'domain': {
      if (!value.startsWith('*@'))
        throw refuse(`a domain route's recipient is written "*@example.com", not "${value}"`);
      const { domain } = parseMailbox(`x${value.slice(1)}`, field);
      await requireOwnDomain(db, organizationId, domain, field);
      return `*@${domain}`;
    }
    case 'plus_tag': {
      const tag = value.startsWith('+') ? value.slice(1) : value;
      if (!/^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}$/.test(tag)) {
        throw refuse('a plus_tag route\'s recipient is the tag, written "+orders" (characters an address may hold)');
      }
      return `+${tag.toLowerCase()}`;
    }
    case 'regex':
      compilePattern(value, field, true);
      return value;
  }
}

async function requireOwnDomain(db: Queryable, organizationId: string, domain: string, field: string): Promise<void> {
  const { rowCount } = await db.query('SELECT 1 FROM domains WHERE organization_id = $1 AND name = $2', [
    organizationId,
    domain,
  ]);
  if (!rowCount) {
    throw new ServiceError('validation_error', `${field}: ${domain} is not a domain of this organization`, field);
  }
}

async function checkActions(
  db: Queryable,
  organizationId: string,
  given: NonNullable<RouteInput['actions']>,
  hasHeader: boolean,
): Promise<RouteAction[]> {
  if (given.length === 0) throw new ServiceError('validation_error', 'actions: give at least one action', 'actions');
  const actions: RouteAction[] = [];
  for (const [i, action] of given.entries()) {
    const at = `actions.${i}`;
    const refuse = (why: string, field = at) => new ServiceError('validation_error', `${field}: ${why}`, field);
    const extra = Object.keys(action).find(
      (key) =>
        key !== 'type' &&
        !(action.type === 'forward' && key === 'to') &&
        !(action.type === 'webhook' && key === 'endpoint_id') &&
        !(action.type === 'reject' && key === 'message'),
    );
    if (extra !== undefined) throw refuse(`a ${action.type} action has no field ${extra}`, `${at}.${extra}`);
    switch (action.type) {
      case 'store':
        actions.push({ type: 'store' });
        break;
      case 'forward': {
        const to = action.to;
        if (to === undefined || to.length === 0)
          throw refuse('a forward action needs at least one address', `${at}.to`);
        if (to.length > MAX_FORWARD_ADDRESSES) {
          throw refuse(`at most ${MAX_FORWARD_ADDRESSES} addresses`, `${at}.to`);
        }
        const addresses = new Map<string, string>();
        for (const [j, raw] of to.entries()) {
          const field = `${at}.to.${j}`;
          if (raw.includes('<')) throw refuse('give the bare address, without a name or <>', field);
          const { address } = parseMailbox(raw, field);
          if (!addresses.has(addressKey(address))) addresses.set(addressKey(address), address);
        }
        actions.push({ type: 'forward', to: [...addresses.values()] });
        break;
      }
      case 'webhook': {
        const id = action.endpoint_id;
        const field = `${at}.endpoint_id`;
        if (id === undefined)
          throw new ServiceError('missing_required_field', `Missing required field: ${field}`, field);
        const { rowCount } = isUuid(id)
          ? await db.query('SELECT 1 FROM webhook_endpoints WHERE id = $1 AND organization_id = $2', [
              id,
              organizationId,
            ])
          : { rowCount: 0 };
        if (!rowCount) throw refuse(`no webhook endpoint ${id} in this organization`, field);
        actions.push({ type: 'webhook', endpoint_id: id.toLowerCase() });
        break;
      }
      case 'reject': {
        // Headers are not known at RCPT TO, where a refusal is answered.
        if (hasHeader) {
          throw refuse(
            'a route with a header condition cannot reject: recipients are refused at RCPT TO, before any header',
          );
        }
        if (given.length > 1) throw refuse('reject is the only action of its route', 'actions');
        const message = action.message?.trim() || DEFAULT_REJECT_MESSAGE;
        if (!/^[ -~]{1,200}$/.test(message)) {
          throw refuse('the message is printable ASCII, at most 200 characters', `${at}.message`);
        }
        actions.push({ type: 'reject', message });
        break;
      }
      default:
        throw refuse(`type is store, forward, webhook or reject, not "${action.type}"`, `${at}.type`);
    }
  }
  return actions;
}

/** Checks a whole route (a create's body, or an update merged onto what is stored). */
async function checkRoute(
  db: Queryable,
  organizationId: string,
  input: Required<Pick<RouteInput, 'match' | 'actions'>> & RouteInput,
): Promise<CheckedRoute> {
  const { match } = input;
  const recipientPattern = await checkRecipient(db, organizationId, match.recipient_kind, match.recipient);
  let headerName: string | null = null;
  let headerPattern: string | null = null;
  if (match.header) {
    if (!HEADER_NAME.test(match.header.name)) {
      throw new ServiceError(
        'validation_error',
        'match.header.name: a header name (printable ASCII without ":")',
        'match.header.name',
      );
    }
    compilePattern(match.header.pattern, 'match.header.pattern', false);
    headerName = match.header.name.toLowerCase();
    headerPattern = match.header.pattern;
  }
  return {
    description: input.description ?? '',
    priority: input.priority ?? 0,
    recipient_kind: match.recipient_kind,
    recipient_pattern: recipientPattern,
    header_name: headerName,
    header_pattern: headerPattern,
    actions: await checkActions(db, organizationId, input.actions, headerName !== null),
    stop: input.stop ?? false,
    enabled: input.enabled ?? true,
  };
}

// ---- the rows ----

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
  return toView(rows[0]);
}

export async function deleteRoute(db: Queryable, organizationId: string, id: string): Promise<{ id: string }> {
  if (!isUuid(id)) throw notFound('Inbound route');
  const { rows } = await db.query<{ id: string }>(
    'DELETE FROM inbound_routes WHERE id = $1 AND organization_id = $2 RETURNING id',
    [id, organizationId],
  );
  if (!rows[0]) throw notFound('Inbound route');
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
