import { useEffect, useState, type FormEvent } from 'react';
import { fieldError, type Query } from '../api.ts';
import {
  Button,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  FilterActions,
  formatNumber,
  Loading,
  PageHeader,
  Pager,
  RelativeTime,
  SelectField,
  StatusBadge,
  type Column,
} from '../components/index.ts';
import { useKeysetList } from '../hooks.ts';
import { Link, navigate, type PageProps } from '../router.tsx';

// The API request log (GET /logs): every request made with an API key, newest first, paged by keys. The
// filters live in the address (`#/logs?status=4xx&endpoint=/emails`), so a filtered list can be shared.
// The dashboard's own requests (a session's) are not in it.

export interface LogListItem {
  id: string;
  created_at: string;
  endpoint: string;
  method: string;
  response_status: number;
  user_agent: string | null;
  duration_ms: number;
  api_key: { id: string; name: string | null } | null;
}

/** A status as a badge: 2xx green, 4xx amber, 5xx red. */
export function ResponseStatus({ status }: { status: number }) {
  const tone = status >= 500 ? 'failed' : status >= 400 ? 'pending' : 'succeeded';
  return <StatusBadge tone={tone}>{status}</StatusBadge>;
}

/** The key a request was made with, by name. */
export const keyName = (key: LogListItem['api_key']) => (key ? (key.name ?? key.id) : 'deleted key');

const FILTERS = ['status', 'endpoint'] as const;
type Filters = Record<(typeof FILTERS)[number], string>;

const STATUS_CLASSES = [
  { value: '', label: 'Any' },
  { value: '2xx', label: '2xx success' },
  { value: '4xx', label: '4xx refused' },
  { value: '5xx', label: '5xx error' },
];

const filtersOf = (query: URLSearchParams): Filters =>
  Object.fromEntries(FILTERS.map((name) => [name, query.get(name) ?? ''])) as Filters;

const apiQuery = (filters: Filters): Query => ({ status: filters.status, endpoint: filters.endpoint.trim() });

export function LogsPage({ query }: PageProps) {
  const applied = filtersOf(query);
  const [draft, setDraft] = useState<Filters>(applied);
  const appliedKey = query.toString();
  useEffect(() => setDraft(filtersOf(new URLSearchParams(appliedKey))), [appliedKey]);

  const list = useKeysetList<LogListItem>('/logs', apiQuery(applied), 50);
  const filtered = FILTERS.some((name) => applied[name] !== '');

  const apply = (event: FormEvent) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const name of FILTERS) {
      const value = draft[name].trim();
      if (value) params.set(name, value);
    }
    const text = params.toString();
    navigate(text ? `/logs?${text}` : '/logs', { replace: true });
  };
  const clear = () => navigate('/logs', { replace: true });
  const set = (name: keyof Filters) => (value: string) => setDraft((previous) => ({ ...previous, [name]: value }));

  const columns: Array<Column<LogListItem>> = [
    { header: 'Method', cell: (log) => <code>{log.method}</code>, className: 'nowrap' },
    {
      header: 'Path',
      cell: (log) => (
        <Link to={`/logs/${encodeURIComponent(log.id)}`} className="break-anywhere">
          {log.endpoint}
        </Link>
      ),
    },
    { header: 'Status', cell: (log) => <ResponseStatus status={log.response_status} />, className: 'nowrap' },
    { header: 'API key', cell: (log) => keyName(log.api_key), className: 'hide-narrow' },
    { header: 'Duration', cell: (log) => `${formatNumber(log.duration_ms)} ms`, className: 'nowrap hide-narrow' },
    { header: 'Time', cell: (log) => <RelativeTime value={log.created_at} />, className: 'nowrap' },
  ];

  const error = list.error;
  return (
    <>
      <PageHeader
        title="Logs"
        description="Every request your API keys made, newest first, with its answer. Message content and secrets are redacted."
      />
      <form className="card filters" onSubmit={apply} aria-label="Filter logs">
        <SelectField
          label="Status"
          value={draft.status}
          onChange={set('status')}
          options={STATUS_CLASSES}
          error={fieldError(error, 'status')}
        />
        <Field
          label="Path"
          value={draft.endpoint}
          onChange={set('endpoint')}
          placeholder="/emails"
          hint="The start of the path"
          error={fieldError(error, 'endpoint')}
        />
        <FilterActions filtered={filtered} onClear={clear} />
      </form>

      <ErrorBanner
        error={error}
        title="The logs could not be loaded"
        exceptFields={['status', 'endpoint']}
        onRetry={list.reload}
      />
      {list.loading && list.items.length === 0 ? <Loading label="Loading logs…" /> : null}
      {!list.loading && !error && list.items.length === 0 ? (
        filtered ? (
          <EmptyState
            title="No requests match these filters"
            action={
              <Button variant="secondary" onClick={clear}>
                Clear filters
              </Button>
            }
          >
            Try another status or path.
          </EmptyState>
        ) : (
          <EmptyState title="No API requests yet">
            Requests made with an <Link to="/api-keys">API key</Link> show here a moment after they are answered. Make
            one:{' '}
            <code className="break-anywhere">{`curl -H "Authorization: Bearer $MAILROOM_KEY" ${window.location.origin}/domains`}</code>
          </EmptyState>
        )
      ) : null}
      {list.items.length > 0 ? (
        <div aria-busy={list.loading || undefined} className="stack-narrow">
          <DataTable
            caption={filtered ? 'API requests matching the filters, newest first' : 'API requests, newest first'}
            captionHidden
            columns={columns}
            rows={list.items}
            rowKey={(log) => log.id}
          />
          <Pager
            label="Logs"
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
