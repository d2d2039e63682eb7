import type { EmailStatus } from './statuses.ts';
import type { TimelineKind } from './timeline.ts';

// A message's `last_event` (GET /emails, GET /emails/:id) in Resend's words. Before a worker takes the
// message it is its status, `queued` or `scheduled`. From then on it is the kind of its newest timeline
// entry, except that the entries written before a worker took it (`accepted`, not a word Resend has,
// and `scheduled`, `rescheduled`) read `sent`: a message a worker has taken for its first delivery
// attempt has been sent, in Resend's sense, until a newer outcome (delivered, bounced, delivery_delayed,
// …) is recorded. The timeline keeps its own kinds.

/** Every value last_event takes. */
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
export type LastEvent = (typeof LAST_EVENTS)[number];

/** What GET /emails?last_event= takes: every value, and `accepted`, the word used for `sent` before. */
export const LAST_EVENT_FILTERS = [...LAST_EVENTS, 'accepted'] as const;
export const filteredLastEvent = (filter: (typeof LAST_EVENT_FILTERS)[number]): LastEvent =>
  filter === 'accepted' ? 'sent' : filter;

/** The timeline kinds recorded before a worker takes the message: once it is taken, they read `sent`. */
const BEFORE_SENDING: readonly string[] = ['accepted', 'scheduled', 'rescheduled'] satisfies TimelineKind[];

/** last_event from the message's status and the kind of its newest timeline entry. */
export function lastEventOf(status: EmailStatus, newestKind: string | null): string | null {
  if (status === 'queued' || status === 'scheduled') return status;
  return newestKind !== null && BEFORE_SENDING.includes(newestKind) ? 'sent' : newestKind;
}

/** The same, as SQL over a status column and a newest-kind column. */
export const lastEventSql = (status: string, newestKind: string) =>
  `CASE WHEN ${status} IN ('queued', 'scheduled') THEN ${status}
        WHEN ${newestKind} IN (${BEFORE_SENDING.map((kind) => `'${kind}'`).join(', ')}) THEN 'sent' ELSE ${newestKind} END`;
