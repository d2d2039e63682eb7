import { useState, type FormEvent } from 'react';
import { api, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  RelativeTime,
  type Column,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import type { PageProps } from '../router.tsx';

// The suppression list (GET /suppressions: oldest first, paged by `after` = the last address of a page),
// adding an address by hand and taking one off.

interface Suppression {
  email: string;
  reason: string;
  created_at: string;
}

const PAGE_SIZE = 50;

const REASONS: Record<string, string> = {
  hard_bounce: 'Hard bounce',
  complaint: 'Spam complaint',
  manual: 'Added by hand',
};

export function SuppressionsPage(_props: PageProps) {
  // The `after` of each page seen so far: going back pops one (the route pages forward only).
  const [cursors, setCursors] = useState<string[]>([]);
  const after = cursors.at(-1);
  const list = useApiGet<ListResponse<Suppression>>('/suppressions', { limit: PAGE_SIZE, after });
  const rows = list.data?.data ?? [];

  const [email, setEmail] = useState('');
  const [added, setAdded] = useState('');
  const add = useAction((address: string) => api.post<Suppression>('/suppressions', { email: address }));
  const [localError, setLocalError] = useState<string | undefined>(undefined);
  const [removed, setRemoved] = useState('');

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setAdded('');
    setRemoved('');
    if (!email.trim()) {
      setLocalError('Enter the address to suppress.');
      return;
    }
    setLocalError(undefined);
    const result = await add.run(email.trim());
    if (result) {
      setAdded(`${result.email} is suppressed: nothing will be sent to it.`);
      setEmail('');
      list.reload();
    }
  };

  const columns: Array<Column<Suppression>> = [
    { header: 'Address', cell: (row) => <span className="break-anywhere">{row.email}</span> },
    { header: 'Reason', cell: (row) => REASONS[row.reason] ?? row.reason, className: 'nowrap' },
    { header: 'Since', cell: (row) => <RelativeTime value={row.created_at} />, className: 'nowrap hide-narrow' },
    {
      header: 'Actions',
      cell: (row) => (
        <ConfirmButton
          question={`Take ${row.email} off the list? The next message to it will be sent.`}
          confirmLabel="Remove"
          busyLabel="Removing…"
          onConfirm={async () => {
            await api.delete(`/suppressions/${segment(row.email)}`);
            setAdded('');
            setRemoved(`${row.email} was removed from the list.`);
            list.reload();
          }}
        >
          <span>
            Remove<span className="visually-hidden"> {row.email}</span>
          </span>
        </ConfirmButton>
      ),
    },
  ];

  return (
    <>
      <PageHeader
        title="Suppressions"
        description="Addresses Mailroom will not send to (hard bounces, spam complaints, and addresses added by hand), and why."
      />
      <form className="card inline-form" onSubmit={submit} aria-label="Suppress an address" noValidate>
        <Field
          label="Address to suppress"
          type="email"
          value={email}
          onChange={setEmail}
          placeholder="someone@example.com"
          autoComplete="off"
          error={localError ?? fieldError(add.error, 'email')}
        />
        <Button type="submit" variant="primary" busy={add.busy} busyLabel="Adding…">
          Add to list
        </Button>
      </form>
      <ErrorBanner error={add.error} title="The address was not added" exceptFields={['email']} />
      <p role="status" className="form-result">
        {added || removed}
      </p>

      <ErrorBanner error={list.error} title="The suppression list could not be loaded" onRetry={list.reload} />
      {!list.data && list.loading ? <Loading label="Loading the suppression list…" /> : null}
      {list.data && rows.length === 0 && cursors.length === 0 ? (
        <EmptyState title="No suppressed addresses">
          Addresses join this list when a message to them bounces for good or they mark one as spam, so you stop sending
          where it hurts your reputation. Add one above to stop sending to it yourself.
        </EmptyState>
      ) : null}
      {rows.length > 0 ? (
        <div aria-busy={list.loading || undefined}>
          <DataTable
            caption="Suppressed addresses, oldest first"
            captionHidden
            columns={columns}
            rows={rows}
            rowKey={(row) => row.email}
          />
          {cursors.length > 0 || list.data?.has_more ? (
            <nav className="pager" aria-label="Suppressions pages">
              <Button disabled={cursors.length === 0 || list.loading} onClick={() => setCursors(cursors.slice(0, -1))}>
                ← Previous page
              </Button>
              <Button
                disabled={!list.data?.has_more || list.loading}
                onClick={() => {
                  const last = rows.at(-1);
                  if (last) setCursors([...cursors, last.email]);
                }}
              >
                Next page →
              </Button>
            </nav>
          ) : null}
        </div>
      ) : null}
    </>
  );
}
