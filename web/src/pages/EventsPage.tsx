import { useEffect, useState, type FormEvent } from 'react';
import type { ListResponse } from '../api.ts';
import {
  Button,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  FilterActions,
  Loading,
  PageHeader,
  Pager,
  RelativeTime,
  type Column,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import type { EventDefinition, ReceivedEvent } from './automation/types.ts';
import { useForwardPages } from './automation/useForwardPages.ts';
import './automation/automation.css';

// Events (#/events): the event names the organization declared (GET /events), each with its payload
// schema, and the events its application sent most recently (GET /received-events, newest first) with
// their payloads, narrowed to one name by ?event= in the address (a name's link sets it).

/** How many received events the page shows. */
const RECEIVED_LIMIT = 50;

function SchemaCell({ schema }: { schema: EventDefinition['schema'] }) {
  const entries = Object.entries(schema ?? {});
  if (entries.length === 0) return <span className="muted">No schema: any payload</span>;
  return (
    <ul className="schema-list">
      {entries.map(([key, type]) => (
        <li key={key}>
          <code>{key}</code>: {type}
        </li>
      ))}
    </ul>
  );
}

function ReceivedEvents({ name }: { name: string }) {
  const [typed, setTyped] = useState(name);
  useEffect(() => setTyped(name), [name]);
  const received = useApiGet<ListResponse<ReceivedEvent>>('/received-events', {
    event: name,
    limit: RECEIVED_LIMIT,
  });
  const items = received.data?.data ?? [];

  function apply(event: FormEvent) {
    event.preventDefault();
    const value = typed.trim();
    navigate(value ? `/events?event=${encodeURIComponent(value)}` : '/events', { replace: true });
  }

  const columns: Array<Column<ReceivedEvent>> = [
    { header: 'Event', cell: (item) => <code className="break-anywhere">{item.event}</code> },
    {
      header: 'Contact',
      cell: (item) =>
        item.contact_id ? (
          <Link to={`/contacts/${encodeURIComponent(item.contact_id)}`} className="break-anywhere">
            {item.email ?? item.contact_id}
          </Link>
        ) : (
          <span className="break-anywhere">{item.email ?? '—'}</span>
        ),
    },
    {
      header: 'Payload',
      cell: (item) => (
        <pre className="code-block event-payload" aria-label={`The payload of ${item.event}`}>
          {JSON.stringify(item.payload, null, 2)}
        </pre>
      ),
    },
    { header: 'Received', className: 'nowrap', cell: (item) => <RelativeTime value={item.received_at} /> },
    {
      header: 'Processed',
      className: 'nowrap',
      cell: (item) =>
        item.processed_at ? <RelativeTime value={item.processed_at} /> : <span className="muted">Not yet</span>,
    },
  ];

  return (
    <section aria-labelledby="received-title">
      <div className="section-head">
        <h2 id="received-title">Received events</h2>
        <Button onClick={received.reload} busy={received.loading} busyLabel="Refreshing…">
          Refresh
        </Button>
      </div>
      <form className="inline-form automation-filters" aria-label="Filter received events" onSubmit={apply} noValidate>
        <Field label="Event name" value={typed} onChange={setTyped} autoComplete="off" />
        <FilterActions filtered={name !== ''} onClear={() => navigate('/events', { replace: true })} />
      </form>
      <ErrorBanner error={received.error} title="The received events could not be loaded" onRetry={received.reload} />
      {received.loading && items.length === 0 ? <Loading label="Loading received events…" /> : null}
      {!received.loading && !received.error && items.length === 0 ? (
        <EmptyState title={name ? `No “${name}” events received` : 'No events received yet'}>
          Your application sends them with <code>POST /events/send</code>, naming a contact by id or email, with an
          optional payload.
        </EmptyState>
      ) : null}
      {items.length > 0 ? (
        <div aria-busy={received.loading || undefined}>
          <DataTable
            caption={name ? `Received “${name}” events, newest first` : 'Received events, newest first'}
            captionHidden
            columns={columns}
            rows={items}
            rowKey={(item) => item.id}
          />
          {received.data?.has_more ? (
            <p className="muted">The newest {RECEIVED_LIMIT} are shown; narrow them by event name to see others.</p>
          ) : null}
        </div>
      ) : null}
    </section>
  );
}

export function EventsPage({ query }: PageProps) {
  const name = query.get('event') ?? '';
  const definitions = useForwardPages<EventDefinition>('/events');

  const columns: Array<Column<EventDefinition>> = [
    {
      header: 'Name',
      cell: (item) => (
        <Link
          to={`/events?event=${encodeURIComponent(item.name)}`}
          className="break-anywhere"
          aria-label={`${item.name}: show the events received`}
        >
          <code>{item.name}</code>
        </Link>
      ),
    },
    { header: 'Schema', cell: (item) => <SchemaCell schema={item.schema} /> },
    { header: 'Created', className: 'nowrap hide-narrow', cell: (item) => <RelativeTime value={item.created_at} /> },
  ];

  return (
    <>
      <PageHeader
        title="Events"
        description="What your application tells Mailroom about its contacts (POST /events/send): the trigger of automations, and what their waits wait for."
      />
      <section aria-labelledby="definitions-title">
        <h2 id="definitions-title">Event names</h2>
        <ErrorBanner error={definitions.error} title="The events could not be loaded" onRetry={definitions.reload} />
        {definitions.loading && definitions.items.length === 0 ? <Loading label="Loading events…" /> : null}
        {!definitions.loading && !definitions.error && definitions.items.length === 0 ? (
          <EmptyState title="No event names declared">
            Declare one with <code>POST /events</code> and an optional schema (each payload key&rsquo;s type: string,
            number, boolean or date). Events can also be sent under names never declared.
          </EmptyState>
        ) : null}
        {definitions.items.length > 0 ? (
          <div aria-busy={definitions.loading || undefined} className="stack-narrow">
            <DataTable
              caption="Event names, with their schemas"
              captionHidden
              columns={columns}
              rows={definitions.items}
              rowKey={(item) => item.id}
            />
            <Pager
              label="Event names"
              hasPrevious={definitions.hasPrevious}
              hasNext={definitions.hasNext}
              onPrevious={definitions.previous}
              onNext={definitions.next}
              busy={definitions.loading}
            />
          </div>
        ) : null}
      </section>
      <ReceivedEvents name={name} />
    </>
  );
}
