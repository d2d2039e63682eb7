import { useState } from 'react';
import { api, segment } from '../api.ts';
import {
  Button,
  DataTable,
  EmptyState,
  ErrorBanner,
  LearnMore,
  Loading,
  PageHeader,
  Pager,
  RelativeTime,
  SelectField,
  type Column,
} from '../components/index.ts';
import { useAction } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import type { AutomationListItem, AutomationStatus } from './automation/types.ts';
import { useForwardPages } from './automation/useForwardPages.ts';
import { AutomationStatusBadge, AutomationSwitch } from './automation/words.tsx';

// The organization's automations (GET /automations), newest first: each with its status and a switch
// that enables or disables it (PATCH /automations/:id). A refusal (e.g. a graph that cannot run) is shown
// above the list with the automation's name. The status filter is kept in the address (?status=).

const STATUS_OPTIONS = [
  { value: '', label: 'All' },
  { value: 'enabled', label: 'Enabled' },
  { value: 'disabled', label: 'Disabled' },
];

export function AutomationsPage({ query }: PageProps) {
  const status = query.get('status') ?? '';
  const list = useForwardPages<AutomationListItem>('/automations', { status });
  const [changing, setChanging] = useState<{ id: string; name: string; status: AutomationStatus } | null>(null);
  const [announcement, setAnnouncement] = useState('');
  const [failed, setFailed] = useState<string | undefined>(undefined);
  const change = useAction((id: string, to: AutomationStatus) =>
    api.patch<AutomationListItem>(`/automations/${segment(id)}`, { status: to }),
  );

  async function toggle(item: AutomationListItem, to: AutomationStatus) {
    setChanging({ id: item.id, name: item.name, status: to });
    setAnnouncement('');
    const changed = await change.run(item.id, to);
    setChanging(null);
    setFailed(changed ? undefined : item.name);
    if (changed) {
      setAnnouncement(`“${item.name}” is ${to === 'enabled' ? 'enabled' : 'disabled'}.`);
      list.reload();
    }
  }

  const columns: Array<Column<AutomationListItem>> = [
    {
      header: 'Automation',
      cell: (item) => (
        <Link to={`/automations/${encodeURIComponent(item.id)}`} className="break-anywhere">
          {item.name || '(no name)'}
        </Link>
      ),
    },
    { header: 'Status', className: 'nowrap', cell: (item) => <AutomationStatusBadge status={item.status} /> },
    {
      header: 'Enabled',
      className: 'nowrap',
      cell: (item) => (
        <AutomationSwitch
          name={item.name}
          status={changing?.id === item.id ? changing.status : item.status}
          busy={changing !== null}
          onChange={(to) => toggle(item, to)}
        />
      ),
    },
    { header: 'Updated', className: 'nowrap', cell: (item) => <RelativeTime value={item.updated_at} /> },
    { header: 'Created', className: 'nowrap hide-narrow', cell: (item) => <RelativeTime value={item.created_at} /> },
  ];

  return (
    <>
      <PageHeader
        title="Automations"
        description={
          <>
            Emails and contact changes that run on their own when your application sends an event for a contact.{' '}
            <LearnMore page="automations" about="automations" />
          </>
        }
      />
      <form
        className="filters automation-filters"
        aria-label="Filter automations"
        onSubmit={(event) => event.preventDefault()}
      >
        <SelectField
          label="Status"
          value={status}
          options={STATUS_OPTIONS}
          onChange={(value) => navigate(value ? `/automations?status=${value}` : '/automations', { replace: true })}
        />
      </form>
      <ErrorBanner error={change.error} title={failed ? `“${failed}” could not be changed` : undefined} />
      <p role="status" className="muted">
        {announcement}
      </p>
      <ErrorBanner error={list.error} title="The automations could not be loaded" onRetry={list.reload} />
      {list.loading && list.items.length === 0 ? <Loading label="Loading automations…" /> : null}
      {!list.loading && !list.error && list.items.length === 0 ? (
        status ? (
          <EmptyState
            title={`No ${status} automations`}
            action={
              <Button variant="secondary" onClick={() => navigate('/automations', { replace: true })}>
                Show every automation
              </Button>
            }
          >
            Try another status.
          </EmptyState>
        ) : (
          <EmptyState title="No automations yet">
            Create one with <code>POST /automations</code>: a trigger on an event your application sends (
            <code>POST /events/send</code>), then the emails, delays, waits and conditions that follow it.{' '}
            <LearnMore page="automations" about="automations" />
          </EmptyState>
        )
      ) : null}
      {list.items.length > 0 ? (
        <div aria-busy={list.loading || undefined} className="stack-narrow">
          <DataTable
            caption="Automations, newest first"
            captionHidden
            columns={columns}
            rows={list.items}
            rowKey={(item) => item.id}
          />
          <Pager
            label="Automations"
            hasPrevious={list.hasPrevious}
            hasNext={list.hasNext}
            onPrevious={list.previous}
            onNext={list.next}
            busy={list.loading}
          />
        </div>
      ) : null}
    </>
  );
}
