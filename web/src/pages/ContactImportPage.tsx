import { useEffect } from 'react';
import { segment, type ListResponse } from '../api.ts';
import {
  DataTable,
  DetailRow,
  EmptyState,
  ErrorBanner,
  Loading,
  PageHeader,
  RelativeTime,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { ImportStatusBadge, type ContactImport } from './ContactImportsPage.tsx';

// One contact import (#/imports/<id>): its status and counts, read again every 2 s until it is finished,
// then the rows it could not import, each with its column and why.

const POLL_MS = 2000;
const numberFormat = new Intl.NumberFormat();

interface ImportError {
  row: number;
  column: string | null;
  message: string;
}

const finished = (item: ContactImport) => item.status === 'completed' || item.status === 'failed';

export function ContactImportPage({ params }: PageProps) {
  const id = params.id ?? '';
  const contactImport = useApiGet<ContactImport>(`/contacts/imports/${segment(id)}`);
  const data = contactImport.data;
  const done = data !== undefined && finished(data);
  const reload = contactImport.reload;
  const errors = useApiGet<ListResponse<ImportError>>(done ? `/contacts/imports/${segment(id)}/errors` : null, {
    limit: 100,
  });

  useEffect(() => {
    if (!data || done || contactImport.loading) return;
    const timer = window.setTimeout(reload, POLL_MS);
    return () => window.clearTimeout(timer);
  }, [data, done, contactImport.loading, reload]);

  const header = <PageHeader title="Contact import" description={<Link to="/imports">All imports</Link>} />;
  if (!data) {
    return (
      <>
        {header}
        <ErrorBanner
          error={contactImport.error}
          title="The import could not be loaded"
          onRetry={contactImport.reload}
        />
        {contactImport.loading ? <Loading label="Loading the import…" /> : null}
      </>
    );
  }

  const counts = data.counts;
  const processed = counts.created + counts.updated + counts.skipped + counts.failed;
  const list = errors.data?.data ?? [];
  return (
    <>
      {header}
      <ErrorBanner error={contactImport.error} title="The import could not be read again" onRetry={reload} />
      <section className="card" aria-labelledby="import-summary-title">
        <h2 id="import-summary-title">Summary</h2>
        <dl className="details">
          <DetailRow label="Status">
            <ImportStatusBadge status={data.status} />
          </DetailRow>
          <DetailRow label="Started">
            <RelativeTime value={data.created_at} />
          </DetailRow>
          <DetailRow label="Finished">
            {data.completed_at ? <RelativeTime value={data.completed_at} /> : <span className="muted">Not yet</span>}
          </DetailRow>
        </dl>
        {data.status === 'failed' ? (
          <div className="error-banner" role="alert">
            <p className="error-banner-title">The import failed</p>
            <p>{data.failure_reason || 'No reason was given.'}</p>
          </div>
        ) : null}
        {!done ? (
          <>
            {/* The file's number of rows is known only at its end: the bar shows work, the text how much. */}
            <progress className="quota-meter" aria-label="Rows imported" />
            <p>
              {data.status === 'queued'
                ? 'Waiting to start…'
                : `${numberFormat.format(data.progress?.rows_processed ?? processed)} rows read so far…`}
            </p>
          </>
        ) : null}
      </section>
      <section className="card" aria-labelledby="import-counts-title">
        <h2 id="import-counts-title">Rows</h2>
        <dl className="details">
          <DetailRow label="Total">{numberFormat.format(counts.total)}</DetailRow>
          <DetailRow label="Created">{numberFormat.format(counts.created)}</DetailRow>
          <DetailRow label="Updated">{numberFormat.format(counts.updated)}</DetailRow>
          <DetailRow label="Skipped">{numberFormat.format(counts.skipped)}</DetailRow>
          <DetailRow label="Failed">{numberFormat.format(counts.failed)}</DetailRow>
        </dl>
      </section>
      {done ? (
        <section className="card" aria-labelledby="import-errors-title">
          <h2 id="import-errors-title">Rows not imported</h2>
          <ErrorBanner error={errors.error} title="The rows' errors could not be loaded" onRetry={errors.reload} />
          {errors.loading && !errors.data ? <Loading label="Loading the errors…" /> : null}
          {errors.data && list.length === 0 ? (
            <EmptyState title="No errors">Every row was imported or skipped as asked.</EmptyState>
          ) : null}
          {list.length > 0 ? (
            <DataTable
              caption="Rows not imported, in file order"
              captionHidden
              rows={list}
              rowKey={(item) => `${item.row}:${item.column ?? ''}:${item.message}`}
              columns={[
                { header: 'Row', className: 'numeric', cell: (item) => numberFormat.format(item.row) },
                { header: 'Column', cell: (item) => item.column ?? <span className="muted">—</span> },
                { header: 'Error', cell: (item) => <span className="break-anywhere">{item.message}</span> },
              ]}
            />
          ) : null}
          {errors.data?.has_more ? <p className="muted">Only the first 100 errors are shown.</p> : null}
        </section>
      ) : null}
    </>
  );
}
