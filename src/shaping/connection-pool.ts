import { randomUUID } from 'node:crypto';
import type { Database } from '../platform/db/database.ts';
import type { Logger } from '../platform/logger.ts';
import type { SiteLimits } from './limits.ts';
import { releaseSlot, renewSlots, takeSlot, takeToken, type SiteKey } from './destination-store.ts';
import { held, type Held, type ShapedConnection, type ShapeRequest } from './shaper-types.ts';

// One process's connections to each destination site, reused message after message (up to the site's
// deliveries per connection), each holding one of the site's numbered connection slots in the database
// so that the connection limit holds across processes. A message finds an idle connection, opens one on
// a free slot (at the site's connection pace), or waits a while for one to be handed over: fresh
// messages first, then the organization served least recently.

export interface Entry {
  connection: ShapedConnection;
  key: SiteKey;
  slot: number;
  deliveries: number;
  idleTimer?: NodeJS.Timeout;
}

interface Waiter {
  fresh: boolean;
  organizationId: string;
  /** Hands over a connection, or (undefined) says a slot came free: look again. */
  give(entry: Entry | undefined): void;
}

interface SitePool {
  idle: Entry[];
  /** Connections of this process to the site, idle or in use. */
  open: number;
  /** Slots of connections closed here whose release the database has not confirmed yet: still held there. */
  releasing: number;
  waiters: Waiter[];
  /** When each organization last got a connection here: the longest-waiting organization goes next. */
  served: Map<string, number>;
  /** The ask for a slot in progress: this process asks for a site's slots one at a time. */
  asking: Promise<unknown>;
}

/** A connection was tried and failed: what `connect` threw, marked so the caller knows an attempt was made. */
export class ConnectAttemptError extends Error {
  constructor(cause: unknown) {
    super('connect failed', { cause });
  }
}

/** The key of a source's site in this process's maps. */
export const idOf = (key: SiteKey) => `${key.source}/${key.site}`;

export interface ConnectionPoolOptions {
  db: Database;
  log: Pick<Logger, 'warn'>;
  now: () => Date;
  /** The time the connection pace is counted in (undefined: the database's). */
  bucketNow: () => Date | undefined;
  /** The site's connection limit in force, as last read. */
  connectionLimit: (key: SiteKey) => Promise<number>;
  leaseMs: number;
  waitMs: number;
  idleMs: number;
}

export type ConnectionPools = ReturnType<typeof createConnectionPools>;

export function createConnectionPools(options: ConnectionPoolOptions) {
  const { db, leaseMs, waitMs, idleMs, now, bucketNow } = options;
  const holder = randomUUID();
  const pools = new Map<string, SitePool>();
  let closed = false;

  const poolOf = (key: SiteKey): SitePool => {
    const id = idOf(key);
    let pool = pools.get(id);
    if (!pool) {
      pool = { idle: [], open: 0, releasing: 0, waiters: [], served: new Map(), asking: Promise.resolve() };
      pools.set(id, pool);
    }
    return pool;
  };

  /**
   * Gives a slot of this process back. Until the database has it free it counts as `releasing` (a
   * message asking for a slot then would look in vain); once free, a waiting message may take it.
   */
  const giveSlotBack = (key: SiteKey, slot: number): Promise<void> => {
    const pool = poolOf(key);
    pool.open -= 1;
    pool.releasing += 1;
    return releaseSlot(db, key, slot, holder).finally(() => {
      pool.releasing -= 1;
      nextWaiter(pool)?.give(undefined);
    });
  };

  /** Closes a connection and gives its slot back. */
  const retire = (entry: Entry) => {
    clearTimeout(entry.idleTimer);
    entry.connection.close();
    giveSlotBack(entry.key, entry.slot).catch((error: unknown) =>
      options.log.warn(
        { err: error, site: entry.key.site },
        'could not give a connection slot back; its lease runs out',
      ),
    );
  };

  /** A connection done with a message: to a waiting message (fresh first, then the least-served organization), idle, or closed. */
  const giveBack = (entry: Entry, limits: SiteLimits) => {
    const pool = poolOf(entry.key);
    if (closed || !entry.connection.usable || entry.deliveries >= limits.maxDeliveriesPerConnection) {
      retire(entry);
      return;
    }
    const next = nextWaiter(pool);
    if (next) return next.give(entry);
    entry.idleTimer = setTimeout(() => {
      pool.idle.splice(pool.idle.indexOf(entry), 1);
      retire(entry);
    }, idleMs);
    entry.idleTimer.unref();
    pool.idle.push(entry);
  };

  /**
   * Runs one ask for a slot of the site after the ask before it. Two asks at once would both see the
   * same lowest free slot, and the loser would wait on the winner's row lock and ask again. An ask
   * that hangs holds up the site's next ones no longer than the statement timeout (each of its
   * statements fails then), and meanwhile the queued asks count as open, so other messages wait.
   */
  const askInTurn = <T>(pool: SitePool, ask: () => Promise<T>): Promise<T> => {
    const turn = pool.asking.then(ask);
    pool.asking = turn.catch(() => {});
    return turn;
  };

  const nextWaiter = (pool: SitePool): Waiter | undefined => {
    if (pool.waiters.length === 0) return undefined;
    const served = (w: Waiter) => pool.served.get(w.organizationId) ?? 0;
    let best = 0;
    for (let i = 1; i < pool.waiters.length; i++) {
      const [a, b] = [pool.waiters[i]!, pool.waiters[best]!];
      if ((a.fresh && !b.fresh) || (a.fresh === b.fresh && served(a) < served(b))) best = i;
    }
    return pool.waiters.splice(best, 1)[0];
  };

  /** An idle connection, a new one on a free slot, or one handed over within waitMs; undefined if none. */
  async function connectionFor<C extends ShapedConnection>(
    request: ShapeRequest,
    key: SiteKey,
    connect: () => Promise<C>,
  ): Promise<Entry | Held | undefined> {
    const pool = poolOf(key);
    const deadline = Date.now() + waitMs;
    for (;;) {
      // The newest idle connection this message may use (a domain that requires verified TLS takes only
      // a connection verified for one of its MX hosts); one it may not use keeps waiting for others.
      const at = pool.idle.findLastIndex((entry) => request.reuse?.(entry.connection) ?? true);
      if (at >= 0) {
        const idle = pool.idle.splice(at, 1)[0]!;
        clearTimeout(idle.idleTimer);
        return idle;
      }
      const limit = await options.connectionLimit(key);
      // Every slot taken by idle connections this message may not use: close one to open its own.
      if (pool.idle.length > 0 && pool.open >= limit) retire(pool.idle.shift()!);
      // When this process's own connections (and the slots it is giving back) fill the site's limit, no
      // slot can be free in the database: the message waits without asking it (two statements a
      // message, under load, when every slot is busy). A slot being asked for counts as open already, so
      // that two messages of this process do not ask for the one slot left.
      let slot: number | undefined;
      if (pool.open + pool.releasing < limit) {
        pool.open += 1;
        try {
          // An ask whose turn comes after close() takes nothing: the pools' slots are being given back.
          slot = await askInTurn(pool, async () => (closed ? undefined : takeSlot(db, key, holder, leaseMs, now())));
        } finally {
          if (slot === undefined) pool.open -= 1;
        }
      }
      if (slot !== undefined) {
        let token: Awaited<ReturnType<typeof takeToken>>;
        try {
          token = await takeToken(db, key, 'connection', bucketNow());
        } catch (error) {
          await giveSlotBack(key, slot).catch(() => {});
          throw error;
        }
        if (!token.taken) {
          await giveSlotBack(key, slot);
          // The site's pace of new connections: the message waits its turn quietly, as for its message rate.
          const until = new Date(now().getTime() + token.waitMs);
          return { ...held(until, 'throttled', 'new connections to this site are paced'), quiet: true };
        }
        try {
          return { connection: await connect(), key, slot, deliveries: 0 };
        } catch (error) {
          await giveSlotBack(key, slot).catch(() => {});
          throw new ConnectAttemptError(error);
        }
      }
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      // Every slot is held: wait for one of this process's connections to be handed over (or a slot
      // to be freed here), and look at the database again at least every quarter second for the others'.
      const handed = await new Promise<Entry | undefined>((resolve) => {
        const waiter: Waiter = {
          fresh: request.fresh,
          organizationId: request.organizationId,
          give: (entry) => {
            clearTimeout(timer);
            resolve(entry);
          },
        };
        const timer = setTimeout(
          () => {
            pool.waiters.splice(pool.waiters.indexOf(waiter), 1);
            resolve(undefined);
          },
          Math.min(left, pool.open > 0 ? 1000 : 250),
        );
        pool.waiters.push(waiter);
      });
      if (handed && (request.reuse?.(handed.connection) ?? true)) return handed;
      // Handed a connection this message may not use: its slot is freed for a connection of its own.
      if (handed) retire(handed);
    }
  }

  return {
    connectionFor,
    giveBack,
    retire,
    /** The organization got a connection of the site now (the next waiter is the one served least recently). */
    served(key: SiteKey, organizationId: string) {
      poolOf(key).served.set(organizationId, Date.now());
    },
    /**
     * Renews this process's slots; a slot now above its site's limit in force (back-off lowered it) has
     * its connection closed when idle.
     */
    async renew() {
      if ([...pools.values()].every((pool) => pool.open === 0)) return;
      const slots = await renewSlots(db, holder, leaseMs, now());
      for (const slot of slots) {
        if (slot.slot <= slot.connectionLimit) continue;
        const pool = poolOf(slot);
        const idle = pool.idle.find((entry) => entry.slot === slot.slot);
        if (idle) {
          pool.idle.splice(pool.idle.indexOf(idle), 1);
          retire(idle);
        }
      }
    },
    openConnections: () => new Map([...pools].map(([id, pool]) => [id, pool.open])),
    close() {
      closed = true;
      for (const pool of pools.values()) {
        for (const entry of pool.idle.splice(0)) retire(entry);
        for (const waiter of pool.waiters.splice(0)) waiter.give(undefined);
      }
    },
  };
}
