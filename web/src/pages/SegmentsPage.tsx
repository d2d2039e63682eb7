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
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import type { PageProps } from '../router.tsx';

export interface Segment {
  id: string;
  name: string;
  created_at: string;
  /** How many contacts are in it. */
  contacts_count: number;
}

function SegmentForm({ onDone }: { onDone: () => void }) {
  const [name, setName] = useState('');
  const create = useAction((body: { name: string }) => api.post('/segments', body));

  async function submit(event: FormEvent) {
    event.preventDefault();
    const result = await create.run({ name: name.trim() });
    if (result !== undefined) {
      setName('');
      onDone();
    }
  }

  return (
    <form className="card" onSubmit={submit} aria-labelledby="create-segment-title" noValidate>
      <h3 id="create-segment-title">Add a segment</h3>
      <Field
        label="Segment name"
        value={name}
        maxLength={200}
        onChange={(value) => (setName(value), create.clearError())}
        error={fieldError(create.error, 'name')}
        autoComplete="off"
      />
      <ErrorBanner error={create.error} exceptFields={['name']} />
      <Button type="submit" variant="primary" busy={create.busy} busyLabel="Adding…">
        Add segment
      </Button>
    </form>
  );
}

const members = (count: number) => (count === 1 ? '1 contact' : `${count} contacts`);

export function SegmentsPage(_props: PageProps) {
  const segments = useApiGet<ListResponse<Segment>>('/segments');
  const list = segments.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="Segments"
        description="Named groups of contacts (Resend's audiences). A contact is in a segment because it was added, on its page or through the API."
      />
      <ErrorBanner error={segments.error} title="The segments could not be loaded" onRetry={segments.reload} />
      {segments.loading && !segments.data ? <Loading label="Loading segments…" /> : null}
      {segments.data && list.length === 0 ? (
        <EmptyState title="No segments yet">
          Add one below, then put contacts in it on their page or with <code>segments</code> in{' '}
          <code>POST /contacts</code>.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Segments"
          captionHidden
          rows={list}
          rowKey={(item) => item.id}
          columns={[
            { header: 'Segment', cell: (item) => <strong>{item.name}</strong> },
            { header: 'Members', className: 'nowrap', cell: (item) => members(item.contacts_count) },
            {
              header: 'ID',
              className: 'hide-narrow',
              cell: (item) => <code className="break-anywhere">{item.id}</code>,
            },
            {
              header: 'Added',
              className: 'nowrap hide-narrow',
              cell: (item) => <RelativeTime value={item.created_at} />,
            },
            {
              header: 'Actions',
              cell: (item) => (
                <ConfirmButton
                  question={`Delete “${item.name}”? Its ${members(item.contacts_count)} stay, outside it.`}
                  busyLabel="Deleting…"
                  onConfirm={async () => {
                    await api.delete(`/segments/${segment(item.id)}`);
                    segments.reload();
                  }}
                >
                  <span>
                    Delete<span className="visually-hidden"> {item.name}</span>
                  </span>
                </ConfirmButton>
              ),
            },
          ]}
        />
      ) : null}
      <SegmentForm onDone={segments.reload} />
    </>
  );
}
