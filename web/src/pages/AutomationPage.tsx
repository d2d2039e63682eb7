import { useState } from 'react';
import { api, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  DataTable,
  DetailRow,
  EmptyState,
  ErrorBanner,
  Loading,
  PageHeader,
  Pager,
  RelativeTime,
  SelectField,
  Timestamp,
  type Column,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { AutomationGraph } from './automation/AutomationGraph.tsx';
import { useKnownNames } from './automation/names.ts';
import type { Automation, AutomationRunListItem, AutomationStatus, StepCount } from './automation/types.ts';
import { useForwardPages } from './automation/useForwardPages.ts';
import { AutomationStatusBadge, AutomationSwitch, RunStatusBadge } from './automation/words.tsx';

// One automation (#/automations/<id>): its status and switch, Stop (disable it and cancel its running
// runs), its graph drawn with each step's counts (GET /automations/:id/step-counts), and its recent runs,
// newest first, each linking to its run page.

const RUN_STATUS_OPTIONS = [
  { value: '', label: 'All' },
  { value: 'running', label: 'Running' },
  { value: 'completed', label: 'Completed' },
  { value: 'failed', label: 'Failed' },
  { value: 'cancelled', label: 'Cancelled' },
];

export function AutomationPage({ params }: PageProps) {
  const id = params.id ?? '';
  const path = `/automations/${segment(id)}`;
  const automation = useApiGet<Automation>(path);
  const counts = useApiGet<ListResponse<StepCount>>(`${path}/step-counts`);
  const [runStatus, setRunStatus] = useState('');
  const runs = useForwardPages<AutomationRunListItem>(`${path}/runs`, { status: runStatus });
  const names = useKnownNames();
  const [announcement, setAnnouncement] = useState('');
  const update = useAction((status: AutomationStatus) => api.patch<Automation>(path, { status }));

  const reloadAll = () => {
    automation.reload();
    counts.reload();
    runs.reload();
  };

  async function switchTo(status: AutomationStatus) {
    setAnnouncement('');
    if (await update.run(status)) {
      setAnnouncement(status === 'enabled' ? 'Enabled: new events start runs.' : 'Disabled: new events start nothing.');
      automation.reload();
    }
  }

  const data = automation.data;
  const trigger = data?.steps.find((step) => step.type === 'trigger');
  const triggerEvent = typeof trigger?.config?.event_name === 'string' ? trigger.config.event_name : undefined;

  const runColumns: Array<Column<AutomationRunListItem>> = [
    {
      header: 'Run',
      cell: (run) => (
        <Link to={`/automations/${encodeURIComponent(id)}/runs/${encodeURIComponent(run.id)}`}>
          <code className="break-anywhere">{run.id}</code>
        </Link>
      ),
    },
    { header: 'Status', className: 'nowrap', cell: (run) => <RunStatusBadge status={run.status} /> },
    {
      header: 'Started',
      className: 'nowrap',
      cell: (run) => <RelativeTime value={run.started_at ?? run.created_at} />,
    },
    { header: 'Ended', className: 'nowrap', cell: (run) => <RelativeTime value={run.completed_at} /> },
  ];

  return (
    <>
      <PageHeader
        title={data?.name || 'Automation'}
        description={<Link to="/automations">All automations</Link>}
        actions={
          data ? (
            <Button onClick={reloadAll} busy={automation.loading || counts.loading} busyLabel="Refreshing…">
              Refresh
            </Button>
          ) : null
        }
      />
      <ErrorBanner error={automation.error} title="The automation could not be loaded" onRetry={automation.reload} />
      {automation.loading && !data ? <Loading label="Loading the automation…" /> : null}
      {data ? (
        <>
          <section className="card" aria-labelledby="summary-title">
            <h2 id="summary-title">Summary</h2>
            <dl className="details">
              <DetailRow label="Status">
                <AutomationStatusBadge status={data.status} />
              </DetailRow>
              <DetailRow label="Trigger">
                {triggerEvent ? (
                  <code className="break-anywhere">{triggerEvent}</code>
                ) : (
                  <span className="muted">None</span>
                )}
              </DetailRow>
              <DetailRow label="Created">
                <Timestamp value={data.created_at} />
              </DetailRow>
              <DetailRow label="Updated">
                <RelativeTime value={data.updated_at} />
              </DetailRow>
              <DetailRow label="ID">
                <code className="break-anywhere">{data.id}</code>
              </DetailRow>
            </dl>
            <div className="switch-field">
              <AutomationSwitch
                name={data.name}
                status={data.status}
                busy={update.busy}
                onChange={switchTo}
                showLabel
              />
              <p className="field-hint">
                Disabled, events for its trigger start nothing; runs already under way go on (Stop cancels them).
              </p>
            </div>
            <p role="status" className="muted">
              {announcement}
            </p>
            <ErrorBanner error={update.error} title="The automation could not be changed" />
            <ConfirmButton
              question="Stop this automation? It is disabled and every run still under way is cancelled."
              busyLabel="Stopping…"
              onConfirm={async () => {
                await api.post(`${path}/stop`, {});
                setAnnouncement('Stopped: disabled, and its running runs cancelled.');
                reloadAll();
              }}
            >
              Stop automation
            </ConfirmButton>
          </section>

          <section aria-labelledby="graph-title">
            <div className="section-head">
              <h2 id="graph-title">Steps</h2>
            </div>
            <p className="muted">
              Each box counts the runs that entered the step, wait in it now, completed it and failed in it.
            </p>
            <ErrorBanner error={counts.error} title="The step counts could not be loaded" onRetry={counts.reload} />
            <AutomationGraph automation={data} counts={counts.data?.data ?? []} names={names} />
          </section>

          <section aria-labelledby="runs-title">
            <div className="section-head">
              <h2 id="runs-title">Recent runs</h2>
            </div>
            <form
              className="filters automation-filters"
              aria-label="Filter runs"
              onSubmit={(event) => event.preventDefault()}
            >
              <SelectField label="Run status" value={runStatus} options={RUN_STATUS_OPTIONS} onChange={setRunStatus} />
            </form>
            <ErrorBanner error={runs.error} title="The runs could not be loaded" onRetry={runs.reload} />
            {runs.loading && runs.items.length === 0 ? <Loading label="Loading runs…" /> : null}
            {!runs.loading && !runs.error && runs.items.length === 0 ? (
              <EmptyState title={runStatus ? `No ${runStatus} runs` : 'No runs yet'}>
                {triggerEvent ? (
                  <>
                    A run starts for a contact each time your application sends <code>{triggerEvent}</code> for them (
                    <code>POST /events/send</code>) while the automation is enabled.
                  </>
                ) : (
                  'A run starts each time the trigger’s event is sent for a contact while the automation is enabled.'
                )}
              </EmptyState>
            ) : null}
            {runs.items.length > 0 ? (
              <div aria-busy={runs.loading || undefined} className="stack-narrow">
                <DataTable
                  caption="Runs, newest first"
                  captionHidden
                  columns={runColumns}
                  rows={runs.items}
                  rowKey={(run) => run.id}
                />
                <Pager
                  label="Runs"
                  hasPrevious={runs.hasPrevious}
                  hasNext={runs.hasNext}
                  onPrevious={runs.previous}
                  onNext={runs.next}
                  busy={runs.loading}
                />
              </div>
            ) : null}
          </section>
        </>
      ) : null}
    </>
  );
}
