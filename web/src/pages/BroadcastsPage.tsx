import { type ListResponse } from '../api.ts';
import {
  DataTable,
  EmptyState,
  ErrorBanner,
  Loading,
  PageHeader,
  Pager,
  RelativeTime,
  StatusBadge,
  type Column,
} from '../components/index.ts';
import { useApiGet, useKeysetList } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import type { Segment } from './SegmentsPage.tsx';

// The organization's broadcasts (GET /broadcasts), newest first, paged by keys. A broadcast is one message
// sent to the contacts of a segment; its name opens its page, where it is composed, sent and followed.

export type BroadcastStatus = 'draft' | 'scheduled' | 'queued' | 'paused' | 'sent' | 'canceled' | 'failed';

export interface BroadcastListItem {
  id: string;
  name: string | null;
  segment_id: string | null;
  audience_id?: string | null;
  status: BroadcastStatus;
  created_at: string;
  scheduled_at: string | null;
  sent_at: string | null;
}

const STATUS_WORDS: Record<BroadcastStatus, string> = {
  draft: 'Draft',
  scheduled: 'Scheduled',
  queued: 'Sending',
  paused: 'Paused',
  sent: 'Sent',
  canceled: 'Canceled',
  failed: 'Failed',
};

// The colour of each status, from the tones every page shares (styles.css, .status-<tone>): a draft is
// neutral, waiting or stopped is amber, sending is amber, paused and failed are red, sent is green.
const STATUS_TONES: Record<BroadcastStatus, string> = {
  draft: 'draft',
  scheduled: 'scheduled',
  queued: 'pending',
  paused: 'paused',
  sent: 'delivered',
  canceled: 'canceled',
  failed: 'failed',
};

/** A broadcast's status as a badge; a status the dashboard does not know shows as the API said it. */
export function BroadcastStatusBadge({ status }: { status: string }) {
  const known = status in STATUS_WORDS ? (status as BroadcastStatus) : undefined;
  return <StatusBadge tone={known ? STATUS_TONES[known] : 'other'}>{known ? STATUS_WORDS[known] : status}</StatusBadge>;
}

/** The organization's segments by id, for naming a broadcast's audience. */
export function useSegmentNames(): Map<string, string> {
  const segments = useApiGet<ListResponse<Segment>>('/segments');
  return new Map((segments.data?.data ?? []).map((item) => [item.id, item.name]));
}

export function BroadcastsPage(_props: PageProps) {
  const list = useKeysetList<BroadcastListItem>('/broadcasts');
  const segmentNames = useSegmentNames();

  const columns: Array<Column<BroadcastListItem>> = [
    {
      header: 'Broadcast',
      cell: (item) => (
        <Link to={`/broadcasts/${encodeURIComponent(item.id)}`} className="break-anywhere">
          {item.name || '(no name)'}
        </Link>
      ),
    },
    { header: 'Status', className: 'nowrap', cell: (item) => <BroadcastStatusBadge status={item.status} /> },
    {
      header: 'Segment',
      cell: (item) => {
        const id = item.segment_id ?? item.audience_id ?? null;
        if (!id) return <span className="muted">None</span>;
        return <span className="break-anywhere">{segmentNames.get(id) ?? id}</span>;
      },
    },
    {
      header: 'Sent or scheduled',
      className: 'nowrap',
      cell: (item) =>
        item.sent_at ? (
          <RelativeTime value={item.sent_at} />
        ) : item.scheduled_at ? (
          <RelativeTime value={item.scheduled_at} />
        ) : (
          <span className="muted">—</span>
        ),
    },
    { header: 'Created', className: 'nowrap hide-narrow', cell: (item) => <RelativeTime value={item.created_at} /> },
  ];

  const newBroadcast = (
    <Link to="/broadcasts/new" className="button button-primary">
      New broadcast
    </Link>
  );
  return (
    <>
      <PageHeader
        title="Broadcasts"
        description="One message sent to every contact of a segment, each contact getting its own copy."
        actions={newBroadcast}
      />
      <ErrorBanner error={list.error} title="The broadcasts could not be loaded" onRetry={list.reload} />
      {list.loading && list.items.length === 0 ? <Loading label="Loading broadcasts…" /> : null}
      {!list.loading && !list.error && list.items.length === 0 ? (
        <EmptyState title="No broadcasts yet" action={newBroadcast}>
          Compose one from HTML or a template, preview it as one of your contacts, then send it to a segment now or at a
          time you choose.
        </EmptyState>
      ) : null}
      {list.items.length > 0 ? (
        <div aria-busy={list.loading || undefined} className="stack-narrow">
          <DataTable
            caption="Broadcasts, newest first"
            captionHidden
            columns={columns}
            rows={list.items}
            rowKey={(item) => item.id}
          />
          <Pager
            label="Broadcasts"
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
