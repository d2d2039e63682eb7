import type { Queryable } from '../platform/db/database.ts';

// Inbound routes: which recipients the listener takes, and what happens to a message once taken.
// SEAM (filled in by the routes work): the signatures below are what the listener calls.

/** What the listener answers at RCPT TO for one recipient. */
export type RecipientDecision =
  | { accept: true; organizationId: string; domainId: string }
  | { accept: false; code: number; message: string };

export type RouteAction =
  | { type: 'store' }
  | { type: 'forward'; to: string[] }
  | { type: 'webhook'; endpoint_id: string }
  | { type: 'reject'; message?: string };

/** A route that matched a message, and the actions it contributed. */
export interface AppliedRoute {
  route_id: string;
  actions: RouteAction[];
}

export interface RoutingResult {
  applied: AppliedRoute[];
  /** Addresses the message is forwarded to (each once). */
  forwardTo: string[];
  /** Webhook endpoints told of the message (email.received) besides those subscribed to it. */
  webhookEndpointIds: string[];
}

/**
 * The answer at RCPT TO: accepted for the organization whose receiving domain the address is at, unless
 * a route refuses it; an address at no receiving domain is refused (550 5.1.1).
 */
export async function decideRecipient(db: Queryable, address: string): Promise<RecipientDecision> {
  const domain = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
  const { rows } = await db.query<{ organization_id: string; id: string }>(
    'SELECT organization_id, id FROM domains WHERE lower(name) = $1 AND receiving LIMIT 1',
    [domain],
  );
  const found = rows[0];
  if (!found) return { accept: false, code: 550, message: '5.1.1 No such recipient here' };
  return { accept: true, organizationId: found.organization_id, domainId: found.id };
}

/** The routes that apply to a message taken for `recipients` (all of one organization), with its headers. */
export async function routeMessage(
  _db: Queryable,
  _organizationId: string,
  _recipients: string[],
  _headers: Record<string, string>,
): Promise<RoutingResult> {
  return { applied: [], forwardTo: [], webhookEndpointIds: [] };
}

/**
 * Queues what the routes decided (forwarded copies, webhook notices) for a stored received message,
 * inside the transaction that stores it: a message is never stored without its actions, or the reverse.
 */
export async function queueRouteActions(
  _tx: Queryable,
  _organizationId: string,
  _receivedEmailId: string,
  _routing: RoutingResult,
): Promise<void> {}
