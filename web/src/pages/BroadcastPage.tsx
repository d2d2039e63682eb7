import { useEffect } from 'react';
import { api, segment } from '../api.ts';
import {
  Button,
  ConfirmButton,
  DetailRow,
  ErrorBanner,
  Loading,
  PageHeader,
  RelativeTime,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { BroadcastStatusBadge, useSegmentNames } from './BroadcastsPage.tsx';
import { BroadcastForm } from './broadcast/BroadcastForm.tsx';
import { BroadcastProgress, BroadcastStatsSection, ClickedLinks, Recipients } from './broadcast/BroadcastResults.tsx';
import { PreviewAsContact, SendBroadcast, SendTest } from './broadcast/BroadcastTools.tsx';
import { isEditable, type Broadcast } from './broadcast/types.ts';

// One broadcast (#/broadcasts/<id>, or #/broadcasts/new to compose one). Until it begins sending it is a
// form with a preview as a contact, a test send, and sending now or at a time; from then on it is its
// progress (read again every 2 s while copies are still being made or waiting to leave), its pause,
// resume and cancel, and its results.

/** How often a sending broadcast's counts are read again. */
const POLL_MS = 2000;

/** Still moving: copies are being made or are waiting to leave. */
function inProgress(broadcast: Broadcast): boolean {
  if (broadcast.status === 'queued') return true;
  const stats = broadcast.stats;
  return broadcast.status === 'sent' && stats !== null && stats !== undefined && stats.pending + stats.queued > 0;
}

export function BroadcastPage({ params }: PageProps) {
  const id = params.id ?? 'new';
  const isNew = id === 'new';
  const broadcast = useApiGet<Broadcast>(isNew ? null : `/broadcasts/${segment(id)}`);
  const segmentNames = useSegmentNames();
  const data = broadcast.data;
  const polling = data !== undefined && inProgress(data);
  const reload = broadcast.reload;
  const duplicate = useAction(() => api.post<{ id: string }>(`/broadcasts/${segment(id)}/duplicate`, {}));

  useEffect(() => {
    if (!polling || broadcast.loading) return;
    const timer = window.setTimeout(reload, POLL_MS);
    return () => window.clearTimeout(timer);
  }, [polling, broadcast.loading, reload, data]);

  if (isNew) {
    return (
      <>
        <PageHeader title="New broadcast" description={<Link to="/broadcasts">All broadcasts</Link>} />
        <BroadcastForm
          broadcast={undefined}
          onSaved={(created) => navigate(`/broadcasts/${encodeURIComponent(created)}`, { replace: true })}
        />
      </>
    );
  }

  if (!data) {
    return (
      <>
        <PageHeader title="Broadcast" description={<Link to="/broadcasts">All broadcasts</Link>} />
        <ErrorBanner error={broadcast.error} title="The broadcast could not be loaded" onRetry={broadcast.reload} />
        {broadcast.loading ? <Loading label="Loading the broadcast…" /> : null}
      </>
    );
  }

  const segmentName = data.segment_id ? (segmentNames.get(data.segment_id) ?? 'its segment') : 'no segment';
  const audience = data.segment_id ? `the contacts of “${segmentName}”` : 'no one (choose a segment first)';
  const editable = isEditable(data.status);
  const statsKey = JSON.stringify(data.stats ?? null);

  return (
    <>
      <PageHeader
        title={data.name || data.subject || 'Broadcast'}
        description={<Link to="/broadcasts">All broadcasts</Link>}
        actions={
          <>
            <Button onClick={broadcast.reload} busy={broadcast.loading && !polling} busyLabel="Refreshing…">
              Refresh
            </Button>
            <Button
              busy={duplicate.busy}
              busyLabel="Duplicating…"
              onClick={async () => {
                const copy = await duplicate.run();
                if (copy) navigate(`/broadcasts/${encodeURIComponent(copy.id)}`);
              }}
            >
              Duplicate
            </Button>
          </>
        }
      />
      <ErrorBanner error={duplicate.error} title="The broadcast could not be duplicated" />
      <ErrorBanner error={broadcast.error} title="The broadcast could not be read again" onRetry={broadcast.reload} />
      <section className="card" aria-labelledby="summary-title">
        <h2 id="summary-title">Summary</h2>
        <dl className="details">
          <DetailRow label="Status">
            <BroadcastStatusBadge status={data.status} />
          </DetailRow>
          <DetailRow label="Segment">{data.segment_id ? segmentName : <span className="muted">None</span>}</DetailRow>
          <DetailRow label="From">{data.from || <span className="muted">Not set</span>}</DetailRow>
          <DetailRow label="Subject">{data.subject || <span className="muted">Not set</span>}</DetailRow>
          <DetailRow label="Created">
            <RelativeTime value={data.created_at} />
          </DetailRow>
          {data.scheduled_at ? (
            <DetailRow label="Scheduled for">
              <RelativeTime value={data.scheduled_at} />
            </DetailRow>
          ) : null}
          {data.sent_at ? (
            <DetailRow label="Sending began">
              <RelativeTime value={data.sent_at} />
            </DetailRow>
          ) : null}
          {data.completed_at ? (
            <DetailRow label="Every copy made">
              <RelativeTime value={data.completed_at} />
            </DetailRow>
          ) : null}
        </dl>
      </section>

      {editable ? (
        <>
          <BroadcastForm key={`${data.id}:${data.status}`} broadcast={data} onSaved={() => broadcast.reload()} />
          <PreviewAsContact broadcast={data} />
          <SendTest broadcast={data} />
          <SendBroadcast broadcast={data} audience={audience} onChanged={broadcast.reload} />
          <section className="card" aria-labelledby="delete-title">
            <h2 id="delete-title">Delete</h2>
            <ConfirmButton
              question={`Delete the broadcast “${data.name || data.subject || data.id}”? Nothing has been sent.`}
              busyLabel="Deleting…"
              onConfirm={async () => {
                await api.delete(`/broadcasts/${segment(data.id)}`);
                navigate('/broadcasts');
              }}
            >
              Delete broadcast
            </ConfirmButton>
          </section>
        </>
      ) : (
        <>
          <BroadcastProgress broadcast={data} onChanged={broadcast.reload} />
          <BroadcastStatsSection broadcast={data} />
          <ClickedLinks broadcast={data} reloadKey={statsKey} />
          <Recipients broadcast={data} reloadKey={statsKey} />
        </>
      )}
    </>
  );
}
