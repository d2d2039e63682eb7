import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { addressKey } from '../platform/address-key.ts';
import { parseMailbox } from '../platform/addresses.ts';
import { hasControlCharacter } from '../platform/text.ts';
import {
  DEFAULT_REJECT_MESSAGE,
  MAX_FORWARD_ADDRESSES,
  type InboundRouteRow,
  type RecipientKind,
  type RouteInput,
} from './inbound-routes-model.ts';
import { compilePattern } from './route-patterns.ts';
import type { RouteAction } from './route-types.ts';

// Checking an inbound route as the API gives it: its recipient pattern (an address or domain of the
// organization's own, a regular expression that cannot stall the listener), its header condition and
// its actions (addresses, the organization's webhook endpoints); a 400 names the field at fault.

/** A route as the API's body makes it, checked: a row without what the database fills in. */
export type CheckedRoute = Omit<InboundRouteRow, 'id' | 'created_at' | 'updated_at'>;

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
export async function checkRoute(
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
