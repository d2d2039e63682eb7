// Times as people read them: relative ("5 minutes ago") with the exact local time on hover and in the
// `datetime` attribute, or the exact local time itself.

const relativeFormat = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const absoluteFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

const UNITS: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ['year', 365 * 24 * 3600],
  ['month', 30 * 24 * 3600],
  ['week', 7 * 24 * 3600],
  ['day', 24 * 3600],
  ['hour', 3600],
  ['minute', 60],
  ['second', 1],
];

/** "3 hours ago", "in 2 days" (relative to `now`). */
export function formatRelative(date: Date, now: Date = new Date()): string {
  const seconds = Math.round((date.getTime() - now.getTime()) / 1000);
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === 'second') {
      return Math.abs(seconds) < 10 ? 'just now' : relativeFormat.format(Math.round(seconds / size), unit);
    }
  }
  return 'just now';
}

export function formatTimestamp(date: Date): string {
  return absoluteFormat.format(date);
}

/** `value`: an ISO 8601 string from the API (or null: shows "—"). */
export function RelativeTime({ value }: { value: string | null | undefined }) {
  if (!value) return <span aria-label="none">—</span>;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return <span>{value}</span>;
  return (
    <time dateTime={value} title={formatTimestamp(date)}>
      {formatRelative(date)}
    </time>
  );
}

export function Timestamp({ value }: { value: string | null | undefined }) {
  if (!value) return <span aria-label="none">—</span>;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return <span>{value}</span>;
  return <time dateTime={value}>{formatTimestamp(date)}</time>;
}
