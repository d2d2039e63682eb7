// Inbound routes of an organization: which received mail is stored, forwarded, posted or refused.
import {
  createRoute,
  deleteRoute,
  listRoutes,
  type InboundRouteView,
  type RouteInput,
} from '../../receiving/inbound-routes.ts';
import { listing, requireOrganization, text, UsageError, wholeNumber, type Command } from '../command.ts';

const org = { type: 'string', required: true, help: "the organization's id" } as const;

/** One route in a line: priority, what it matches, what it does. */
function routeLine(route: InboundRouteView): string {
  const { match } = route;
  const header = match.header ? ` and ${match.header.name} ~ /${match.header.pattern}/` : '';
  const actions = route.actions
    .map((action) =>
      action.type === 'forward'
        ? `forward to ${action.to.join(', ')}`
        : action.type === 'webhook'
          ? `webhook ${action.endpoint_id}`
          : action.type === 'reject'
            ? `reject "${action.message ?? ''}"`
            : 'store',
    )
    .join(', ');
  const flags = `${route.stop ? ', stop' : ''}${route.enabled ? '' : ' (disabled)'}`;
  return `#${route.priority} ${match.recipient_kind} ${match.recipient}${header} -> ${actions}${flags}`;
}

export const routeCommands: Record<string, Command> = {
  'route add': {
    usage:
      'route add --org ID --kind exact|domain|plus_tag|regex|catch_all [--recipient R] [--priority N] [--header NAME --header-pattern P] [--forward ADDRESS]... [--webhook ENDPOINT_ID] [--reject MESSAGE] [--stop] [--description D]',
    description: 'add an inbound route (received mail is stored, and forwarded, posted or refused as asked)',
    options: {
      org,
      kind: {
        type: 'string',
        required: true,
        help: 'how the recipient is matched: exact, domain, plus_tag, regex or catch_all',
      },
      recipient: { type: 'string', help: 'the address, domain, tag or pattern the kind matches' },
      priority: { type: 'string', help: 'order among the routes, lowest first, then oldest (default 0)' },
      header: { type: 'string', help: 'also match a header of this name (with --header-pattern)' },
      'header-pattern': { type: 'string', help: "the regular expression the header's value must match" },
      forward: { type: 'string', multiple: true, help: 'forward to this address (repeatable)' },
      webhook: { type: 'string', help: 'post the message to this webhook endpoint (its id)' },
      reject: { type: 'string', help: 'refuse the message with this reply instead of storing it' },
      stop: { type: 'boolean', default: false, help: 'no later route is tried after this one matches' },
      description: { type: 'string', help: 'a note shown with the route' },
    },
    async run({ values, withDatabase }) {
      const header = values.header as string | undefined;
      const headerPattern = values['header-pattern'] as string | undefined;
      if ((header === undefined) !== (headerPattern === undefined)) {
        throw new UsageError('--header and --header-pattern go together');
      }
      // The same route the API makes: store, plus what the options ask for (reject alone).
      const actions: NonNullable<RouteInput['actions']> = [];
      const forward = values.forward as string[] | undefined;
      if (values.reject !== undefined) actions.push({ type: 'reject', message: text(values, 'reject') });
      else actions.push({ type: 'store' });
      if (forward !== undefined) actions.push({ type: 'forward', to: forward });
      if (values.webhook !== undefined) actions.push({ type: 'webhook', endpoint_id: text(values, 'webhook') });
      const input: RouteInput = {
        description: values.description as string | undefined,
        priority: wholeNumber(values, 'priority'),
        match: {
          recipient_kind: text(values, 'kind') as NonNullable<RouteInput['match']>['recipient_kind'],
          recipient: values.recipient as string | undefined,
          ...(header !== undefined ? { header: { name: header, pattern: headerPattern! } } : {}),
        },
        actions,
        stop: values.stop === true,
      };
      const route = await withDatabase(async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return createRoute(db, text(values, 'org'), input);
      });
      return { json: route, text: `route ${route.id}: ${routeLine(route)}` };
    },
  },

  'route list': {
    usage: 'route list --org ID',
    description: "list an organization's inbound routes in the order they are tried",
    options: { org },
    async run({ values, withDatabase }) {
      const routes = await withDatabase(async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return (await listRoutes(db, text(values, 'org'), {})).data;
      });
      return { json: { data: routes }, text: listing(routes, (route) => `route ${route.id}: ${routeLine(route)}`) };
    },
  },

  'route remove': {
    usage: 'route remove --org ID ROUTE_ID',
    description: 'remove an inbound route',
    options: { org },
    positionals: [{ name: 'ROUTE_ID', help: 'the route (its id)' }],
    async run({ values, positionals, withDatabase }) {
      const { id } = await withDatabase(async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return deleteRoute(db, text(values, 'org'), positionals[0]!);
      });
      return { json: { id, deleted: true }, text: `route ${id} removed` };
    },
  },
};
