import { useId, useState, type FormEvent } from 'react';
import { api, fieldError, type ListResponse } from '../api.ts';
import {
  Button,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  JumpToForm,
  LearnMore,
  Loading,
  PageHeader,
  RelativeTime,
  SecretOnce,
  StatusBadge,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';

export interface Webhook {
  id: string;
  endpoint: string;
  /** [] means every event type, including ones added later. */
  events: string[];
  status: 'enabled' | 'disabled';
  created_at: string;
}

/** The event types an endpoint can subscribe to (docs/webhooks.md), grouped as the picker shows them. */
export const EVENT_GROUPS: Array<{ label: string; types: string[] }> = [
  {
    label: 'Emails',
    types: [
      'email.accepted',
      'email.scheduled',
      'email.rescheduled',
      'email.sent',
      'email.canceled',
      'email.delivered',
      'email.delivery_delayed',
      'email.bounced',
      'email.complained',
      'email.opened',
      'email.clicked',
      'email.failed',
      'email.suppressed',
      'email.received',
    ],
  },
  { label: 'Domains', types: ['domain.created', 'domain.updated', 'domain.deleted', 'domain.health_changed'] },
  {
    label: 'Contacts',
    types: ['contact.created', 'contact.updated', 'contact.deleted', 'contact.unsubscribed'],
  },
  { label: 'Topics', types: ['topic.created', 'topic.updated', 'topic.deleted'] },
  { label: 'Templates', types: ['template.created', 'template.updated', 'template.deleted'] },
  { label: 'Broadcasts', types: ['broadcast.paused'] },
];

export const eventsWords = (events: string[]) => (events.length === 0 ? 'All events' : events.join(', '));

interface EventPickerProps {
  /** null: every event type (the API's []), including ones added later. */
  value: string[] | null;
  onChange: (value: string[] | null) => void;
  error?: string | undefined;
}

/** Which events an endpoint receives: "all events", or a checkbox per type grouped by what it is about. */
export function EventPicker({ value, onChange, error }: EventPickerProps) {
  const id = useId();
  const all = value === null;
  const chosen = new Set(value ?? []);
  const toggle = (type: string, on: boolean) => {
    const next = new Set(chosen);
    if (on) next.add(type);
    else next.delete(type);
    onChange([...next]);
  };
  return (
    <fieldset className="event-picker" aria-describedby={error ? `${id}-error` : undefined}>
      <legend>Events to send</legend>
      <div className="field field-checkbox">
        <input
          id={`${id}-all`}
          type="checkbox"
          checked={all}
          onChange={(event) => onChange(event.target.checked ? null : [])}
        />
        <label htmlFor={`${id}-all`}>All events, including types added later</label>
      </div>
      {!all ? (
        <div className="event-groups">
          {EVENT_GROUPS.map((group) => (
            <fieldset key={group.label} className="event-group">
              <legend>{group.label}</legend>
              {group.types.map((type) => (
                <div className="field field-checkbox" key={type}>
                  <input
                    id={`${id}-${type}`}
                    type="checkbox"
                    checked={chosen.has(type)}
                    onChange={(event) => toggle(type, event.target.checked)}
                  />
                  <label htmlFor={`${id}-${type}`}>
                    <code>{type}</code>
                  </label>
                </div>
              ))}
            </fieldset>
          ))}
        </div>
      ) : null}
      {error ? (
        <p className="field-error" id={`${id}-error`}>
          {error}
        </p>
      ) : null}
    </fieldset>
  );
}

export function WebhooksPage(_props: PageProps) {
  const webhooks = useApiGet<ListResponse<Webhook>>('/webhooks');
  const [endpoint, setEndpoint] = useState('');
  const [events, setEvents] = useState<string[] | null>(null);
  const [pickError, setPickError] = useState<string | undefined>(undefined);
  const [created, setCreated] = useState<{ id: string; secret: string } | null>(null);
  const create = useAction((body: { endpoint: string; events: string[] }) =>
    api.post<Webhook & { signing_secret: string }>('/webhooks', body),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (events !== null && events.length === 0) {
      setPickError('Choose at least one event, or All events.');
      return;
    }
    setPickError(undefined);
    const result = await create.run({ endpoint: endpoint.trim(), events: events ?? [] });
    if (result) {
      setCreated({ id: result.id, secret: result.signing_secret });
      setEndpoint('');
      setEvents(null);
      webhooks.reload();
    }
  }

  const list = webhooks.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="Webhooks"
        description={
          <>
            Endpoints that receive signed events (delivered, bounced, opened…) and their recent deliveries.{' '}
            <LearnMore page="webhooks" about="webhooks" />
          </>
        }
        actions={<JumpToForm formId="create-webhook">New endpoint</JumpToForm>}
      />
      {created ? (
        <>
          <SecretOnce label="signing secret" secret={created.secret} onDone={() => setCreated(null)} />
          <p>
            Check each request&apos;s signature with it (
            <LearnMore page="webhooks" section="verifying-the-signature" about="checking webhook signatures" />
            ). <Link to={`/webhooks/${created.id}`}>Open the new endpoint</Link>
          </p>
        </>
      ) : null}
      <form id="create-webhook" className="card" onSubmit={submit} aria-labelledby="create-webhook-title" noValidate>
        <h2 id="create-webhook-title">Add an endpoint</h2>
        <Field
          label="Endpoint URL"
          hint="An http or https address on the internet; Mailroom POSTs each event there."
          type="url"
          value={endpoint}
          onChange={(value) => (setEndpoint(value), create.clearError())}
          error={fieldError(create.error, 'endpoint')}
          placeholder="https://example.com/webhooks/mailroom"
          autoComplete="off"
          spellCheck={false}
        />
        <EventPicker
          value={events}
          onChange={(value) => (setEvents(value), setPickError(undefined))}
          error={pickError ?? fieldError(create.error, 'events')}
        />
        <ErrorBanner error={create.error} exceptFields={['endpoint', 'events']} />
        <Button type="submit" variant="primary" busy={create.busy} busyLabel="Adding…">
          Add endpoint
        </Button>
      </form>

      <ErrorBanner error={webhooks.error} title="The endpoints could not be loaded" onRetry={webhooks.reload} />
      {webhooks.loading && !webhooks.data ? <Loading label="Loading endpoints…" /> : null}
      {webhooks.data && list.length === 0 ? (
        <EmptyState title="No webhook endpoints">
          Add the address of a server of yours above, and Mailroom will POST it an event each time a message is
          delivered, bounces, is opened…
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Endpoints"
          rows={list}
          rowKey={(webhook) => webhook.id}
          columns={[
            {
              header: 'Endpoint',
              cell: (webhook) => (
                <Link to={`/webhooks/${webhook.id}`} className="break-anywhere">
                  {webhook.endpoint}
                </Link>
              ),
            },
            {
              header: 'Status',
              cell: (webhook) => (
                <StatusBadge tone={webhook.status}>{webhook.status === 'enabled' ? 'Enabled' : 'Disabled'}</StatusBadge>
              ),
            },
            { header: 'Events', className: 'hide-narrow', cell: (webhook) => eventsWords(webhook.events) },
            {
              header: 'Added',
              className: 'nowrap hide-narrow',
              cell: (webhook) => <RelativeTime value={webhook.created_at} />,
            },
          ]}
        />
      ) : null}
    </>
  );
}
