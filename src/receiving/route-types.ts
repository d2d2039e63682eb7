// The vocabulary of inbound routes shared by the matcher (routes.ts), the route model
// (inbound-routes.ts) and the actions (forward.ts, route-webhooks.ts): what a route does, and what a
// message's routing came to.

export type RouteAction =
  | { type: 'store' }
  | { type: 'forward'; to: string[] }
  | { type: 'webhook'; endpoint_id: string }
  | { type: 'reject'; message?: string };

export type ForwardOutcome = { action: 'forward'; to: string; email_id?: string; skipped?: string };

export type WebhookOutcome = { action: 'webhook'; endpoint_id: string; delivery_id?: string; skipped?: string };

export type RouteOutcome = ForwardOutcome | WebhookOutcome;

/** A route that matched a message, and the actions it contributed. */
export interface AppliedRoute {
  route_id: string;
  actions: RouteAction[];
  /** What its forward and webhook actions did, once queued (queueRouteActions fills it in). */
  outcomes?: RouteOutcome[];
}

export interface RoutingResult {
  applied: AppliedRoute[];
  /** Addresses the message is forwarded to (each once). */
  forwardTo: string[];
  /** Webhook endpoints told of the message (email.received) besides those subscribed to it. */
  webhookEndpointIds: string[];
  /**
   * For each address of forwardTo, the recipient of the message it is forwarded for (the first that
   * matched a route forwarding to it): the forwarded copy is sent from that address.
   */
  forwardFrom?: Record<string, string>;
}
