import type { Queryable } from '../platform/db/database.ts';
import { addressKey } from '../platform/address-key.ts';
import { lookupCache } from '../platform/db/lookup-cache.ts';
import type { InboundRouteRow } from './inbound-routes.ts';
import { compileRoute } from './inbound-routes-matching.ts';
import { forwardCopies } from './forward.ts';
import { notifyRouteEndpoints, type ReceivedEvent } from './route-webhooks.ts';
import type { RouteAction, RouteOutcome, RoutingResult } from './route-types.ts';

export type { AppliedRoute, RouteAction, RouteOutcome, RoutingResult } from './route-types.ts';

// Inbound routes at work: which recipients the listener takes (decideRecipient, at RCPT TO), which
// routes apply to a message once taken (routeMessage), and what they queue in the transaction that
// stores it (queueRouteActions). Routes are answered from memory (platform/db/lookup-cache.ts): a
// change made through this process applies to the next recipient, one made elsewhere (another process,
// SQL) as soon as its notification arrives (a trigger on inbound_routes, and on domains, sends it from
// the commit). A domain that receives nothing is looked up every time, so a new one works at once.

/** What the listener answers at RCPT TO for one recipient. */
export type RecipientDecision =
  { accept: true; organizationId: string; domainId: string } | { accept: false; code: number; message: string };

const ROUTE_COLUMNS = `r.id, r.recipient_kind, r.recipient_pattern, r.header_name, r.header_pattern, r.actions, r.stop`;
const ROUTE_ORDER = 'r.priority, r.created_at, r.id';

type RouteRow = Pick<
  InboundRouteRow,
  'id' | 'recipient_kind' | 'recipient_pattern' | 'header_name' | 'header_pattern' | 'actions' | 'stop'
>;

/** A receiving domain's organization with one of its routes (none: the route's columns are null). */
type RecipientRow = { organization_id: string; domain_id: string } & Partial<RouteRow>;

/**
 * The answer at RCPT TO: accepted for the organization whose receiving domain the address is at (a
 * verified one: an organization that added a name without proving it owns it receives nothing there), unless
 * a route refuses it (550 5.7.1 with the route's message); an address at no receiving domain is refused
 * (550 5.1.1). Only routes without a header condition are tried (headers come later, with DATA): the
 * first that matches and rejects refuses, one that matches with `stop` ends the walk. One query reads
 * the domain and its organization's routes.
 */
export async function decideRecipient(db: Queryable, address: string): Promise<RecipientDecision> {
  const key = addressKey(address);
  const domain = key.slice(key.lastIndexOf('@') + 1);
  const rows = await lookupCache<RecipientRow[]>(db, 'receiving-domains').through(
    domain,
    async () => {
      const { rows: found } = await db.query<RecipientRow>(
        `SELECT d.organization_id, d.id AS domain_id, ${ROUTE_COLUMNS}
           FROM (SELECT organization_id, id FROM domains WHERE name = $1 AND receiving AND status = 'verified'
                  ORDER BY created_at LIMIT 1) d
           LEFT JOIN inbound_routes r ON r.organization_id = d.organization_id AND r.enabled AND r.header_name IS NULL
          ORDER BY ${ROUTE_ORDER}`,
        [domain],
      );
      return found;
    },
    (found) => found.length > 0,
  );
  const found = rows[0];
  if (!found) return { accept: false, code: 550, message: '5.1.1 No such recipient here' };
  for (const row of rows) {
    if (row.id === undefined || row.id === null) break;
    const route = compileRoute(row as RouteRow);
    if (!route.recipient(address)) continue;
    const reject = route.row.actions.find((action) => action.type === 'reject');
    if (reject) return { accept: false, code: 550, message: `5.7.1 ${reject.message ?? 'Message refused'}` };
    if (route.row.stop) break;
  }
  return { accept: true, organizationId: found.organization_id, domainId: found.domain_id };
}

/**
 * The routes that apply to a message taken for `recipients` (all of one organization), with its headers:
 * in order, each that matches any recipient and its header condition (when it has one), up to and
 * including the first matching route with `stop`. A reject action here is not applied (the recipient was
 * taken at RCPT TO, before the route existed or under a header condition it cannot have).
 */
export async function routeMessage(
  db: Queryable,
  organizationId: string,
  recipients: string[],
  headers: Record<string, string>,
): Promise<RoutingResult> {
  const rows = await lookupCache<RouteRow[]>(db, 'receiving-routes').through(
    organizationId,
    async () =>
      (
        await db.query<RouteRow>(
          `SELECT ${ROUTE_COLUMNS} FROM inbound_routes r WHERE r.organization_id = $1 AND r.enabled ORDER BY ${ROUTE_ORDER}`,
          [organizationId],
        )
      ).rows,
    () => true, // the organization's routes, none included: it receives (a verified receiving domain led here)
  );
  const result: RoutingResult = { applied: [], forwardTo: [], webhookEndpointIds: [], forwardFrom: {} };
  const forwarded = new Set<string>();
  for (const row of rows) {
    const route = compileRoute(row);
    const matched = recipients.find((recipient) => route.recipient(recipient));
    if (matched === undefined || !route.header(headers)) continue;
    const actions = row.actions.filter((action) => action.type !== 'reject');
    result.applied.push({ route_id: row.id, actions });
    for (const action of actions) {
      if (action.type === 'forward') {
        for (const to of action.to) {
          if (forwarded.has(addressKey(to))) continue;
          forwarded.add(addressKey(to));
          result.forwardTo.push(to);
          result.forwardFrom![to] = matched;
        }
      } else if (action.type === 'webhook' && !result.webhookEndpointIds.includes(action.endpoint_id)) {
        result.webhookEndpointIds.push(action.endpoint_id);
      }
    }
    if (row.stop) break;
  }
  return result;
}

/**
 * Queues what the routes decided (forwarded copies, webhook notices) for a stored received message,
 * inside the transaction that stores it: a message is never stored without its actions, or the reverse.
 * What each action did is written to the message's `routes`. `event` is the email.received event the
 * listener fanned out to subscribers, so that a route's endpoint gets the same event (same evt_ id);
 * without it the event is made here from the stored message.
 */
export async function queueRouteActions(
  tx: Queryable,
  organizationId: string,
  receivedEmailId: string,
  routing: RoutingResult,
  event?: ReceivedEvent,
): Promise<void> {
  if (routing.applied.length === 0) return;
  const forwards = await forwardCopies(tx, organizationId, receivedEmailId, routing);
  const notices = await notifyRouteEndpoints(tx, organizationId, receivedEmailId, routing.webhookEndpointIds, event);
  // Each outcome goes with the first applied route that asked for it.
  const applied = routing.applied.map((route) => ({ ...route, outcomes: [] as RouteOutcome[] }));
  const owner = (wants: (action: RouteAction) => boolean) => applied.find((r) => r.actions.some(wants));
  for (const outcome of forwards) {
    const key = addressKey(outcome.to);
    owner((a) => a.type === 'forward' && a.to.some((to) => addressKey(to) === key))?.outcomes.push(outcome);
  }
  for (const outcome of notices) {
    owner((a) => a.type === 'webhook' && a.endpoint_id === outcome.endpoint_id)?.outcomes.push(outcome);
  }
  await tx.query('UPDATE received_emails SET routes = $2::jsonb WHERE id = $1', [
    receivedEmailId,
    JSON.stringify(applied.map((route) => (route.outcomes.length > 0 ? route : { ...route, outcomes: undefined }))),
  ]);
}
