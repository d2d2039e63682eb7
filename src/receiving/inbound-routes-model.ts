import type { RouteAction } from './route-types.ts';

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
