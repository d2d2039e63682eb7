import { useState, type FormEvent } from 'react';
import { api, ApiError, type ListResponse } from '../api.ts';
import {
  Button,
  CheckboxField,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  SelectField,
  StatusBadge,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import type { Webhook } from './WebhooksPage.tsx';

// Inbound routes: what happens to mail received at the organization's receiving domains. They are tried
// in priority order (lowest first, then oldest); a route matches on its recipient pattern and, when it
// has one, a header; its actions run; "stop" ends the walk. A recipient no route matches is stored. The
// list shows them in that order, so the page reads the way the listener walks them. The form is shared
// with a route's own page (InboundRoutePage), where a route is changed or deleted.

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
interface ActionDraft {
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

const emptyAction = (type: RouteAction['type'] = 'store'): ActionDraft => ({
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
function bodyOf(draft: RouteDraft, priority: number) {
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
function errorPlace(error: unknown, draft: RouteDraft): string | undefined {
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

export function RouteForm({
  initial,
  submitLabel,
  busyLabel,
  onSubmit,
  title,
  titleId,
}: {
  initial: RouteDraft;
  submitLabel: string;
  busyLabel: string;
  /** Sends the body; resolves when saved, rejects with the API's error. */
  onSubmit: (body: ReturnType<typeof bodyOf>) => Promise<unknown>;
  title: string;
  titleId: string;
}) {
  const [draft, setDraft] = useState<RouteDraft>(initial);
  const [localError, setLocalError] = useState<{ place: string; message: string } | undefined>(undefined);
  const save = useAction(onSubmit);
  const [saved, setSaved] = useState('');
  const webhooks = useApiGet<ListResponse<Webhook>>('/webhooks');
  const endpoints = webhooks.data?.data ?? [];

  const place = localError?.place ?? errorPlace(save.error, draft);
  const message = localError?.message ?? (save.error instanceof Error ? save.error.message : undefined);
  const errorAt = (name: string) => (place === name ? message : undefined);

  const change = (changes: Partial<RouteDraft>) => {
    setDraft((previous) => ({ ...previous, ...changes }));
    setLocalError(undefined);
    setSaved('');
    save.clearError();
  };
  const changeAction = (index: number, changes: Partial<ActionDraft>) =>
    change({ actions: draft.actions.map((action, at) => (at === index ? { ...action, ...changes } : action)) });

  async function submit(event: FormEvent) {
    event.preventDefault();
    setSaved('');
    const priority = Number(draft.priority.trim() || '0');
    if (!Number.isInteger(priority)) {
      setLocalError({ place: 'priority', message: 'Enter a whole number: lower numbers are tried first.' });
      return;
    }
    const result = await save.run(bodyOf(draft, priority));
    if (result !== undefined) setSaved('Saved.');
  }

  const kind = RECIPIENT_KINDS.find((entry) => entry.value === draft.kind) ?? RECIPIENT_KINDS[0]!;
  return (
    <form className="card route-form" onSubmit={submit} aria-labelledby={titleId} noValidate>
      <h2 id={titleId}>{title}</h2>
      <Field
        label="Description"
        value={draft.description}
        onChange={(description) => change({ description })}
        error={errorAt('description')}
        placeholder="Support mail to the help desk"
        autoComplete="off"
      />
      <Field
        label="Priority"
        type="number"
        inputMode="numeric"
        step={1}
        value={draft.priority}
        onChange={(priority) => change({ priority })}
        hint="Lower numbers are tried first; equal ones in the order they were added."
        error={errorAt('priority')}
        className="field-short"
      />
      <fieldset className="route-fieldset">
        <legend>Recipient</legend>
        <SelectField
          label="Match"
          value={draft.kind}
          onChange={(value) => change({ kind: value as RecipientKind })}
          options={RECIPIENT_KINDS.map((entry) => ({ value: entry.value, label: entry.label }))}
          error={errorAt('match.recipient_kind')}
        />
        {draft.kind === 'catch_all' ? (
          <>
            <p className="field-hint">{kind.hint}</p>
            {errorAt('match.recipient') ? <p className="field-error">{errorAt('match.recipient')}</p> : null}
          </>
        ) : (
          <Field
            label="Recipient pattern"
            value={draft.recipient}
            onChange={(recipient) => change({ recipient })}
            hint={kind.hint}
            placeholder={kind.placeholder}
            error={errorAt('match.recipient')}
            autoComplete="off"
            spellCheck={false}
          />
        )}
      </fieldset>
      <fieldset className="route-fieldset">
        <legend>Header condition</legend>
        <CheckboxField
          label="Only when a header matches"
          checked={draft.withHeader}
          onChange={(withHeader) => change({ withHeader })}
        />
        {draft.withHeader ? (
          <div className="form-pair">
            <Field
              label="Header name"
              value={draft.headerName}
              onChange={(headerName) => change({ headerName })}
              placeholder="Subject"
              error={errorAt('match.header.name')}
              autoComplete="off"
              spellCheck={false}
            />
            <Field
              label="Header pattern"
              value={draft.headerPattern}
              onChange={(headerPattern) => change({ headerPattern })}
              hint="A regular expression found anywhere in the header's value, without case"
              placeholder="^\[ticket-\d+\]"
              error={errorAt('match.header.pattern')}
              autoComplete="off"
              spellCheck={false}
            />
          </div>
        ) : null}
      </fieldset>
      <fieldset className="route-fieldset">
        <legend>Actions</legend>
        {errorAt('actions') ? <p className="field-error">{errorAt('actions')}</p> : null}
        <ol className="route-actions">
          {draft.actions.map((action, index) => {
            const n = index + 1;
            return (
              <li key={index} className="route-action">
                <SelectField
                  label={`Action ${n}`}
                  value={action.type}
                  onChange={(type) => changeAction(index, { type: type as RouteAction['type'] })}
                  options={[
                    { value: 'store', label: 'Store it (shows under Received)' },
                    { value: 'forward', label: 'Forward it' },
                    { value: 'webhook', label: 'Send it to a webhook endpoint' },
                    { value: 'reject', label: 'Reject it' },
                  ]}
                  error={errorAt(`actions.${index}.type`)}
                />
                {action.type === 'forward' ? (
                  <Field
                    label={`Action ${n}: forward to`}
                    value={action.to}
                    onChange={(to) => changeAction(index, { to })}
                    hint="Addresses, separated by commas"
                    placeholder="desk@acme.example"
                    error={errorAt(`actions.${index}.to`)}
                    autoComplete="off"
                    spellCheck={false}
                  />
                ) : null}
                {action.type === 'webhook' ? (
                  <SelectField
                    label={`Action ${n}: webhook endpoint`}
                    value={action.endpointId}
                    onChange={(endpointId) => changeAction(index, { endpointId })}
                    options={[
                      { value: '', label: endpoints.length ? 'Choose an endpoint' : 'No webhook endpoints yet' },
                      ...endpoints.map((endpoint) => ({ value: endpoint.id, label: endpoint.endpoint })),
                    ]}
                    hint={
                      <>
                        It gets an <code>email.received</code> event. Endpoints are added on the{' '}
                        <Link to="/webhooks">Webhooks</Link> page.
                      </>
                    }
                    error={
                      errorAt(`actions.${index}.endpoint_id`) ??
                      (webhooks.error ? 'The endpoints could not be loaded.' : undefined)
                    }
                  />
                ) : null}
                {action.type === 'reject' ? (
                  <Field
                    label={`Action ${n}: message`}
                    value={action.message}
                    onChange={(text) => changeAction(index, { message: text })}
                    hint="What the sending server is told (optional)"
                    placeholder="This address no longer takes mail"
                    error={errorAt(`actions.${index}.message`)}
                    autoComplete="off"
                  />
                ) : null}
                {draft.actions.length > 1 ? (
                  <Button
                    variant="quiet"
                    onClick={() => change({ actions: draft.actions.filter((_, at) => at !== index) })}
                  >
                    Remove action {n}
                  </Button>
                ) : null}
              </li>
            );
          })}
        </ol>
        <Button onClick={() => change({ actions: [...draft.actions, emptyAction()] })}>Add an action</Button>
      </fieldset>
      <CheckboxField
        label="Stop here: routes after this one are not tried when it matches"
        checked={draft.stop}
        onChange={(stop) => change({ stop })}
        error={errorAt('stop')}
      />
      <CheckboxField
        label="Enabled"
        checked={draft.enabled}
        onChange={(enabled) => change({ enabled })}
        error={errorAt('enabled')}
      />
      {place === undefined ? <ErrorBanner error={save.error} title="The route could not be saved" /> : null}
      <div className="button-row">
        <Button type="submit" variant="primary" busy={save.busy} busyLabel={busyLabel}>
          {submitLabel}
        </Button>
      </div>
      <p role="status" className="form-result">
        {saved}
      </p>
    </form>
  );
}

export function InboundRoutesPage(_props: PageProps) {
  const routes = useApiGet<ListResponse<InboundRoute>>('/inbound-routes');
  const webhooks = useApiGet<ListResponse<Webhook>>('/webhooks');
  const endpoints = webhooks.data?.data ?? [];
  // A new form after each route added, so it starts empty again; the page says what was added.
  const [formKey, setFormKey] = useState(0);
  const [added, setAdded] = useState('');
  // The API lists them in the order they are tried (lowest priority first, then oldest).
  const list = routes.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="Inbound routes"
        description="What happens to mail received at your domains: tried from the lowest priority up; a recipient no route matches is stored."
      />
      <ErrorBanner error={routes.error} title="The routes could not be loaded" onRetry={routes.reload} />
      {routes.loading && !routes.data ? <Loading label="Loading routes…" /> : null}
      {routes.data && list.length === 0 ? (
        <EmptyState title="No inbound routes yet">
          Every message to a domain that receives mail is stored and shows under <Link to="/received">Received</Link>.
          Add a route below to forward it, send it to a webhook endpoint, or reject it.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <div className="stack-narrow">
          <DataTable
            caption="Inbound routes, in the order they are tried"
            captionHidden
            rows={list}
            rowKey={(route) => route.id}
            columns={[
              { header: 'Priority', className: 'numeric nowrap', cell: (route) => route.priority },
              {
                header: 'Route',
                cell: (route) => (
                  <Link to={`/inbound-routes/${encodeURIComponent(route.id)}`} className="break-anywhere">
                    {route.description || matchText(route)}
                  </Link>
                ),
              },
              {
                header: 'Recipient',
                cell: (route) => (
                  <span className="break-anywhere">
                    {matchText(route)}
                    {route.match.header ? (
                      <span className="cell-note">
                        and header {route.match.header.name} matches {route.match.header.pattern}
                      </span>
                    ) : null}
                  </span>
                ),
              },
              {
                header: 'Actions',
                cell: (route) => (
                  <span className="break-anywhere">
                    {route.actions.map((action) => actionText(action, endpoints)).join('; ')}
                    {route.stop ? <span className="cell-note">then stop</span> : null}
                  </span>
                ),
              },
              {
                header: 'State',
                className: 'nowrap',
                cell: (route) => (
                  <StatusBadge tone={route.enabled ? 'enabled' : 'disabled'}>
                    {route.enabled ? 'Enabled' : 'Disabled'}
                  </StatusBadge>
                ),
              },
            ]}
          />
        </div>
      ) : null}
      <p role="status" className="form-result">
        {added}
      </p>
      <RouteForm
        key={formKey}
        initial={EMPTY_DRAFT}
        title="Add a route"
        titleId="add-route-title"
        submitLabel="Add route"
        busyLabel="Adding…"
        onSubmit={async (body) => {
          const created = await api.post<InboundRoute>('/inbound-routes', body);
          setAdded(`Added the route ${created.description || matchText(created)}.`);
          setFormKey((n) => n + 1);
          routes.reload();
          return created;
        }}
      />
      <p className="muted">
        Each route&apos;s page changes or deletes it. To see where a message went, open it under{' '}
        <Link to="/received">Received</Link>: it lists the routes applied.
      </p>
    </>
  );
}
