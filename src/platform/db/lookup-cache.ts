import type { Database, Queryable } from './database.ts';

// Look-ups that every request makes and that seldom change (which organization and permission an API
// key has, which key an organization's sending domain signs with) are answered from memory. A cached
// answer must never outlive the row it came from, in any process:
//
// - The tables behind them notify LOOKUPS_CHANNEL from a trigger on every UPDATE or DELETE (migration
//   0013), so the notification is sent by the commit that makes the change, whatever code made it.
// - Every process listens on that channel and forgets everything it cached when a notification arrives.
// - A process whose listening connection is down caches nothing: it could miss a notification. When the
//   connection is back it forgets everything and starts again.
// - The process that makes a change also forgets at once (forgetLookups), not only when its own
//   notification comes back.
// - A look-up that was in flight when the cache was emptied is not cached: it may have read the row
//   before the change (a generation number tells).
//
// - No answer is used for longer than MAX_AGE_MS, a backstop for a notification lost without the
//   connection saying so (a network path that drops an idle connection silently).
//
// Only found rows are cached: a key or domain that does not exist (yet) is looked up every time, so a
// new one works at once and made-up tokens cannot fill the memory.

export const LOOKUPS_CHANNEL = 'mailroom_lookups';

/** Entries one cache holds at most; past it the oldest goes. */
const MAX_ENTRIES = 10_000;
/** How long an answer is used at most, notification or not. */
export const MAX_AGE_MS = 5_000;

export class LookupCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();
  private generation = 0;
  private live = false;

  /** The cached value, or undefined. */
  get(key: string): V | undefined {
    if (!this.live) return undefined;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.until > Date.now()) return entry.value;
    this.entries.delete(key);
    return undefined;
  }

  /** A ticket to take before looking up: `remember` with it caches nothing if the cache was emptied since. */
  ticket(): number {
    return this.generation;
  }

  remember(key: string, value: V, ticket: number): void {
    if (!this.live || ticket !== this.generation) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, until: Date.now() + MAX_AGE_MS });
  }

  /**
   * The cached answer for `key`, else what `load` finds, remembered when `keep` says it may be (a row
   * found, of a kind that is cached) and no change came in while it was being looked up.
   */
  async through<R extends V | null | undefined>(
    key: string,
    load: () => Promise<R>,
    keep: (answer: R) => boolean = (answer) => answer !== undefined && answer !== null,
  ): Promise<R> {
    const cached = this.get(key);
    if (cached !== undefined) return cached as R;
    const ticket = this.ticket();
    const answer = await load();
    if (keep(answer)) this.remember(key, answer as V, ticket);
    return answer;
  }

  forget(): void {
    this.entries.clear();
    this.generation += 1;
  }

  /** Whether answers may be cached now (the listening connection is up). */
  setLive(live: boolean): void {
    this.forget();
    this.live = live;
  }
}

interface Lookups {
  caches: Map<string, LookupCache<unknown>>;
  live: boolean;
}

// Keyed by handle; a transaction passed in stands for no handle that listens, so nothing is cached for it.
const byDatabase = new WeakMap<Queryable, Lookups>();

function lookupsOf(db: Queryable): Lookups {
  let lookups = byDatabase.get(db);
  if (!lookups) {
    lookups = { caches: new Map(), live: false };
    byDatabase.set(db, lookups);
  }
  return lookups;
}

/**
 * `tx`, a transaction on `db`, as a handle whose look-ups go through `db`'s caches: what is cached was
 * committed, as it is for any look-up on `db`. Statements still run in the transaction.
 */
export function throughLookupsOf(db: Queryable, tx: Queryable): Queryable {
  const reader: Queryable = { query: (text, params) => tx.query(text, params) };
  byDatabase.set(reader, lookupsOf(db));
  return reader;
}

/**
 * The cache `name` of this database handle. It caches nothing until cacheLookups has started listening
 * for changes on the handle.
 */
export function lookupCache<V>(db: Queryable, name: string): LookupCache<V> {
  const lookups = lookupsOf(db);
  let cache = lookups.caches.get(name);
  if (!cache) {
    cache = new LookupCache();
    cache.setLive(lookups.live);
    lookups.caches.set(name, cache);
  }
  return cache as LookupCache<V>;
}

/** Empties every cache of this handle now (after a change this process made). */
export function forgetLookups(db: Queryable): void {
  for (const cache of lookupsOf(db).caches.values()) cache.forget();
}

/**
 * Starts caching look-ups on this handle: listens for changes, and caches only while listening. The
 * returned function stops listening and caching. Without it (or when listening cannot start) every
 * look-up goes to the database, which is always right, only slower.
 */
export async function cacheLookups(db: Database): Promise<() => Promise<void>> {
  const lookups = lookupsOf(db);
  const setLive = (live: boolean) => {
    lookups.live = live;
    for (const cache of lookups.caches.values()) cache.setLive(live);
  };
  const stop = await db.listen(
    LOOKUPS_CHANNEL,
    () => setLive(true), // a change (forget all), or the connection back after a drop
    () => setLive(false),
  );
  setLive(true);
  return async () => {
    setLive(false);
    await stop().catch(() => {}); // the database may be closed already
  };
}
