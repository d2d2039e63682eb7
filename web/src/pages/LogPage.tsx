import { ApiError, segment } from '../api.ts';
import {
  EmptyState,
  ErrorBanner,
  Loading,
  PageHeader,
  RelativeTime,
  Timestamp,
  DetailRow,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link, type PageProps } from '../router.tsx';
import { keyName, ResponseStatus, type LogListItem } from './LogsPage.tsx';

// One API request (GET /logs/:id): what was asked and what was answered, with message content and
// secrets shown as "[redacted]" (the log never stored them).

interface Log extends LogListItem {
  request_body: unknown;
  response_body: unknown;
}

function Body({ title, value }: { title: string; value: unknown }) {
  return (
    <section className="card" aria-label={title}>
      <h2>{title}</h2>
      {value === null || value === undefined ? (
        <p className="muted">No body.</p>
      ) : (
        <pre className="code-block" tabIndex={0} aria-label={`${title} (JSON)`}>
          {JSON.stringify(value, null, 2)}
        </pre>
      )}
    </section>
  );
}

export function LogPage({ params }: PageProps) {
  const id = params.id ?? '';
  const log = useApiGet<Log>(`/logs/${segment(id)}`);
  const notFound = log.error instanceof ApiError && log.error.status === 404;
  const data = log.data;
  return (
    <>
      <PageHeader
        title={data ? `${data.method} ${data.endpoint}` : 'Request'}
        description={<Link to="/logs">← All requests</Link>}
      />
      {notFound ? (
        <EmptyState title="No such request" action={<Link to="/logs">Back to the logs</Link>}>
          It is not one of your organization's requests, or retention deleted it.
        </EmptyState>
      ) : (
        <ErrorBanner error={log.error} title="The request could not be loaded" onRetry={log.reload} />
      )}
      {!data && log.loading ? <Loading label="Loading the request…" /> : null}
      {data ? (
        <>
          <section className="card" aria-labelledby="log-details">
            <h2 id="log-details">Details</h2>
            <dl className="details">
              <DetailRow label="Status">
                <ResponseStatus status={data.response_status} />
              </DetailRow>
              <DetailRow label="Method">
                <code>{data.method}</code>
              </DetailRow>
              <DetailRow label="Path">
                <code className="break-anywhere">{data.endpoint}</code>
              </DetailRow>
              <DetailRow label="API key">{keyName(data.api_key)}</DetailRow>
              <DetailRow label="Duration">{data.duration_ms} ms</DetailRow>
              <DetailRow label="User agent">
                <span className="break-anywhere">{data.user_agent ?? '—'}</span>
              </DetailRow>
              <DetailRow label="Time">
                <Timestamp value={data.created_at} /> (<RelativeTime value={data.created_at} />)
              </DetailRow>
              <DetailRow label="Id">
                <code className="break-anywhere">{data.id}</code>
              </DetailRow>
            </dl>
          </section>
          <Body title="Request body" value={data.request_body} />
          <Body title="Response body" value={data.response_body} />
        </>
      ) : null}
    </>
  );
}
