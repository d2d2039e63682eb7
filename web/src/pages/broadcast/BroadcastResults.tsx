import { useEffect, useState, type FormEvent } from 'react';
import { api, segment, type ListResponse } from '../../api.ts';
import {
  Button,
  ConfirmButton,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  Loading,
  SelectField,
} from '../../components/index.ts';
import { useAction, useApiGet } from '../../hooks.ts';
import { Link } from '../../router.tsx';
import type { Broadcast, BroadcastStats } from './types.ts';

// A broadcast that has begun sending: its progress (while sending), pause, resume and cancel, then what
// its copies became, who was left out and why, who did what, and which links were clicked.

const numberFormat = new Intl.NumberFormat();
const count = (value: number | undefined) => numberFormat.format(value ?? 0);

/** The contacts a broadcast sends to: its audience less those left out. */
export const toSend = (stats: BroadcastStats) =>
  Math.max(0, stats.audience - stats.skipped_unsubscribed - stats.skipped_topic - stats.skipped_suppressed);

export function BroadcastProgress({ broadcast, onChanged }: { broadcast: Broadcast; onChanged: () => void }) {
  const stats = broadcast.stats;
  const path = `/broadcasts/${segment(broadcast.id)}`;
  const [reason, setReason] = useState('');
  const pause = useAction((why: string) => api.post(`${path}/pause`, why ? { reason: why } : {}));
  const resume = useAction(() => api.post(`${path}/resume`, {}));

  async function submitPause(event: FormEvent) {
    event.preventDefault();
    if ((await pause.run(reason.trim())) !== undefined) {
      setReason('');
      onChanged();
    }
  }

  const total = stats ? toSend(stats) : 0;
  const sent = stats?.sent ?? 0;
  const active = broadcast.status === 'queued' || broadcast.status === 'paused';

  return (
    <section className="card" aria-labelledby="progress-title">
      <h2 id="progress-title">{active ? 'Progress' : 'Sending'}</h2>
      {broadcast.status === 'paused' ? (
        <div className="error-banner" role="status">
          <p className="error-banner-title">Paused</p>
          <p>{broadcast.pause_reason || 'No reason was given.'}</p>
        </div>
      ) : null}
      {broadcast.status === 'failed' ? (
        <div className="error-banner" role="alert">
          <p className="error-banner-title">The broadcast failed</p>
          <p>{broadcast.failure_reason || 'No reason was given.'}</p>
        </div>
      ) : null}
      {stats ? (
        <>
          <progress
            className="quota-meter"
            max={Math.max(total, 1)}
            value={Math.min(sent, Math.max(total, 1))}
            aria-label="Copies sent"
            aria-valuetext={`${count(sent)} of ${count(total)} sent`}
          />
          <p className="broadcast-progress-text">
            {count(sent)} sent, {count(stats.queued)} queued, {count(stats.pending)} waiting their turn, of{' '}
            {count(total)} {total === 1 ? 'recipient' : 'recipients'}
            {stats.failed > 0 ? `; ${count(stats.failed)} failed` : ''}.
          </p>
        </>
      ) : null}
      {broadcast.status === 'queued' ? (
        <form className="inline-form" onSubmit={submitPause} noValidate>
          <Field
            label="Reason for pausing"
            hint="Optional, shown on this page while it is paused."
            value={reason}
            maxLength={500}
            onChange={setReason}
          />
          <Button type="submit" busy={pause.busy} busyLabel="Pausing…">
            Pause
          </Button>
        </form>
      ) : null}
      <ErrorBanner error={pause.error} title="The broadcast could not be paused" />
      {broadcast.status === 'paused' ? (
        <Button
          variant="primary"
          busy={resume.busy}
          busyLabel="Resuming…"
          onClick={async () => {
            if ((await resume.run()) !== undefined) onChanged();
          }}
        >
          Resume
        </Button>
      ) : null}
      <ErrorBanner error={resume.error} title="The broadcast could not be resumed" />
      {active ? (
        <div className="button-row">
          <ConfirmButton
            question="Cancel the broadcast? Copies already sent stay sent; no further copy leaves."
            busyLabel="Canceling…"
            onConfirm={async () => {
              await api.post(`${path}/cancel`, {});
              onChanged();
            }}
          >
            Cancel broadcast
          </ConfirmButton>
        </div>
      ) : null}
    </section>
  );
}

const OUTCOMES: Array<{ key: keyof BroadcastStats; label: string; type?: string }> = [
  { key: 'sent', label: 'Sent', type: 'sent' },
  { key: 'delivered', label: 'Delivered', type: 'delivered' },
  { key: 'opened', label: 'Opened', type: 'opened' },
  { key: 'clicked', label: 'Clicked', type: 'clicked' },
  { key: 'bounced', label: 'Bounced', type: 'bounced' },
  { key: 'complained', label: 'Complained', type: 'complained' },
  { key: 'unsubscribed', label: 'Unsubscribed', type: 'unsubscribed' },
  { key: 'failed', label: 'Failed' },
];

const SKIPPED: Array<{ key: keyof BroadcastStats; label: string }> = [
  { key: 'skipped_unsubscribed', label: 'Unsubscribed from everything' },
  { key: 'skipped_topic', label: 'Opted out of the topic' },
  { key: 'skipped_suppressed', label: 'On the suppression list' },
];

const RECIPIENT_TYPES = [
  'sent',
  'delivered',
  'opened',
  'clicked',
  'bounced',
  'complained',
  'unsubscribed',
  'suppressed',
] as const;

/** What an empty recipients list says, by the type shown. */
const NO_RECIPIENTS: Record<string, string> = {
  sent: 'No copy has been sent yet',
  delivered: 'No copy has been delivered yet',
  opened: 'No one has opened it yet',
  clicked: 'No one has clicked a link yet',
  bounced: 'No copy bounced',
  complained: 'No one complained',
  unsubscribed: 'No one unsubscribed',
  suppressed: 'No one was left out as suppressed',
};

interface Recipient {
  id: string;
  /** Null once the contact was deleted. */
  contact_id: string | null;
  email: string;
  count?: number;
  bounce_type?: string | null;
}

interface ClickedLink {
  id: string;
  url: string;
  clicks: number;
  unique_clicks: number;
}

/** A rate of the delivered copies, in words: "40%". */
function share(value: number, of: number): string {
  if (of <= 0) return '';
  return ` (${Math.round((value / of) * 1000) / 10}%)`;
}

export function BroadcastStatsSection({ broadcast }: { broadcast: Broadcast }) {
  const stats = broadcast.stats;
  if (!stats) return null;
  return (
    <section className="card" aria-labelledby="stats-title">
      <h2 id="stats-title">Results</h2>
      <DataTable
        caption="What the copies became"
        rows={OUTCOMES}
        rowKey={(row) => row.key}
        columns={[
          { header: 'Outcome', cell: (row) => row.label },
          {
            header: 'Recipients',
            className: 'numeric',
            cell: (row) => {
              const value = stats[row.key] ?? 0;
              const rate = row.key === 'opened' || row.key === 'clicked' ? share(value, stats.delivered) : '';
              return `${count(value)}${rate}`;
            },
          },
        ]}
      />
      <DataTable
        caption="Left out when the audience was taken"
        rows={SKIPPED}
        rowKey={(row) => row.key}
        columns={[
          { header: 'Reason', cell: (row) => row.label },
          { header: 'Contacts', className: 'numeric', cell: (row) => count(stats[row.key]) },
        ]}
      />
      <p className="muted">
        The audience was {count(stats.audience)} {stats.audience === 1 ? 'contact' : 'contacts'}.
      </p>
    </section>
  );
}

export function ClickedLinks({ broadcast, reloadKey }: { broadcast: Broadcast; reloadKey: string }) {
  const links = useApiGet<ListResponse<ClickedLink>>(`/broadcasts/${segment(broadcast.id)}/clicked-links`);
  const reloadLinks = links.reload;
  // Read again each time the broadcast's counts change.
  useEffect(() => reloadLinks(), [reloadKey, reloadLinks]);
  const list = links.data?.data ?? [];
  return (
    <section className="card" aria-labelledby="links-title">
      <h2 id="links-title">Clicked links</h2>
      <ErrorBanner error={links.error} title="The clicked links could not be loaded" onRetry={links.reload} />
      {links.loading && !links.data ? <Loading label="Loading the clicked links…" /> : null}
      {links.data && list.length === 0 ? (
        <EmptyState title="No clicks yet">A link shows here once a recipient clicks it.</EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Clicked links, most clicked first"
          captionHidden
          rows={[...list].sort((a, b) => b.clicks - a.clicks)}
          rowKey={(link) => link.id}
          columns={[
            { header: 'Link', cell: (link) => <span className="break-anywhere">{link.url}</span> },
            { header: 'Clicks', className: 'numeric', cell: (link) => count(link.clicks) },
            { header: 'Unique clicks', className: 'numeric', cell: (link) => count(link.unique_clicks) },
          ]}
        />
      ) : null}
    </section>
  );
}

export function Recipients({ broadcast, reloadKey }: { broadcast: Broadcast; reloadKey: string }) {
  const [type, setType] = useState<string>('delivered');
  const recipients = useApiGet<ListResponse<Recipient>>(`/broadcasts/${segment(broadcast.id)}/recipients`, { type });
  const reloadRecipients = recipients.reload;
  useEffect(() => reloadRecipients(), [reloadKey, reloadRecipients]);
  const list = recipients.data?.data ?? [];
  const label = (value: string) => value.charAt(0).toUpperCase() + value.slice(1);
  return (
    <section className="card" aria-labelledby="recipients-title">
      <h2 id="recipients-title">Recipients</h2>
      <SelectField
        label="Show who"
        value={type}
        onChange={setType}
        options={RECIPIENT_TYPES.map((value) => ({ value, label: label(value) }))}
      />
      <ErrorBanner error={recipients.error} title="The recipients could not be loaded" onRetry={recipients.reload} />
      {recipients.loading && !recipients.data ? <Loading label="Loading the recipients…" /> : null}
      {recipients.data && list.length === 0 ? (
        <EmptyState title={NO_RECIPIENTS[type] ?? 'No one'}>
          The list fills in as the copies are delivered and read.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption={`Recipients: ${type}`}
          captionHidden
          rows={list}
          rowKey={(recipient) => recipient.id}
          columns={[
            {
              header: 'Contact',
              // A contact deleted since has no page: its address stays, as text.
              cell: (recipient) =>
                recipient.contact_id ? (
                  <Link to={`/contacts/${encodeURIComponent(recipient.contact_id)}`} className="break-anywhere">
                    {recipient.email}
                  </Link>
                ) : (
                  <span className="break-anywhere">{recipient.email}</span>
                ),
            },
            ...(type === 'opened' || type === 'clicked'
              ? [{ header: 'Times', className: 'numeric', cell: (recipient: Recipient) => count(recipient.count) }]
              : []),
            ...(type === 'bounced'
              ? [{ header: 'Bounce', cell: (recipient: Recipient) => recipient.bounce_type ?? '—' }]
              : []),
          ]}
        />
      ) : null}
    </section>
  );
}
