import { useState, type FormEvent } from 'react';
import { api, ApiError, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  HtmlPreview,
  Loading,
  PageHeader,
  RelativeTime,
  Timestamp,
  webUrl,
  type Column,
  DetailRow,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { EventStatus } from './EmailsPage.tsx';
import { Timeline, type TimelineEvent } from './EmailTimeline.tsx';

// One message: its fields, each recipient's timeline, its HTML in a sandboxed frame, its text, raw source
// and attachments, and (while it has not left yet) cancel and reschedule. Everything from the message is
// rendered as text; its HTML is shown only by the browser inside a frame with an empty sandbox (no
// script, its own opaque origin), loaded from the signed /previews/ link whose policy blocks script too.

interface Email {
  id: string;
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  reply_to: string[];
  subject: string;
  html: string | null;
  text: string | null;
  tags: unknown;
  created_at: string;
  scheduled_at: string | null;
  last_event: string | null;
  message_id: string;
  body_pruned_at?: string;
}

interface Attachment {
  id: string;
  filename: string;
  size: number;
  content_type: string;
  content_disposition?: string;
  download_url: string;
}

const sizeFormat = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${sizeFormat.format(bytes / 1024)} KB`;
  return `${sizeFormat.format(bytes / (1024 * 1024))} MB`;
}

/** Tags as sent: `{ name: value }`, or `[{ name, value }]`, or `["name"]`. */
function tagsOf(tags: unknown): Array<{ name: string; value?: string }> {
  if (Array.isArray(tags)) {
    return tags.map((tag) =>
      typeof tag === 'object' && tag !== null
        ? {
            name: String((tag as { name?: unknown }).name ?? ''),
            value: String((tag as { value?: unknown }).value ?? ''),
          }
        : { name: String(tag) },
    );
  }
  if (tags && typeof tags === 'object') {
    return Object.entries(tags as Record<string, unknown>).map(([name, value]) => ({ name, value: String(value) }));
  }
  return [];
}

/** An ISO instant as the value of a datetime-local input (local time, minutes). */
function localInputValue(iso: string | null): string {
  const date = iso ? new Date(iso) : new Date(Date.now() + 3600_000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

export function EmailPage({ params }: PageProps) {
  const id = params.id ?? '';
  const base = `/emails/${segment(id)}`;
  const email = useApiGet<Email>(base);
  const events = useApiGet<ListResponse<TimelineEvent>>(`${base}/events`);
  const reload = () => {
    email.reload();
    events.reload();
  };

  const notFound = email.error instanceof ApiError && email.error.status === 404;
  const data = email.data;
  return (
    <>
      <PageHeader
        title={data ? data.subject || '(no subject)' : 'Email'}
        description={
          <>
            <Link to="/emails">← All emails</Link>
          </>
        }
      />
      {notFound ? (
        <EmptyState title="No such email" action={<Link to="/emails">Back to the list of emails</Link>}>
          It is not one of your organization's messages, or retention deleted it.
        </EmptyState>
      ) : (
        <ErrorBanner error={email.error} title="The email could not be loaded" onRetry={email.reload} />
      )}
      {!data && email.loading ? <Loading label="Loading the email…" /> : null}
      {data ? (
        <>
          <Details email={data} />
          {data.last_event === 'queued' || data.last_event === 'scheduled' ? (
            <Schedule email={data} onChanged={reload} />
          ) : null}
          <Timeline events={events.data?.data} error={events.error} loading={events.loading} onRetry={events.reload} />
          <Content email={data} base={base} />
          <Attachments base={base} pruned={Boolean(data.body_pruned_at)} />
          <RawSource base={base} />
        </>
      ) : null}
    </>
  );
}

const list = (addresses: string[]) =>
  addresses.length ? <span className="break-anywhere">{addresses.join(', ')}</span> : <span className="muted">—</span>;

function Details({ email }: { email: Email }) {
  const tags = tagsOf(email.tags);
  return (
    <section className="card" aria-labelledby="email-details">
      <h2 id="email-details">Details</h2>
      <dl className="details">
        <DetailRow label="Status">
          <EventStatus event={email.last_event} />
        </DetailRow>
        <DetailRow label="From">{list([email.from])}</DetailRow>
        <DetailRow label="To">{list(email.to)}</DetailRow>
        <DetailRow label="Cc">{list(email.cc)}</DetailRow>
        <DetailRow label="Bcc">{list(email.bcc)}</DetailRow>
        <DetailRow label="Reply to">{list(email.reply_to)}</DetailRow>
        <DetailRow label="Subject">
          <span className="break-anywhere">{email.subject || '(no subject)'}</span>
        </DetailRow>
        <DetailRow label="Tags">
          {tags.length ? (
            <ul className="tag-list">
              {tags.map((tag, index) => (
                <li key={index} className="tag">
                  {tag.value !== undefined && tag.value !== '' ? `${tag.name}: ${tag.value}` : tag.name}
                </li>
              ))}
            </ul>
          ) : (
            <span className="muted">—</span>
          )}
        </DetailRow>
        <DetailRow label="Created">
          <Timestamp value={email.created_at} /> (<RelativeTime value={email.created_at} />)
        </DetailRow>
        <DetailRow label="Scheduled for">
          <Timestamp value={email.scheduled_at} />
        </DetailRow>
        <DetailRow label="Message-ID">
          <code className="break-anywhere">{email.message_id}</code>
        </DetailRow>
        <DetailRow label="Id">
          <code className="break-anywhere">{email.id}</code>
        </DetailRow>
      </dl>
    </section>
  );
}

function Schedule({ email, onChanged }: { email: Email; onChanged: () => void }) {
  const [when, setWhen] = useState(localInputValue(email.scheduled_at));
  const [localError, setLocalError] = useState<string | undefined>(undefined);
  const [saved, setSaved] = useState<string | undefined>(undefined);
  const reschedule = useAction((scheduledAt: string) =>
    api.patch(`/emails/${segment(email.id)}`, { scheduled_at: scheduledAt }),
  );
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setSaved(undefined);
    const date = new Date(when);
    if (!when || Number.isNaN(date.getTime())) {
      setLocalError('Enter the date and time to send it at.');
      return;
    }
    setLocalError(undefined);
    const result = await reschedule.run(date.toISOString());
    if (result !== undefined) {
      setSaved(`Rescheduled for ${date.toLocaleString()}.`);
      onChanged();
    }
  };
  return (
    <section className="card" aria-labelledby="email-schedule">
      <h2 id="email-schedule">Not sent yet</h2>
      <p className="muted">
        It can still be rescheduled or cancelled. Once a worker hands it to the transport, neither is possible.
      </p>
      <form className="inline-form" onSubmit={submit} aria-label="Reschedule">
        <Field
          label="Send at (your local time)"
          type="datetime-local"
          value={when}
          onChange={setWhen}
          error={localError ?? fieldError(reschedule.error, 'scheduled_at')}
        />
        <Button type="submit" variant="primary" busy={reschedule.busy} busyLabel="Rescheduling…">
          Reschedule
        </Button>
      </form>
      <ErrorBanner error={reschedule.error} title="It could not be rescheduled" exceptFields={['scheduled_at']} />
      <p role="status" className="form-result">
        {saved ?? ''}
      </p>
      <ConfirmButton
        question="Cancel this email? It will never be sent."
        confirmLabel="Yes, cancel it"
        busyLabel="Cancelling…"
        onConfirm={async () => {
          await api.post(`/emails/${segment(email.id)}/cancel`);
          onChanged();
        }}
      >
        Cancel email
      </ConfirmButton>
    </section>
  );
}

function Content({ email, base }: { email: Email; base: string }) {
  return (
    <section className="card" aria-labelledby="email-content">
      <h2 id="email-content">Content</h2>
      {email.body_pruned_at ? (
        <p className="notice">
          The content was deleted on <Timestamp value={email.body_pruned_at} />, at the end of the retention period.
        </p>
      ) : null}
      <h3>HTML</h3>
      {email.html === null ? <p className="muted">This message has no HTML part.</p> : null}
      <HtmlPreview
        previewPath={email.html !== null ? `${base}/preview` : null}
        title="The message's HTML (sandboxed: no scripts run)"
      />
      <h3>Text</h3>
      {email.text ? (
        <pre className="code-block message-text" tabIndex={0} aria-label="The message's text">
          {email.text}
        </pre>
      ) : (
        <p className="muted">This message has no text part.</p>
      )}
    </section>
  );
}

function Attachments({ base, pruned }: { base: string; pruned: boolean }) {
  const attachments = useApiGet<ListResponse<Attachment>>(pruned ? null : `${base}/attachments`, { limit: 100 });
  const rows = attachments.data?.data ?? [];
  const columns: Array<Column<Attachment>> = [
    {
      header: 'Name',
      cell: (attachment) => {
        const url = webUrl(attachment.download_url);
        return url ? (
          <a href={url} download={attachment.filename} rel="noreferrer" className="break-anywhere">
            {attachment.filename}
          </a>
        ) : (
          <span className="break-anywhere">{attachment.filename}</span>
        );
      },
    },
    { header: 'Size', cell: (attachment) => formatSize(attachment.size), className: 'numeric nowrap' },
    { header: 'Type', cell: (attachment) => attachment.content_type, className: 'hide-narrow' },
  ];
  return (
    <section className="card" aria-labelledby="email-attachments">
      <h2 id="email-attachments">Attachments</h2>
      {pruned ? <p className="muted">Deleted with the content at the end of the retention period.</p> : null}
      <ErrorBanner error={attachments.error} title="The attachments could not be loaded" onRetry={attachments.reload} />
      {!pruned && !attachments.data && attachments.loading ? <Loading label="Loading attachments…" /> : null}
      {attachments.data && rows.length === 0 ? <p className="muted">No attachments.</p> : null}
      {rows.length > 0 ? (
        <>
          <DataTable
            caption="Attachments (download links work for an hour)"
            captionHidden
            columns={columns}
            rows={rows}
            rowKey={(attachment) => attachment.id}
          />
          <p className="muted">Download links are signed and expire after an hour; reload the page for fresh ones.</p>
        </>
      ) : null}
    </section>
  );
}

function RawSource({ base }: { base: string }) {
  const [raw, setRaw] = useState<string | undefined>(undefined);
  const [missing, setMissing] = useState<string | undefined>(undefined);
  const load = useAction(async () => {
    try {
      setRaw(await api.getText(`${base}/raw`));
    } catch (error) {
      // Only the capture transport keeps the source: its absence is a fact about the setup, not a failure.
      if (error instanceof ApiError && error.status === 404) setMissing(error.message);
      else throw error;
    }
  });
  return (
    <section className="card" aria-labelledby="email-raw">
      <h2 id="email-raw">Raw source</h2>
      {raw === undefined && missing === undefined ? (
        <>
          <p className="muted">The message exactly as composed and DKIM-signed (kept only when mail is captured).</p>
          <Button onClick={() => void load.run()} busy={load.busy} busyLabel="Loading…">
            Show raw source
          </Button>
        </>
      ) : null}
      <ErrorBanner error={load.error} title="The raw source could not be loaded" />
      {missing !== undefined ? <p className="notice">{missing}</p> : null}
      {raw !== undefined ? (
        <pre className="code-block raw-source" tabIndex={0} aria-label="The message's raw source">
          {raw}
        </pre>
      ) : null}
    </section>
  );
}
