import { ErrorBanner, Loading, Timestamp, formatTimestamp } from '../components/index.ts';
import { EventStatus } from './EmailsPage.tsx';

// A message's timeline (GET /emails/:id/events): its own entries (accepted, scheduled, rescheduled,
// canceled) first, then one list per recipient with its outcomes, each entry with its details in words.

export interface TimelineEvent {
  id: string;
  type: string;
  created_at: string;
  recipient?: string;
  data?: Record<string, unknown>;
}

/** An ISO instant from the API in the reader's local time ("—" when there is none). */
const when = (value: unknown) => (typeof value === 'string' ? formatTimestamp(new Date(value)) : '—');

/** A timeline entry's details in words (the times asked for, SMTP answer, bounce, reason, link). */
function eventDetails(event: TimelineEvent, scheduledEntry: boolean): string {
  const data = event.data ?? {};
  if (event.type === 'scheduled') return `Scheduled for ${when(data.scheduled_at)}`;
  if (event.type === 'rescheduled') {
    return data.previous_scheduled_at
      ? `Rescheduled from ${when(data.previous_scheduled_at)} to ${when(data.scheduled_at)}`
      : `Rescheduled to ${when(data.scheduled_at)} (it was to go at once)`;
  }
  const parts: string[] = [];
  const bounce = data.bounce as { type?: unknown; smtp_code?: unknown; diagnostic?: unknown } | undefined;
  if (bounce) {
    parts.push(`${String(bounce.type ?? '')} bounce`.trim());
    if (bounce.diagnostic) parts.push(String(bounce.diagnostic));
    else if (bounce.smtp_code) parts.push(`SMTP ${String(bounce.smtp_code)}`);
  }
  if (data.response) parts.push(String(data.response));
  if (data.reason) parts.push(`reason: ${String(data.reason).replace(/_/g, ' ')}`);
  // The egress source it went through, when the install declares sources (and whether as the overflow).
  if (data.source)
    parts.push(`from source ${String(data.source)}${data.overflow ? ' (overflow of a warming pool)' : ''}`);
  if (data.attempt) parts.push(`attempt ${String(data.attempt)}`);
  if (data.next_attempt_at) parts.push(`next try ${when(data.next_attempt_at)}`);
  const click = data.click as { link?: unknown } | undefined;
  if (click?.link) parts.push(String(click.link));
  if (data.feedback_type) parts.push(`feedback: ${String(data.feedback_type)}`);
  if (data.user_agent) parts.push(String(data.user_agent));
  // A message accepted before scheduling had entries of its own carries the time on its acceptance.
  if (data.scheduled_at && !scheduledEntry) parts.push(`scheduled for ${when(data.scheduled_at)}`);
  return parts.join(' · ');
}

export function Timeline({
  events,
  error,
  loading,
  onRetry,
}: {
  events: TimelineEvent[] | undefined;
  error: unknown;
  loading: boolean;
  onRetry: () => void;
}) {
  // The message's own entries first, then one timeline per recipient.
  const groups = new Map<string, TimelineEvent[]>();
  for (const event of events ?? []) {
    const key = event.recipient ?? '';
    groups.set(key, [...(groups.get(key) ?? []), event]);
  }
  const ordered = [...groups.entries()].sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : 0));
  const scheduledEntry = (events ?? []).some((event) => event.type === 'scheduled');
  return (
    <section className="card" aria-labelledby="email-timeline">
      <h2 id="email-timeline">Timeline</h2>
      <ErrorBanner error={error} title="The timeline could not be loaded" onRetry={onRetry} />
      {!events && loading ? <Loading label="Loading the timeline…" /> : null}
      {events && events.length === 0 ? <p className="muted">Nothing has happened to this message yet.</p> : null}
      {ordered.map(([recipient, entries]) => (
        <div key={recipient || 'message'} className="timeline-group">
          <h3 className="break-anywhere">{recipient || 'The message'}</h3>
          <ol className="timeline" aria-label={recipient ? `Timeline of ${recipient}` : 'Timeline of the message'}>
            {entries.map((event) => {
              const details = eventDetails(event, scheduledEntry);
              return (
                <li key={event.id} className="timeline-entry">
                  <EventStatus event={event.type} />
                  <Timestamp value={event.created_at} />
                  {details ? <span className="timeline-details break-anywhere">{details}</span> : null}
                </li>
              );
            })}
          </ol>
        </div>
      ))}
    </section>
  );
}
