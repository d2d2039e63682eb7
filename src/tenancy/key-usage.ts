import type { Queryable } from '../platform/db/database.ts';

// `last_used_at` of API keys. Authentication is on the path of every send, so it must not cost a write
// per request: each process stamps a key at most once per STAMP_INTERVAL_MS, remembering in memory when
// it last did. The value read is therefore up to a minute behind (per process), which is what a person
// looking for unused keys needs. Stamps live in api_key_usage, not api_keys, so they never empty the
// processes' key caches (migration 0025).

/** A key in use is written at most this often by one process. */
export const STAMP_INTERVAL_MS = 60_000;
/** Keys remembered at most; past it the longest remembered goes (and may be stamped once more). */
const MAX_REMEMBERED = 10_000;

export class KeyUsage {
  /** Key id -> when this process last stamped it (epoch ms by `now`). */
  private readonly stamped = new Map<string, number>();
  private readonly db: Queryable;
  private readonly now: () => Date;

  constructor(db: Queryable, now: () => Date = () => new Date()) {
    this.db = db;
    this.now = now;
  }

  /**
   * Notes a use of the key: writes its stamp when this process has not in the last minute. A failed
   * write does not fail the request that used the key; the next use tries again.
   */
  async record(apiKeyId: string): Promise<void> {
    const at = this.now();
    const last = this.stamped.get(apiKeyId);
    if (last !== undefined && at.getTime() - last < STAMP_INTERVAL_MS) return;
    // Remembered before the write, so that requests arriving meanwhile do not write too.
    this.stamped.delete(apiKeyId);
    if (this.stamped.size >= MAX_REMEMBERED) this.stamped.delete(this.stamped.keys().next().value!);
    this.stamped.set(apiKeyId, at.getTime());
    try {
      // greatest(): a process whose stamp is older (or whose clock is behind) never moves it back.
      await this.db.query(
        `INSERT INTO api_key_usage (api_key_id, last_used_at) VALUES ($1, $2)
         ON CONFLICT (api_key_id) DO UPDATE SET last_used_at = greatest(api_key_usage.last_used_at, excluded.last_used_at)`,
        [apiKeyId, at],
      );
    } catch {
      if (this.stamped.get(apiKeyId) === at.getTime()) this.stamped.delete(apiKeyId);
    }
  }
}

const byDatabase = new WeakMap<Queryable, KeyUsage>();

/** The usage recorder of a database handle (one per handle, so one memory of stamps per process). */
export function keyUsageOf(db: Queryable): KeyUsage {
  let usage = byDatabase.get(db);
  if (!usage) {
    usage = new KeyUsage(db);
    byDatabase.set(db, usage);
  }
  return usage;
}
