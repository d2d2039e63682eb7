import { Type, type Static } from 'typebox';
import type { Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { readSendingLimits } from './sending-limits.ts';
import { COUNTED_KINDS, type CountedKind } from './timeline.ts';

// GET /overview: what the dashboard's home page shows. The quota and rate limit are read as sending
// enforces them (sending-limits.ts); the outcomes come from the hourly counts that each timeline entry
// adds to as it is recorded (email_event_counts), so the cost does not grow with the number of messages:
// at most 30 days × 24 hours × 6 kinds × a few shards rows of one organization, read by primary key.

export const HOURLY_BUCKETS = 24;
export const DAILY_BUCKETS = 30;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

const Count = Type.Integer({ minimum: 0 });
const Bucket = Type.Object({
  start: Type.String({ format: 'date-time', description: 'Start of the UTC hour or day' }),
  delivered: Count,
  bounced: Count,
  complained: Count,
  failed: Count,
  opened: Count,
  clicked: Count,
});

export const OverviewSchema = Type.Object({
  object: Type.Literal('overview'),
  quota: Type.Object({
    monthly_limit: Type.Union([Type.Integer(), Type.Null()], { description: 'Recipients per calendar month (UTC)' }),
    used: Type.Integer({ description: 'Recipients charged this month (to + cc + bcc of each accepted message)' }),
    remaining: Type.Union([Type.Integer(), Type.Null()]),
    period_start: Type.String({ format: 'date-time', description: 'First instant of this month (UTC), inclusive' }),
    period_end: Type.String({ format: 'date-time', description: 'First instant of next month (UTC), exclusive' }),
  }),
  rate_limit: Type.Object({ per_second: Type.Integer({ description: 'Messages per second' }) }),
  hourly: Type.Array(Bucket, { description: '24 UTC hours, oldest first; the last is the current hour' }),
  daily: Type.Array(Bucket, { description: '30 UTC days, oldest first; the last is today' }),
});
export type Overview = Static<typeof OverviewSchema>;
type OverviewBucket = Static<typeof Bucket>;

export async function readOverview(db: Queryable, organizationId: string): Promise<Overview> {
  const limits = await readSendingLimits(db, organizationId);
  // A credential outliving its organization is refused before here; this is only a race with deletion.
  if (!limits) throw notFound('Organization');
  const now = limits.now.getTime();
  const currentHour = Math.floor(now / HOUR_MS) * HOUR_MS;
  const today = Math.floor(now / DAY_MS) * DAY_MS;
  const firstHour = currentHour - (HOURLY_BUCKETS - 1) * HOUR_MS;
  const firstDay = today - (DAILY_BUCKETS - 1) * DAY_MS;

  // Summed per bucket in the database: at most 24 + 30 rows per kind come back, whatever the shards.
  const { rows } = await db.query<{ daily: boolean; start: Date; type: CountedKind; count: number }>(
    `SELECT false AS daily, hour AS start, type, sum(count)::int AS count FROM email_event_counts
      WHERE organization_id = $1 AND hour >= $2 GROUP BY hour, type
     UNION ALL
     SELECT true, date_trunc('day', hour, 'UTC'), type, sum(count)::int FROM email_event_counts
      WHERE organization_id = $1 AND hour >= $3 GROUP BY 2, type`,
    [organizationId, new Date(firstHour), new Date(firstDay)],
  );
  const hourly = buckets(firstHour, HOUR_MS, HOURLY_BUCKETS);
  const daily = buckets(firstDay, DAY_MS, DAILY_BUCKETS);
  for (const row of rows) {
    const [list, first, size] = row.daily ? [daily, firstDay, DAY_MS] : [hourly, firstHour, HOUR_MS];
    const bucket = list[Math.floor((row.start.getTime() - first) / size)];
    // A count dated ahead of the database's clock (another server's clock) has no bucket yet.
    if (bucket) bucket[row.type] += row.count;
  }

  const periodStart = new Date(`${limits.month}T00:00:00Z`);
  const periodEnd = new Date(Date.UTC(periodStart.getUTCFullYear(), periodStart.getUTCMonth() + 1, 1));
  return {
    object: 'overview',
    quota: {
      monthly_limit: limits.monthlyLimit,
      used: limits.used,
      remaining: Math.max(0, limits.monthlyLimit - limits.used),
      period_start: periodStart.toISOString(),
      period_end: periodEnd.toISOString(),
    },
    rate_limit: { per_second: limits.rateLimit },
    hourly,
    daily,
  };
}

/** `count` empty buckets of `size` ms from `first`. */
function buckets(first: number, size: number, count: number): OverviewBucket[] {
  return Array.from({ length: count }, (_, i) => ({
    start: new Date(first + i * size).toISOString(),
    ...(Object.fromEntries(COUNTED_KINDS.map((kind) => [kind, 0])) as Record<CountedKind, number>),
  }));
}
