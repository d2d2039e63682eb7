import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { fanOutCtes } from '../webhooks/fan-out.ts';
import { broadcastPausedDataSql } from '../webhooks/event-payloads.ts';
import { countsInRatesSql } from '../emails/test-addresses.ts';
import { pauseBroadcast } from './send-broadcast.ts';

// The automatic pause: a broadcast that hurts the sender's reputation stops before it reaches everyone.
// Once `after` copies of a broadcast have an outcome (delivered, bounced, or refused for good), a
// broadcast whose hard bounces (permanent, at send time or reported later by a DSN) are more than
// `hardBounceRate` of those copies, or whose complaints are more than `complaintRate` of them, is paused
// (pauseBroadcast, with a reason naming the rate and the threshold) and broadcast.paused is emitted, in
// one transaction. It is checked again as later outcomes arrive (complaints come in hours after the
// copy), on the copies with an outcome by then. Copies to Resend's test addresses (at resend.dev, whose
// outcomes are simulated) count nowhere: neither as copies nor as bounces or complaints.
//
// Cost. The check counts the broadcast's copies through its index (emails.broadcast_id), their
// recipients and their bounce and complaint entries: for a large broadcast a scan of every copy (about
// 60 ms for 100,000 copies on PostgreSQL), so it runs at most once per second per broadcast in a
// process, whatever the number of outcomes recorded meanwhile (one check after the second for all of
// them). Once a broadcast has reached `after`, only a bounce or a complaint can raise a rate, so a
// delivery no longer asks for a check.
//
// Once. `broadcasts.auto_paused_at` is set by the transaction that pauses, only where it is null and the
// broadcast is still queued or sent (copies on their way): checks racing in several processes pause and announce it once, and a
// broadcast an operator resumes after an automatic pause is not paused automatically again (the operator
// has seen the rates and decided).

export interface AutoPauseSettings {
  /** Copies with an outcome before the rates are looked at (0: never pause automatically). */
  after: number;
  /** Fractions of those copies; more than this pauses. */
  hardBounceRate: number;
  complaintRate: number;
}

export const autoPauseSettings = (
  config: Pick<Config, 'broadcastPauseAfter' | 'broadcastPauseHardBounceRate' | 'broadcastPauseComplaintRate'>,
): AutoPauseSettings => ({
  after: config.broadcastPauseAfter,
  hardBounceRate: config.broadcastPauseHardBounceRate,
  complaintRate: config.broadcastPauseComplaintRate,
});

/** What a recorded outcome of a copy was, as far as the check is concerned. */
export type NotedOutcome = 'outcome' | 'hard_bounce' | 'complaint';

export interface BroadcastAutoPause {
  /** A copy of the broadcast had an outcome recorded (committed): check it soon, at most once a second. */
  noted(broadcastId: string, outcome: NotedOutcome): void;
  /** Resolves once no check is due or running (tests, and a stop that wants them done). */
  idle(): Promise<void>;
  /** Forgets every pending check. */
  close(): void;
}

/** The copies' counts a check is decided on. */
export interface BroadcastCounts {
  copies: number;
  hard_bounces: number;
  complaints: number;
}

export interface AutoPauseOptions {
  /** Least time between two checks of one broadcast (ms). */
  intervalMs?: number;
  /** The clock (ms since the epoch). */
  now?: () => number;
}

const DEFAULT_INTERVAL_MS = 1000;

interface Watch {
  lastCheck: number;
  running: Promise<void> | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Outcomes noted since the last check started. */
  due: boolean;
  /** The last check found at least `after` copies with an outcome. */
  reachedAfter: boolean;
  /** Paused by a check, or no longer pausable (canceled, deleted, paused automatically before). */
  finished: boolean;
  /** Checks that failed in a row. */
  failures: number;
}

/** Failed checks tried again at the next interval before waiting for the broadcast's next outcome. */
const MAX_RETRIES = 3;

const perDatabase = new WeakMap<Database, BroadcastAutoPause>();

/**
 * The process's automatic pause for `db`: made on first call with these settings, the same one after
 * (every caller in a process passes the same configuration).
 */
export function broadcastAutoPause(
  db: Database,
  settings: AutoPauseSettings,
  options: AutoPauseOptions = {},
): BroadcastAutoPause {
  let autoPause = perDatabase.get(db);
  if (!autoPause) {
    autoPause = createAutoPause(db, settings, options);
    perDatabase.set(db, autoPause);
  }
  return autoPause;
}

/** The automatic pause made for `db` in this process, if any (for callers without the configuration). */
export const existingAutoPause = (db: Database): BroadcastAutoPause | undefined => perDatabase.get(db);

export function createAutoPause(
  db: Database,
  settings: AutoPauseSettings,
  options: AutoPauseOptions = {},
): BroadcastAutoPause {
  const intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
  const now = options.now ?? Date.now;
  const watches = new Map<string, Watch>();
  let closed = false;

  const watchOf = (broadcastId: string): Watch => {
    let watch = watches.get(broadcastId);
    if (!watch) {
      watch = {
        lastCheck: -Infinity,
        running: undefined,
        timer: undefined,
        due: false,
        reachedAfter: false,
        finished: false,
        failures: 0,
      };
      watches.set(broadcastId, watch);
    }
    return watch;
  };

  const schedule = (broadcastId: string, watch: Watch) => {
    if (closed || watch.finished || !watch.due || watch.running || watch.timer) return;
    const wait = watch.lastCheck + intervalMs - now();
    if (wait > 0) {
      watch.timer = setTimeout(() => {
        watch.timer = undefined;
        schedule(broadcastId, watch);
      }, wait);
      watch.timer.unref?.();
      return;
    }
    watch.due = false;
    watch.lastCheck = now();
    watch.running = checkOnce(broadcastId, watch)
      .then(() => {
        watch.failures = 0;
      })
      .catch(() => {
        // The database was away or busy: checked again at the next interval, a few times; after that
        // the broadcast's next outcome asks again (a process whose database is gone does not spin).
        watch.failures += 1;
        if (watch.failures <= MAX_RETRIES) watch.due = true;
      })
      .finally(() => {
        watch.running = undefined;
        schedule(broadcastId, watch);
      });
  };

  async function checkOnce(broadcastId: string, watch: Watch): Promise<void> {
    const verdict = await checkBroadcast(db, settings, broadcastId);
    if (verdict.kind === 'finished' || verdict.kind === 'paused') watch.finished = true;
    else watch.reachedAfter = verdict.counts.copies >= settings.after;
  }

  return {
    noted(broadcastId, outcome) {
      if (closed || settings.after === 0) return;
      const watch = watchOf(broadcastId);
      if (watch.finished) return;
      // Past `after`, a delivery only lowers the rates.
      if (outcome === 'outcome' && watch.reachedAfter) return;
      watch.due = true;
      schedule(broadcastId, watch);
    },
    async idle() {
      for (;;) {
        const busy = [...watches.values()].filter((w) => !w.finished && (w.running || w.timer || (w.due && !closed)));
        if (busy.length === 0) return;
        const running = busy.map((w) => w.running).filter((p) => p !== undefined);
        await (running.length > 0
          ? Promise.all(running)
          : new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, 50))));
      }
    },
    close() {
      closed = true;
      for (const watch of watches.values()) {
        if (watch.timer) clearTimeout(watch.timer);
        watch.timer = undefined;
        watch.due = false;
      }
    },
  };
}

/** What one check found and did. */
export type Verdict =
  | { kind: 'finished' }
  | { kind: 'healthy'; counts: BroadcastCounts }
  | { kind: 'paused'; counts: BroadcastCounts; reason: string };

/**
 * Checks one broadcast now: counts its copies, and pauses it (with broadcast.paused) when a rate passes
 * its threshold. 'finished' when it can no longer be paused automatically.
 */
export async function checkBroadcast(db: Database, settings: AutoPauseSettings, broadcastId: string): Promise<Verdict> {
  const { rows } = await db.query<BroadcastCounts & { organization_id: string; status: string; auto: boolean }>(
    `WITH copies AS (SELECT e.id FROM emails e WHERE e.broadcast_id = $1)
     SELECT b.organization_id, b.status, b.auto_paused_at IS NOT NULL AS auto,
            (SELECT count(*) FROM copies JOIN email_recipients r ON r.email_id = copies.id
              WHERE (r.status IN ('delivered', 'bounced')
                 OR (r.status = 'failed' AND r.failure_reason IN ('refused', 'retries_exhausted')))
                AND ${countsInRatesSql('r.address')})::int AS copies,
            (SELECT count(DISTINCT ev.email_id) FROM copies JOIN email_events ev ON ev.email_id = copies.id
              WHERE ev.type = 'bounced' AND ev.data #>> '{bounce,type}' = 'hard'
                AND ${countsInRatesSql('ev.recipient')})::int AS hard_bounces,
            (SELECT count(DISTINCT ev.email_id) FROM copies JOIN email_events ev ON ev.email_id = copies.id
              WHERE ev.type = 'complained' AND ${countsInRatesSql('ev.recipient')})::int AS complaints
       FROM broadcasts b WHERE b.id = $1`,
    [broadcastId],
  );
  const row = rows[0];
  // Paused automatically before, or past pausing for good. (Paused by hand: it may be resumed, and is
  // checked then.) A sent broadcast (every copy made) may still have copies on their way: it is checked,
  // and paused if pauseBroadcast takes it.
  if (!row || row.auto || ['canceled', 'failed'].includes(row.status)) return { kind: 'finished' };
  const counts = { copies: row.copies, hard_bounces: row.hard_bounces, complaints: row.complaints };
  const reason = pauseReason(settings, counts);
  if (reason === undefined || !PAUSABLE.includes(row.status)) return { kind: 'healthy', counts };
  try {
    const paused = await db.transaction((tx) =>
      pauseAutomatically(tx, row.organization_id, broadcastId, reason, counts),
    );
    return paused ? { kind: 'paused', counts, reason } : { kind: 'finished' };
  } catch (error) {
    // pauseBroadcast refused (a broadcast whose copies are all made, where it pauses only a queued one):
    // the transaction rolled back, mark included; nothing more can be done for this one.
    if (error instanceof ServiceError && error.name === 'invalid_state') return { kind: 'finished' };
    throw error;
  }
}

/** Statuses a check tries to pause from. */
const PAUSABLE = ['queued', 'sent'];

/** Why the broadcast must pause, or undefined while its rates are within the thresholds. */
export function pauseReason(settings: AutoPauseSettings, counts: BroadcastCounts): string | undefined {
  if (settings.after === 0 || counts.copies < settings.after || counts.copies === 0) return undefined;
  const hard = counts.hard_bounces / counts.copies;
  if (hard > settings.hardBounceRate) {
    return `hard bounces ${percent(hard)} of ${whole(counts.copies)} copies passed ${percent(settings.hardBounceRate)}`;
  }
  const complaints = counts.complaints / counts.copies;
  if (complaints > settings.complaintRate) {
    return `complaints ${percent(complaints)} of ${whole(counts.copies)} copies passed ${percent(settings.complaintRate)}`;
  }
  return undefined;
}

/** 0.062 → "6.2%", 0.003 → "0.3%", 0.05 → "5%": one significant decimal at least, no trailing zeros. */
function percent(fraction: number): string {
  const value = fraction * 100;
  const digits = value >= 10 ? 1 : value >= 1 ? 1 : value >= 0.1 ? 2 : 3;
  return `${Number(value.toFixed(digits))}%`;
}

const whole = (n: number) => n.toLocaleString('en-US');

/**
 * One transaction: marks the broadcast paused automatically (only while it is queued or sent and never was),
 * pauses it, and emits broadcast.paused with the counts. False when another check, a pause by hand or
 * the end of the fan-out came first.
 */
async function pauseAutomatically(
  tx: Queryable,
  organizationId: string,
  broadcastId: string,
  reason: string,
  counts: BroadcastCounts,
): Promise<boolean> {
  const { rowCount } = await tx.query(
    `UPDATE broadcasts SET auto_paused_at = now()
      WHERE id = $1 AND status = ANY ($2::text[]) AND auto_paused_at IS NULL`,
    [broadcastId, PAUSABLE],
  );
  if (rowCount === 0) return false;
  // A refusal (invalid_state) rolls the transaction back, mark included (checkBroadcast).
  await pauseBroadcast(tx, organizationId, broadcastId, reason);
  await tx.query(
    `WITH event AS (
       SELECT gen_random_uuid() AS id, clock_timestamp() AS created_at,
              ${broadcastPausedDataSql('b', '$2::jsonb')} AS data
         FROM broadcasts b WHERE b.id = $1
     )${fanOutCtes({ org: '$3::uuid', type: `'broadcast.paused'::text`, data: 'event.data' })}
     SELECT 1`,
    [broadcastId, JSON.stringify(counts), organizationId],
  );
  return true;
}
