import { useEffect, useState, type FormEvent } from 'react';
import { fieldError } from '../api.ts';
import {
  Button,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  FilterActions,
  LearnMore,
  Loading,
  PageHeader,
  Pager,
  RelativeTime,
  SelectField,
  type Column,
} from '../components/index.ts';
import { useKeysetList } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';

// Messages received at the organization's receiving domains, newest first, paged by keys like the sent
// list (GET /emails/receiving: after/before). The search and the quarantine choice live in the address
// (`#/received?search=…&quarantined=true`), so a filtered list survives a reload and can be shared.
// Quarantined messages (the spam filter's score at or over the threshold) are kept out of the ordinary
// list by the API; the "Quarantined" choice asks for them alone.

export interface ReceivedAttachmentSummary {
  id: string;
  filename: string | null;
  content_type: string;
  content_id: string | null;
  content_disposition: string | null;
  size: number;
}

export interface ReceivedEmailListItem {
  id: string;
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  reply_to: string[];
  /** The envelope's recipients at this organization (a Bcc recipient is only here). */
  received_for: string[];
  subject: string;
  message_id: string;
  quarantined: boolean;
  created_at: string;
  attachments: ReceivedAttachmentSummary[];
}

interface Filters {
  search: string;
  quarantined: '' | 'true';
}

function filtersOf(query: URLSearchParams): Filters {
  return { search: query.get('search') ?? '', quarantined: query.get('quarantined') === 'true' ? 'true' : '' };
}

const firstAndCount = (addresses: string[]) =>
  addresses.length <= 1 ? (addresses[0] ?? '') : `${addresses[0]} +${addresses.length - 1}`;

/**
 * The recipients as written (To and Cc), and the organization's addresses it was received for that they
 * do not name: mail sent Bcc, or to a mailing list, names no recipient of ours in its headers.
 */
function Recipients({ email }: { email: ReceivedEmailListItem }) {
  const written = [...email.to, ...email.cc];
  const named = (address: string) => written.some((entry) => entry.toLowerCase().includes(address.toLowerCase()));
  const unnamed = (email.received_for ?? []).filter((address) => !named(address));
  return (
    <span className="break-anywhere">
      {firstAndCount(written) || <span className="muted">—</span>}
      {unnamed.length > 0 ? <span className="cell-note">for {firstAndCount(unnamed)}</span> : null}
    </span>
  );
}

const attachmentsText = (count: number) => (count === 0 ? '' : count === 1 ? '1 attachment' : `${count} attachments`);

export function ReceivedEmailsPage({ query }: PageProps) {
  const applied = filtersOf(query);
  const [draft, setDraft] = useState<Filters>(applied);
  const appliedKey = query.toString();
  useEffect(() => setDraft(filtersOf(new URLSearchParams(appliedKey))), [appliedKey]);

  const list = useKeysetList<ReceivedEmailListItem>('/emails/receiving', {
    search: applied.search.trim(),
    quarantined: applied.quarantined,
  });
  const filtered = applied.search !== '' || applied.quarantined !== '';

  const apply = (event: FormEvent) => {
    event.preventDefault();
    const params = new URLSearchParams();
    if (draft.search.trim()) params.set('search', draft.search.trim());
    if (draft.quarantined) params.set('quarantined', draft.quarantined);
    const text = params.toString();
    navigate(text ? `/received?${text}` : '/received', { replace: true });
  };
  const clear = () => navigate('/received', { replace: true });

  // At phone width each message is a block of labelled values (styles.css, .stack-narrow); only the
  // attachment count is left out there.
  const columns: Array<Column<ReceivedEmailListItem>> = [
    { header: 'From', cell: (email) => <span className="break-anywhere">{email.from}</span> },
    {
      header: 'Subject',
      cell: (email) => (
        <Link to={`/received/${encodeURIComponent(email.id)}`} className="break-anywhere">
          {email.subject || '(no subject)'}
        </Link>
      ),
    },
    { header: 'To', cell: (email) => <Recipients email={email} /> },
    {
      header: 'Attachments',
      cell: (email) => attachmentsText(email.attachments?.length ?? 0) || <span className="muted">—</span>,
      className: 'nowrap hide-narrow',
    },
    { header: 'Received', cell: (email) => <RelativeTime value={email.created_at} />, className: 'nowrap' },
  ];

  const error = list.error;
  const quarantine = applied.quarantined === 'true';
  return (
    <>
      <PageHeader
        title="Received"
        description={
          <>
            Mail received at your domains, newest first; <Link to="/inbound-routes">inbound routes</Link> decide what
            happens to it. <LearnMore page="receiving" about="receiving mail" />
          </>
        }
      />
      <form className="card filters" onSubmit={apply} aria-label="Filter received emails">
        <Field
          label="Search"
          type="search"
          value={draft.search}
          onChange={(search) => setDraft((previous) => ({ ...previous, search }))}
          placeholder="alice, example.com, invoice"
          hint="Part of the sender, a recipient or the subject"
          error={fieldError(error, 'search')}
        />
        <SelectField
          label="Show"
          value={draft.quarantined}
          onChange={(value) => setDraft((previous) => ({ ...previous, quarantined: value === 'true' ? 'true' : '' }))}
          options={[
            { value: '', label: 'Received mail' },
            { value: 'true', label: 'Quarantined (spam)' },
          ]}
          error={fieldError(error, 'quarantined')}
        />
        <FilterActions filtered={filtered} onClear={clear} />
      </form>

      <ErrorBanner
        error={error}
        title="The received emails could not be loaded"
        exceptFields={['search', 'quarantined']}
        onRetry={list.reload}
      />
      {list.loading && list.items.length === 0 ? <Loading label="Loading received emails…" /> : null}
      {!list.loading && !error && list.items.length === 0 ? (
        filtered ? (
          <EmptyState
            title={quarantine && !applied.search ? 'Nothing in quarantine' : 'No received emails match these filters'}
            action={
              <Button variant="secondary" onClick={clear}>
                Clear filters
              </Button>
            }
          >
            {quarantine
              ? 'Messages the spam filter scores at or over its threshold are kept here, out of the ordinary list.'
              : 'Try another part of an address or of the subject.'}
          </EmptyState>
        ) : (
          <EmptyState title="No received emails yet">
            Switch receiving on for a domain on its page in <Link to="/domains">Domains</Link> and publish its MX
            record; mail sent to it then shows here.
          </EmptyState>
        )
      ) : null}
      {list.items.length > 0 ? (
        <div aria-busy={list.loading || undefined} className="stack-narrow">
          <DataTable
            caption={
              quarantine
                ? 'Quarantined emails, newest first'
                : filtered
                  ? 'Received emails matching the search, newest first'
                  : 'Received emails, newest first'
            }
            captionHidden
            columns={columns}
            rows={list.items}
            rowKey={(email) => email.id}
          />
          <Pager
            label="Received emails"
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
