import { ApiError } from '../api.ts';
import type { Webhook } from './WebhooksPage.tsx';

// An inbound route as the API gives it, and the form's draft of one: what the list, a route's page and the
// received message's handling show, and the body the API is sent.

export type RecipientKind = 'exact' | 'domain' | 'plus_tag' | 'regex' | 'catch_all';

export type RouteAction =
  | { type: 'store' }
  | { type: 'forward'; to: string[] }
  | { type: 'webhook'; endpoint_id: string }
  | { type: 'reject'; message?: string };

export interface InboundRoute {
  object: 'inbound_route';
  id: string;
  description: string;
  priority: number;
  match: { recipient: string; recipient_kind: RecipientKind; header?: { name: string; pattern: string } | null };
  actions: RouteAction[];
  stop: boolean;
  enabled: boolean;
  created_at: string;
  updated_at: string;
}

// How the API writes each kind's pattern (src/receiving/inbound-routes.ts): read back as written.
export const RECIPIENT_KINDS: Array<{ value: RecipientKind; label: string; hint: string; placeholder: string }> = [
  {
    value: 'exact',
    label: 'Exact address',
    hint: 'One address at one of your domains, e.g. support@acme.example',
    placeholder: 'support@acme.example',
  },
  {
    value: 'domain',
    label: 'Every address at a domain',
    hint: 'Written *@ and one of your domains, e.g. *@acme.example (not its subdomains)',
    placeholder: '*@acme.example',
  },
  {
    value: 'plus_tag',
    label: 'Plus tag',
    hint: 'The tag after “+” in the part before @, at any of your receiving domains: +orders matches shop+orders@acme.example',
    placeholder: '+orders',
  },
  {
    value: 'regex',
    label: 'Regular expression',
    hint: 'Matched against the whole address, without case, e.g. ^help-[0-9]+@acme\\.example$',
    placeholder: '^help-[0-9]+@acme\\.example$',
  },
  {
    value: 'catch_all',
    label: 'Every address (catch-all)',
    hint: 'Matches every recipient at your receiving domains.',
    placeholder: '',
  },
];

/** An action in words, as the list and a received message's page show it (an endpoint by its URL when known). */
export function actionText(action: RouteAction, endpoints: Webhook[] = []): string {
  switch (action.type) {
    case 'store':
      return 'store';
    case 'forward':
      return `forward to ${action.to.join(', ')}`;
    case 'webhook':
      return `send to webhook ${endpoints.find((endpoint) => endpoint.id === action.endpoint_id)?.endpoint ?? action.endpoint_id}`;
    case 'reject':
      return action.message ? `reject (“${action.message}”)` : 'reject';
    default:
      return String((action as { type?: unknown }).type ?? 'unknown');
  }
}

/** The recipient condition in words: "exact: support@acme.example", "catch-all". */
export function matchText(route: InboundRoute): string {
  if (route.match.recipient_kind === 'catch_all') return 'every address (catch-all)';
  if (route.match.recipient_kind === 'exact') return route.match.recipient;
  const kind = RECIPIENT_KINDS.find((entry) => entry.value === route.match.recipient_kind);
  return `${kind ? kind.label.toLowerCase() : route.match.recipient_kind}: ${route.match.recipient}`;
}

// The form's state: every action keeps the fields of every type, so switching an action's type and back
// does not lose what was typed.
export interface ActionDraft {
  type: RouteAction['type'];
  to: string;
  endpointId: string;
  message: string;
}

export interface RouteDraft {
  description: string;
  priority: string;
  kind: RecipientKind;
  recipient: string;
  withHeader: boolean;
  headerName: string;
  headerPattern: string;
  actions: ActionDraft[];
  stop: boolean;
  enabled: boolean;
}

export const emptyAction = (type: RouteAction['type'] = 'store'): ActionDraft => ({
  type,
  to: '',
  endpointId: '',
  message: '',
});

export const EMPTY_DRAFT: RouteDraft = {
  description: '',
  priority: '0',
  kind: 'exact',
  recipient: '',
  withHeader: false,
  headerName: '',
  headerPattern: '',
  actions: [emptyAction()],
  stop: false,
  enabled: true,
};

export function draftOf(route: InboundRoute): RouteDraft {
  return {
    description: route.description,
    priority: String(route.priority),
    kind: route.match.recipient_kind,
    recipient: route.match.recipient_kind === 'catch_all' ? '' : route.match.recipient,
    withHeader: Boolean(route.match.header),
    headerName: route.match.header?.name ?? '',
    headerPattern: route.match.header?.pattern ?? '',
    actions: route.actions.map((action) => ({
      ...emptyAction(action.type),
      to: action.type === 'forward' ? action.to.join(', ') : '',
      endpointId: action.type === 'webhook' ? action.endpoint_id : '',
      message: action.type === 'reject' ? (action.message ?? '') : '',
    })),
    stop: route.stop,
    enabled: route.enabled,
  };
}

function actionBody(action: ActionDraft): RouteAction {
  switch (action.type) {
    case 'forward':
      return {
        type: 'forward',
        to: action.to
          .split(/[,\s]+/)
          .map((address) => address.trim())
          .filter(Boolean),
      };
    case 'webhook':
      return { type: 'webhook', endpoint_id: action.endpointId };
    case 'reject':
      return action.message.trim() ? { type: 'reject', message: action.message.trim() } : { type: 'reject' };
    default:
      return { type: 'store' };
  }
}

/** The request body of POST /inbound-routes and PATCH /inbound-routes/:id. */
export function bodyOf(draft: RouteDraft, priority: number) {
  return {
    description: draft.description.trim(),
    priority,
    match: {
      recipient: draft.kind === 'catch_all' ? '*' : draft.recipient.trim(),
      recipient_kind: draft.kind,
      ...(draft.withHeader ? { header: { name: draft.headerName.trim(), pattern: draft.headerPattern } } : {}),
    },
    actions: draft.actions.map(actionBody),
    stop: draft.stop,
    enabled: draft.enabled,
  };
}

/**
 * Where the API's error belongs: the name of the field it names, as the form's fields are keyed. An
 * action's error goes to that action's field (actions.1.to → the second action's addresses), and to its
 * type when no field of that type is named.
 */
export function errorPlace(error: unknown, draft: RouteDraft): string | undefined {
  if (!(error instanceof ApiError) || error.field === undefined) return undefined;
  const field = error.field;
  const action = /^actions\.(\d+)(?:\.(.*))?$/.exec(field);
  if (action) {
    const index = Number(action[1]);
    const type = draft.actions[index]?.type;
    const sub = (action[2] ?? '').split('.')[0];
    if (type === 'forward' && sub === 'to') return `actions.${index}.to`;
    if (type === 'webhook' && sub === 'endpoint_id') return `actions.${index}.endpoint_id`;
    if (type === 'reject' && sub === 'message') return `actions.${index}.message`;
    return `actions.${index}.type`;
  }
  if (field === 'actions') return 'actions';
  if (field === 'match.recipient_kind') return 'match.recipient_kind';
  if (field.startsWith('match.header'))
    return field === 'match.header.name' ? 'match.header.name' : 'match.header.pattern';
  if (field === 'match' || field.startsWith('match.')) return 'match.recipient';
  if (['description', 'priority', 'stop', 'enabled'].includes(field.split('.')[0]!)) return field.split('.')[0];
  return undefined;
}
