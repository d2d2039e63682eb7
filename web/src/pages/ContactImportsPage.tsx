import type { ListResponse } from '../api.ts';
import {
  DataTable,
  EmptyState,
  ErrorBanner,
  formatNumber,
  JumpToForm,
  LearnMore,
  Loading,
  PageHeader,
  RelativeTime,
  StatusBadge,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { ImportForm } from './ImportForm.tsx';

// Contacts imported from a CSV file (POST /contacts/imports): the list of imports, with the form that
// starts one (ImportForm.tsx).

export type ImportStatus = 'queued' | 'in_progress' | 'completed' | 'failed';

export interface ImportCounts {
  total: number;
  created: number;
  updated: number;
  skipped: number;
  failed: number;
}

export interface ContactImport {
  object?: 'contact_import';
  id: string;
  status: ImportStatus;
  created_at: string;
  completed_at: string | null;
  /** The rows counted so far: `total` is every row read yet (the file's own count is known at the end). */
  counts: ImportCounts;
  progress?: { rows_processed: number; file_bytes: number } | null;
  /** Why a failed import failed. */
  failure_reason?: string | null;
  on_conflict?: 'upsert' | 'skip';
}

const STATUS_WORDS: Record<ImportStatus, string> = {
  queued: 'Queued',
  in_progress: 'Importing',
  completed: 'Completed',
  failed: 'Failed',
};
const STATUS_TONES: Record<ImportStatus, string> = {
  queued: 'scheduled',
  in_progress: 'pending',
  completed: 'succeeded',
  failed: 'failed',
};

export function ImportStatusBadge({ status }: { status: string }) {
  const known = status in STATUS_WORDS ? (status as ImportStatus) : undefined;
  return <StatusBadge tone={known ? STATUS_TONES[known] : 'other'}>{known ? STATUS_WORDS[known] : status}</StatusBadge>;
}

const counted = (counts: ImportCounts | undefined) =>
  counts
    ? `${formatNumber(counts.created)} created, ${formatNumber(counts.updated)} updated, ${formatNumber(counts.skipped)} skipped, ${formatNumber(counts.failed)} failed of ${formatNumber(counts.total)} rows`
    : '—';

export function ContactImportsPage(_props: PageProps) {
  const imports = useApiGet<ListResponse<ContactImport>>('/contacts/imports');
  const list = imports.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="Contact imports"
        description={
          <>
            Contacts added or updated from a CSV file, with what became of each row.{' '}
            <LearnMore page="imports" about="contact imports" />
          </>
        }
        actions={<JumpToForm formId="import-form">New import</JumpToForm>}
      />
      <ImportForm />
      <section aria-labelledby="imports-title">
        <h2 id="imports-title">Imports</h2>
        <ErrorBanner error={imports.error} title="The imports could not be loaded" onRetry={imports.reload} />
        {imports.loading && !imports.data ? <Loading label="Loading imports…" /> : null}
        {imports.data && list.length === 0 ? (
          <EmptyState title="No imports yet">Choose a CSV file above to import its contacts.</EmptyState>
        ) : null}
        {list.length > 0 ? (
          <DataTable
            caption="Imports, newest first"
            captionHidden
            rows={list}
            rowKey={(item) => item.id}
            columns={[
              {
                header: 'Started',
                className: 'nowrap',
                cell: (item) => (
                  <Link to={`/imports/${encodeURIComponent(item.id)}`}>
                    <RelativeTime value={item.created_at} />
                    <span className="visually-hidden"> import {item.id}</span>
                  </Link>
                ),
              },
              { header: 'Status', className: 'nowrap', cell: (item) => <ImportStatusBadge status={item.status} /> },
              { header: 'Rows', cell: (item) => counted(item.counts) },
            ]}
          />
        ) : null}
      </section>
    </>
  );
}
