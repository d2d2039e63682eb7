import { useEffect, useState, type FormEvent } from 'react';
import { fieldError, type Query } from '../api.ts';
import {
  Button,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  Pager,
  RelativeTime,
  SelectField,
  type Column,
  StatusBadge,
  FilterActions,
} from '../components/index.ts';
import { useKeysetList } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { SendTestEmail } from './SendTestEmail.tsx';

// The organization's messages, newest first, paged by keys (GET /emails: after/before, never an offset or a
// count, so a page costs the same at a million messages). The filters live in the address
// (`#/emails?search=…&last_event=bounced`), so a filtered list survives a reload and can be shared.

export interface EmailListItem {
  id: string;
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string;
  created_at: string;
  scheduled_at: string | null;
  last_event: string | null;
}

/** GET /emails's last_event values, as the filter offers them. */
export const LAST_EVENTS = [
  'queued',
  'scheduled',
  'sent',
  'canceled',
  'delivered',
  'delivery_delayed',
  'bounced',
  'complained',
  'opened',
  'clicked',
  'failed',
] as const;

/** "delivery_delayed" → "Delivery delayed". */
export const eventLabel = (event: string) => {
  const words = event.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
};

/** A status as a badge; its class comes from the known list only (the text is whatever the API said). */
export function EventStatus({ event }: { event: string | null }) {
  if (!event) return <span className="muted">—</span>;
  const known = (LAST_EVENTS as readonly string[]).includes(event) ? event : 'other';
  return <StatusBadge tone={known}>{eventLabel(event)}</StatusBadge>;
}

const FILTERS = ['search', 'from', 'tag', 'last_event', 'created_from', 'created_until'] as const;
type Filters = Record<(typeof FILTERS)[number], string>;

function filtersOf(query: URLSearchParams): Filters {
  const filters = Object.fromEntries(FILTERS.map((name) => [name, query.get(name) ?? ''])) as Filters;
  // Addresses saved before the search existed filtered by a whole recipient address: a search finds those too.
  if (!filters.search) filters.search = query.get('recipient') ?? '';
  return filters;
}

/** A local date (YYYY-MM-DD) as the instant it starts, `days` later: the API takes ISO 8601 instants. */
function startOfLocalDay(date: string, days = 0): string | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  if (!match) return undefined;
  const day = new Date(Number(match[1]), Number(match[2]) - 1, Number(match[3]) + days);
  return Number.isNaN(day.getTime()) ? undefined : day.toISOString();
}

function apiQuery(filters: Filters): Query {
  return {
    search: filters.search.trim(),
    from: filters.from.trim(),
    tag: filters.tag.trim(),
    last_event: filters.last_event,
    created_after: startOfLocalDay(filters.created_from),
    // "until" a day includes that day: the API's created_before is exclusive.
    created_before: startOfLocalDay(filters.created_until, 1),
  };
}

const recipientsText = (email: EmailListItem) => {
  const all = [...email.to, ...email.cc, ...email.bcc];
  return all.length <= 1 ? (all[0] ?? '') : `${all[0]} +${all.length - 1}`;
};

export function EmailsPage({ query }: PageProps) {
  const applied = filtersOf(query);
  const [draft, setDraft] = useState<Filters>(applied);
  const appliedKey = query.toString();
  useEffect(() => setDraft(filtersOf(new URLSearchParams(appliedKey))), [appliedKey]);

  const list = useKeysetList<EmailListItem>('/emails', apiQuery(applied));
  const filtered = FILTERS.some((name) => applied[name] !== '');

  const apply = (event: FormEvent) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const name of FILTERS) {
      const value = draft[name].trim();
      if (value) params.set(name, value);
    }
    const text = params.toString();
    navigate(text ? `/emails?${text}` : '/emails', { replace: true });
  };
  const clear = () => navigate('/emails', { replace: true });
  const set = (name: keyof Filters) => (value: string) => setDraft((previous) => ({ ...previous, [name]: value }));

  // At phone width each message is a block of labelled values (styles.css, .stack-narrow): the recipients
  // stay visible, only the sender is left out.
  const columns: Array<Column<EmailListItem>> = [
    { header: 'To', cell: (email) => <span className="break-anywhere">{recipientsText(email)}</span> },
    {
      header: 'Subject',
      cell: (email) => (
        <Link to={`/emails/${encodeURIComponent(email.id)}`} className="break-anywhere">
          {email.subject || '(no subject)'}
        </Link>
      ),
    },
    { header: 'Status', cell: (email) => <EventStatus event={email.last_event} />, className: 'nowrap' },
    { header: 'From', cell: (email) => <span className="break-anywhere">{email.from}</span>, className: 'hide-narrow' },
    { header: 'Created', cell: (email) => <RelativeTime value={email.created_at} />, className: 'nowrap' },
  ];

  const error = list.error;
  const fieldNames = ['search', 'from', 'tag', 'last_event', 'created_after', 'created_before'];
  const [testing, setTesting] = useState(false);

  return (
    <>
      <PageHeader
        title="Emails"
        description="Every message your organization sent or scheduled, newest first, with its delivery status."
        actions={
          <Button aria-expanded={testing} aria-controls="send-test-email" onClick={() => setTesting(!testing)}>
            {testing ? 'Close the test email' : 'Send a test email'}
          </Button>
        }
      />
      {testing ? (
        <section id="send-test-email" className="card" aria-labelledby="send-test-email-title">
          <h2 id="send-test-email-title">Send a test email</h2>
          <p className="muted">
            A real message, sent and delivered like any other: it appears in this list with its timeline.
          </p>
          <SendTestEmail onSent={() => list.reload()} />
        </section>
      ) : null}
      <form className="card filters" onSubmit={apply} aria-label="Filter emails">
        <Field
          label="Search"
          type="search"
          value={draft.search}
          onChange={set('search')}
          placeholder="alice, example.com, receipt"
          hint="Part of a recipient's address or of the subject"
          error={fieldError(error, 'search')}
        />
        <Field
          label="From"
          type="email"
          value={draft.from}
          onChange={set('from')}
          placeholder="receipts@acme.example"
          error={fieldError(error, 'from')}
        />
        <Field
          label="Tag"
          value={draft.tag}
          onChange={set('tag')}
          placeholder="name or name:value"
          error={fieldError(error, 'tag')}
        />
        <SelectField
          label="Status"
          value={draft.last_event}
          onChange={set('last_event')}
          options={[
            { value: '', label: 'Any' },
            ...LAST_EVENTS.map((event) => ({ value: event, label: eventLabel(event) })),
          ]}
          error={fieldError(error, 'last_event')}
        />
        <Field
          label="Created from"
          type="date"
          value={draft.created_from}
          onChange={set('created_from')}
          error={fieldError(error, 'created_after')}
        />
        <Field
          label="Created until"
          type="date"
          value={draft.created_until}
          onChange={set('created_until')}
          error={fieldError(error, 'created_before')}
        />
        <FilterActions filtered={filtered} onClear={clear} />
      </form>

      <ErrorBanner
        error={error}
        title="The emails could not be loaded"
        exceptFields={fieldNames}
        onRetry={list.reload}
      />
      {list.loading && list.items.length === 0 ? <Loading label="Loading emails…" /> : null}
      {!list.loading && !error && list.items.length === 0 ? (
        filtered ? (
          <EmptyState
            title="No emails match these filters"
            action={
              <Button variant="secondary" onClick={clear}>
                Clear filters
              </Button>
            }
          >
            Try another search, status or date range.
          </EmptyState>
        ) : (
          <EmptyState title="No emails yet">
            Send one with <code>POST /emails</code> (see the <Link to="/">Overview</Link> for an example) or over SMTP;
            it shows here as soon as it is accepted.
          </EmptyState>
        )
      ) : null}
      {list.items.length > 0 ? (
        <div aria-busy={list.loading || undefined} className="stack-narrow">
          <DataTable
            caption={filtered ? 'Emails matching the filters, newest first' : 'Emails, newest first'}
            captionHidden
            columns={columns}
            rows={list.items}
            rowKey={(email) => email.id}
          />
          <Pager
            label="Emails"
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
