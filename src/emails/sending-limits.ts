import type { Database, Queryable } from '../platform/db/database.ts';
import { Batcher } from '../platform/db/batcher.ts';

// Two limits per organization, both kept in the database so that every API process enforces the same:
// - a token bucket counted in messages: capacity rate_limit, refilled at rate_limit per second (the
//   database clock, shared by all processes, is the one that counts);
// - a monthly quota counted in recipients (to + cc + bcc), per calendar month in UTC, charged in the
//   transaction that accepts the messages.
// Both are hot rows (every send of the organization touches them), so neither may hold a lock across a
// durable commit: see takeRateTokens and reserveQuota.

export interface RateLimitState {
  limit: number;
  /** Whole messages that could be sent now. */
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
}

/** Usage counter rows per organization and month. */
const QUOTA_SHARDS = 16;
/**
 * While more than this many recipients of the quota remain, a charge touches one shard without reading
 * the others under lock; closer to the limit every shard is locked and the check is exact. The count can
 * only overshoot if more recipients than this are being accepted in the same instant.
 */
export const QUOTA_EXACT_MARGIN = 10_000;
const MONTH = `date_trunc('month', now() AT TIME ZONE 'UTC')::date`;
const RATE = '(SELECT rate_limit FROM org)::float8';
/** The bucket's time: the parameter `param` when a clock is set for the handle (tests), else the database's. */
const bucketNow = (param: string) => `coalesce(${param}::timestamptz, clock_timestamp())`;
const refilled = (now: string) =>
  `least(${RATE}, b.tokens + greatest(0, extract(epoch FROM ${now} - b.refilled_at))::float8 * ${RATE})`;
/** The bucket refilled up to now (capacity and rate: the organization's rate_limit), and what a take of $2 grants. */
const TAKE_NOW = bucketNow('$3');
const REFILLED = refilled(TAKE_NOW);
const GRANTED = `least($2, floor(${REFILLED})::int)`;

/**
 * Per database handle, a clock that replaces the database's for the bucket: time-dependent behaviour of
 * the limit is tested with it (a frozen clock refills nothing however slow the machine), never set in
 * production.
 */
const bucketClocks = new WeakMap<object, () => Date>();

export function setRateLimitClock(db: Database, clock: (() => Date) | undefined): void {
  if (clock) bucketClocks.set(db, clock);
  else bucketClocks.delete(db);
}

const bucketTime = (db: Queryable): Date | null => bucketClocks.get(db)?.() ?? null;

/** The organization's bucket as it stands, without taking anything or locking (for error answers). */
export async function peekRateLimit(db: Queryable, organizationId: string): Promise<RateLimitState> {
  // The same refill expression as takeRateTokens; an organization with no bucket yet has a full one.
  const { rows } = await db.query<{ rate_limit: number; tokens: number }>(
    `WITH org AS (SELECT id, rate_limit FROM organizations WHERE id = $1)
     SELECT org.rate_limit, coalesce(${refilled(bucketNow('$2'))}, org.rate_limit) AS tokens
       FROM org LEFT JOIN rate_limit_buckets b ON b.organization_id = org.id`,
    [organizationId, bucketTime(db)],
  );
  const row = rows[0]!;
  return rateState(row.rate_limit, row.tokens);
}

// set_config(…, true) lasts to the end of the transaction, which for a statement sent on its own is that
// statement's commit: the commit then does not wait for the disk. A token taken or refunded is not worth
// an fsync, and the bucket row, which every send of the organization updates, is locked only while the
// statement runs (not across a client round trip). A crash can at worst forget a few tokens taken.
const NOT_DURABLE = `SELECT set_config('synchronous_commit', 'off', true)`;

export interface RateTake {
  granted: number;
  state: RateLimitState;
}

/**
 * Takes up to `wanted` tokens from the organization's bucket and returns how many were granted. The
 * bucket's row is every send's hot spot, so takes are coalesced: while one statement for an organization
 * is in flight, the takes that come in wait, and the next statement takes all they want at once and
 * shares what it got in the order they came (each gets what it wants while any is left), as taking them
 * one by one would have.
 */
export function takeRateTokens(db: Database, organizationId: string, wanted: number): Promise<RateTake> {
  let byOrganization = takers.get(db);
  if (!byOrganization) {
    byOrganization = new Map();
    takers.set(db, byOrganization);
  }
  let taker = byOrganization.get(organizationId);
  if (!taker) {
    taker = new Batcher(db, {
      transaction: false,
      maxSize: 1000,
      run: async (queryable, wants: number[]) => {
        const { granted, state } = await takeTokensNow(
          queryable,
          organizationId,
          wants.reduce((sum, n) => sum + n, 0),
        );
        let left = granted;
        return wants.map((n) => {
          const share = Math.min(n, left);
          left -= share;
          return { granted: share, state };
        });
      },
    });
    byOrganization.set(organizationId, taker);
  }
  return taker.add(wanted);
}

/** Per database handle and organization, the batcher its takes wait in (platform/db/batcher.ts). */
const takers = new WeakMap<Database, Map<string, Batcher<number, RateTake>>>();

/** One statement: refill the bucket, then take up to `wanted` (capacity and rate: the organization's rate_limit). */
async function takeTokensNow(db: Queryable, organizationId: string, wanted: number): Promise<RateTake> {
  // The refill is computed from the row being updated (b.*), not from a snapshot read earlier: when two
  // takes race, the second waits for the row lock and then sees the first one's result.
  const { rows } = await db.query<{ tokens: number; last_granted: number; rate_limit: number }>(
    `WITH not_durable AS (${NOT_DURABLE}),
          org AS (SELECT id, rate_limit FROM organizations, not_durable WHERE id = $1)
     INSERT INTO rate_limit_buckets AS b (organization_id, tokens, last_granted, refilled_at)
     SELECT org.id, org.rate_limit - least($2, org.rate_limit), least($2, org.rate_limit), ${TAKE_NOW} FROM org
     ON CONFLICT (organization_id) DO UPDATE SET
       last_granted = ${GRANTED},
       tokens = ${REFILLED} - ${GRANTED},
       refilled_at = ${TAKE_NOW}
     RETURNING tokens, last_granted, (SELECT rate_limit FROM org) AS rate_limit`,
    [organizationId, wanted, bucketTime(db)],
  );
  const row = rows[0]!;
  return { granted: row.last_granted, state: rateState(row.rate_limit, row.tokens) };
}

/** Gives back tokens taken for messages that were then not accepted. */
export async function refundRateTokens(db: Queryable, organizationId: string, count: number): Promise<void> {
  if (count <= 0) return;
  await db.query(
    `WITH not_durable AS (${NOT_DURABLE})
     UPDATE rate_limit_buckets b SET tokens = least(o.rate_limit::float8, b.tokens + $2)
       FROM organizations o, not_durable WHERE b.organization_id = $1 AND o.id = b.organization_id`,
    [organizationId, count],
  );
}

/** This month's quota as reserved in a transaction: requests take from it in order, then one charge. */
export interface QuotaAllowance {
  /**
   * How many of these messages, in order, fit what is left (a prefix: once the quota runs out the rest
   * are refused); with `allOrNothing`, all of them or none. What fits is taken from the allowance.
   */
  fit(recipientCounts: number[], allOrNothing: boolean): number;
  /** Charges everything taken, in the caller's transaction (a usage row stays locked to its end). */
  charge(): Promise<void>;
}

/**
 * Reserves this month's quota for up to `wanted` recipients in the caller's transaction: far from the
 * limit without locking, near it by locking every usage row and counting exactly.
 */
export async function reserveQuota(tx: Queryable, organizationId: string, wanted: number): Promise<QuotaAllowance> {
  const seen = await tx.query<{ used: number; shards: number; monthly_quota: number }>(
    `SELECT coalesce(sum(u.recipients), 0)::int AS used, count(u.shard)::int AS shards, o.monthly_quota
       FROM organizations o
       LEFT JOIN monthly_usage u ON u.organization_id = o.id AND u.month = ${MONTH}
      WHERE o.id = $1 GROUP BY o.monthly_quota`,
    [organizationId],
  );
  const monthlyQuota = seen.rows[0]!.monthly_quota;
  let { used } = seen.rows[0]!;
  let shard = Math.floor(Math.random() * QUOTA_SHARDS);
  if (seen.rows[0]!.shards < QUOTA_SHARDS) {
    // First send of the month: make every shard, so that the exact path below can lock them all.
    await tx.query(
      `INSERT INTO monthly_usage (organization_id, month, shard)
       SELECT $1, ${MONTH}, s FROM generate_series(0, $2 - 1) AS s ON CONFLICT DO NOTHING`,
      [organizationId, QUOTA_SHARDS],
    );
  }
  if (used + wanted + QUOTA_EXACT_MARGIN > monthlyQuota) {
    // Near the limit: lock every shard (waiting for charges in flight) and count exactly.
    const exact = await tx.query<{ recipients: number }>(
      `SELECT recipients FROM monthly_usage WHERE organization_id = $1 AND month = ${MONTH} ORDER BY shard FOR UPDATE`,
      [organizationId],
    );
    used = exact.rows.reduce((sum, row) => sum + row.recipients, 0);
    shard = 0;
  }
  let taken = 0;
  return {
    fit(recipientCounts, allOrNothing) {
      let fitted = 0;
      let recipients = 0;
      for (const count of recipientCounts) {
        if (used + taken + recipients + count > monthlyQuota) break;
        recipients += count;
        fitted += 1;
      }
      if (allOrNothing && fitted < recipientCounts.length) return 0;
      taken += recipients;
      return fitted;
    },
    async charge() {
      if (taken === 0) return;
      await tx.query(
        `UPDATE monthly_usage SET recipients = recipients + $3
          WHERE organization_id = $1 AND month = ${MONTH} AND shard = $2`,
        [organizationId, shard, taken],
      );
    },
  };
}

/** What a group commit charges to an organization's quota in one statement (see quotaGuardCtes). */
export interface QuotaCharge {
  organizationId: string;
  /** Recipients of the messages the statement stores. */
  recipients: number;
}

/**
 * CTEs for a statement that stores messages only where the quota is far from its limit, the case in
 * which reserveQuota takes without locking: `quota_ok` (one row, column `ok`) holds when, for every
 * organization of `charges` (an SQL expression for the JSON array of quotaChargeRows), the month's usage
 * rows exist and usage + recipients + QUOTA_EXACT_MARGIN stays within the quota;
 * `quota_charged` then charges each organization's recipients to one usage row. When `ok` is false the
 * statement must write nothing (each of its writes filtered by it), and the caller takes the exact path:
 * reserveQuota in a transaction. Before any row lock is asked for, the statement's lock_timeout is set
 * to `lockTimeout` (set_config local to the transaction): the statement must run as its own implicit
 * transaction, else the setting would outlive it for the statements after it. Two such statements for
 * different organizations may lock their usage rows in different orders; PostgreSQL's deadlock check
 * ends one of them after deadlock_timeout, and the group commit writes its requests again, each alone.
 */
export function quotaGuardCtes(charges: string, lockTimeout: string): string {
  if (!/^[0-9]+(ms|s)$/.test(lockTimeout)) throw new Error(`Invalid lock timeout ${lockTimeout}`);
  return `quota_wanted AS (
       SELECT * FROM jsonb_to_recordset(${charges}) AS q(organization_id uuid, recipients int, shard int)
     ),
     quota_ok AS (
       SELECT set_config('lock_timeout', '${lockTimeout}', true) IS NOT NULL
              AND coalesce(bool_and(usage.shards = ${QUOTA_SHARDS}
                AND usage.used + q.recipients + ${QUOTA_EXACT_MARGIN} <= o.monthly_quota), true) AS ok
         FROM quota_wanted q
         JOIN organizations o ON o.id = q.organization_id
         CROSS JOIN LATERAL (
           SELECT count(*) AS shards, coalesce(sum(u.recipients), 0) AS used FROM monthly_usage u
            WHERE u.organization_id = q.organization_id AND u.month = ${MONTH}
         ) usage
     ),
     quota_charged AS (
       UPDATE monthly_usage u SET recipients = u.recipients + q.recipients
         FROM quota_wanted q
        WHERE (SELECT ok FROM quota_ok) AND u.organization_id = q.organization_id AND u.month = ${MONTH}
          AND u.shard = q.shard
     )`;
}

/** The rows quotaGuardCtes reads: each organization's charge, on a usage row picked at random. */
export function quotaChargeRows(charges: QuotaCharge[]) {
  return charges.map((c) => ({
    organization_id: c.organizationId,
    recipients: c.recipients,
    shard: Math.floor(Math.random() * QUOTA_SHARDS),
  }));
}

/** Seconds until one more message may be sent. */
export function retryAfterSeconds(state: RateLimitState): number {
  return state.remaining >= 1 ? 0 : Math.max(1, Math.ceil(1 / state.limit));
}

function rateState(limit: number, tokens: number): RateLimitState {
  return {
    limit,
    remaining: Math.max(0, Math.floor(tokens)),
    resetSeconds: Math.max(0, Math.ceil((limit - tokens) / limit)),
  };
}

export interface SendingLimits {
  /** Messages per second (the token bucket's rate and capacity). */
  rateLimit: number;
  monthlyLimit: number;
  /** Recipients charged this month, as reserveQuota counts them. */
  used: number;
  /** The first day of this month (UTC), as YYYY-MM-DD. */
  month: string;
  /** The database's clock when it was read. */
  now: Date;
}

/** The organization's limits and what this month has charged (no lock: a reading, not a reservation). */
export async function readSendingLimits(db: Queryable, organizationId: string): Promise<SendingLimits | undefined> {
  const { rows } = await db.query<{
    rate_limit: number;
    monthly_quota: number;
    used: number;
    month: string;
    now: Date;
  }>(
    `SELECT o.rate_limit, o.monthly_quota, ${MONTH}::text AS month, now() AS now,
            (SELECT coalesce(sum(u.recipients), 0)::int FROM monthly_usage u
              WHERE u.organization_id = o.id AND u.month = ${MONTH}) AS used
       FROM organizations o WHERE o.id = $1`,
    [organizationId],
  );
  const row = rows[0];
  return (
    row && {
      rateLimit: row.rate_limit,
      monthlyLimit: row.monthly_quota,
      used: row.used,
      month: row.month,
      now: row.now,
    }
  );
}
