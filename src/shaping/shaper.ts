import type { SiteLimits } from './limits.ts';
import { senderHoldsAt, siteState, type ConfiguredLimits, type SiteKey, type SiteState } from './destination-store.ts';
import { DEFAULT_HOLDS } from './adaptive.ts';
import { DEFAULT_SOURCE } from './egress.ts';
import { giveBackWarmupTurn, takeWarmupTurn } from './warmup.ts';
import { ConnectAttemptError, createConnectionPools, idOf } from './connection-pool.ts';
import { createPace } from './pace.ts';
import { configuredLimits, createSiteReplies } from './site-replies.ts';
import {
  held,
  isHeld,
  type Held,
  type ShapedConnection,
  type ShapeRequest,
  type ShapeTarget,
  type Shaper,
  type ShaperOptions,
} from './shaper-types.ts';

export {
  isHeld,
  type Held,
  type HoldReason,
  type ShapedConnection,
  type ShapeRequest,
  type ShapeTarget,
  type Shaper,
  type ShaperOptions,
} from './shaper-types.ts';

// One process's side of traffic shaping: the SMTP connections it has open to each destination site,
// reused message after message (up to the site's deliveries per connection), each holding one of the
// site's numbered connection slots in the database so that the limit holds across processes. Before a
// message goes out, the site's holds and rate buckets are consulted; a message that cannot go now is
// *held* (it waits without spending a retry attempt) rather than sent into a throttle.
//
// Everything is kept per egress source and site: a message may go through any source of its pool
// (`targets`), each with its own connections, rates, holds and warm-up at the site; the sources take
// turns, and one that is paused or out of today's warm-up allowance is passed over.
//
// This file chooses where a message goes and when, and ties the parts together: the connections
// (connection-pool.ts), the pace (pace.ts) and what replies do to a site (site-replies.ts).

type SenderHold = { pausedUntil: Date; reply: string };

/**
 * How long a process goes by what it last read of a site (its state, its sender holds) before reading
 * again: a pause or a hold set by another process (or the operator) reaches it within this, and a busy
 * site costs its database two reads a second instead of two a message.
 */
const SITE_READ_MS = 500;

export function createShaper(options: ShaperOptions): Shaper {
  const { db } = options;
  const siteReads = new Map<string, { at: number; state: Promise<SiteState> }>();
  const holdReads = new Map<string, { at: number; holds: Promise<Map<string, SenderHold>> }>();
  /** A source's state at a site as last read (within SITE_READ_MS), or read now. */
  const readSite = (key: SiteKey, configured: ConfiguredLimits) => {
    const cached = siteReads.get(idOf(key));
    if (cached && Date.now() - cached.at < SITE_READ_MS) return cached;
    const read = { at: Date.now(), state: siteState(db, key, configured, now()) };
    // A failed read is not kept: the next message reads again.
    read.state.catch(() => siteReads.delete(idOf(key)));
    siteReads.set(idOf(key), read);
    return read;
  };
  /**
   * The sender holds at a destination site, whatever the source: the site refused the sending domain's
   * authentication, which no other source (a relay included) makes any better.
   */
  const readHolds = (site: string) => {
    const cached = holdReads.get(site);
    if (cached && Date.now() - cached.at < SITE_READ_MS) return cached.holds;
    const read = { at: Date.now(), holds: senderHoldsAt(db, site, now()) };
    read.holds.catch(() => holdReads.delete(site));
    holdReads.set(site, read);
    return read.holds;
  };
  /** What this process changed it knows at once. */
  const remember = (key: SiteKey, state: SiteState) => {
    const cached = siteReads.get(idOf(key));
    if (cached) cached.state = Promise.resolve(state);
  };
  const now = options.now ?? (() => new Date());
  /** The time rate buckets are counted in: the injected clock, else the database's (one for all processes). */
  const bucketNow = () => (options.now ? now() : undefined);
  const leaseMs = options.leaseMs ?? 15_000;
  const maxInlineWaitMs = options.maxInlineWaitMs ?? 2_000;
  const limitsOf = (key: SiteKey): SiteLimits => options.limitsFor(key.site, key.source);
  const pools = createConnectionPools({
    db,
    log: options.log,
    now,
    bucketNow,
    connectionLimit: async (key) => (await readSite(key, configuredLimits(limitsOf(key))).state).connectionLimit,
    leaseMs,
    waitMs: options.waitMs ?? 5_000,
    idleMs: options.idleMs ?? 2_000,
  });
  const pace = createPace({ db, now, bucketNow, maxInlineWaitMs });
  const replies = createSiteReplies({
    db,
    limitsFor: options.limitsFor,
    holds: options.holds ?? DEFAULT_HOLDS,
    rules: options.rules ?? [],
    now,
    remember,
    forgetHolds: (site) => holdReads.delete(site),
    sendingPerMinute: pace.sendingPerMinute,
  });
  /** Per set of targets, the next to take its turn first. */
  const turns = new Map<string, number>();

  /** The hold the message is in now (the site paused, or its sender held there), by the site as last read. */
  async function holdNow(request: ShapeRequest, key: SiteKey, configured: ConfiguredLimits): Promise<Held | undefined> {
    const state = await readSite(key, configured).state;
    if (state.pausedUntil && state.pausedUntil > now()) {
      const reason = state.pauseReason === 'throttled' ? 'throttled' : 'site_paused';
      const pause = held(state.pausedUntil, reason, state.pauseReply ?? `${key.site} is paused`);
      // A throttle's pause that ends within a moment (a rate throttle's second) is a wait like the
      // site's pace, not a hold to tell anyone about.
      const moment = reason === 'throttled' && state.pausedUntil.getTime() - now().getTime() <= maxInlineWaitMs;
      return moment ? { ...pause, quiet: true } : pause;
    }
    const senderHeld = (await readHolds(request.destination ?? request.site)).get(request.senderDomain);
    if (senderHeld && senderHeld.pausedUntil > now()) {
      return held(senderHeld.pausedUntil, 'sender_paused', senderHeld.reply);
    }
    return undefined;
  }

  const renewal = setInterval(() => {
    replies
      .flushSuccesses()
      .catch((error: unknown) => options.log.warn({ err: error }, 'could not record deliveries per site'));
    pools.renew().catch((error: unknown) => options.log.warn({ err: error }, 'could not renew connection slots'));
  }, leaseMs / 3);
  renewal.unref();

  /**
   * Where the message goes now: the first of its targets, in turn, that is not on hold and has warm-up
   * allowance left (its turn taken); the pool's overflow when every warming one is out of allowance; or
   * the hold it waits in (the one that ends first).
   */
  async function chooseTarget(
    request: ShapeRequest,
  ): Promise<{ target: ShapeTarget; key: SiteKey; warmupTaken: boolean } | Held> {
    const targets = request.targets ?? [{ source: request.source ?? DEFAULT_SOURCE, site: request.site }];
    const regular = targets.filter((target) => !target.overflow);
    const overflow = targets.find((target) => target.overflow);
    const turnKey = targets.map((target) => idOf(target)).join(' ');
    const first = turns.get(turnKey) ?? 0;
    turns.set(turnKey, (first + 1) % Math.max(1, regular.length));
    let soonest: Held | undefined;
    let overAllowance = false;
    const keep = (hold: Held) => {
      if (!soonest || hold.until < soonest.until) soonest = hold;
    };
    for (let i = 0; i < regular.length; i++) {
      const target = regular[(first + i) % regular.length]!;
      const key = { source: target.source, site: target.site };
      const configured = configuredLimits(options.limitsFor(key.site, key.source));
      await readSite(key, configured).state;
      const onHold = await holdNow(request, key, configured);
      if (onHold) {
        keep(onHold);
        continue;
      }
      if (target.warmup) {
        const turn = await takeWarmupTurn(db, key, target.warmup, request.recipients ?? 1, now());
        if (!turn.taken) {
          overAllowance = true;
          const reply = `${target.source} is warming up at ${target.site}: ${turn.sent} of today's ${turn.allowance} sent`;
          // Spread over the first minute of the release, so that a backlog does not wake all at once.
          keep(held(new Date(turn.until.getTime() + Math.random() * 60_000), 'warming_up', reply));
          continue;
        }
        return { target, key, warmupTaken: true };
      }
      return { target, key, warmupTaken: false };
    }
    // Mail over the warming sources' allowance goes to the overflow (a warm source or a relay), if any.
    if (overflow && (overAllowance || regular.length === 0)) {
      const key = { source: overflow.source, site: overflow.site };
      const configured = configuredLimits(options.limitsFor(key.site, key.source));
      await readSite(key, configured).state;
      const onHold = await holdNow(request, key, configured);
      if (!onHold) return { target: overflow, key, warmupTaken: false };
      keep(onHold);
    }
    return soonest!;
  }

  return {
    async run<C extends ShapedConnection, T>(
      request: ShapeRequest,
      connect: (target: ShapeTarget) => Promise<C>,
      use: (connection: C, target: ShapeTarget) => Promise<T>,
    ): Promise<T | Held> {
      const chosen = await chooseTarget(request);
      if (isHeld(chosen)) return chosen;
      const { target, key } = chosen;
      const limits = options.limitsFor(key.site, key.source);
      const configured = configuredLimits(limits);
      // A warm-up turn the message does not use now goes back to the day it was taken on. A connection
      // that fails is an attempt like a deferral: its turn is kept (and its reply counted).
      const takenAt = now();
      const notNow = async <H>(value: H): Promise<H> => {
        if (chosen.warmupTaken) await giveBackWarmupTurn(db, key, request.recipients ?? 1, takenAt).catch(() => {});
        return value;
      };
      const state = await readSite(key, configured).state.catch(async (error: unknown) => {
        throw await notNow(error);
      });
      if (state.messageRate !== undefined) {
        const waited = await pace.waitForTurn(key, state.messageRate).catch(async (error: unknown) => {
          throw await notNow(error);
        });
        if (waited) return notNow(waited);
      }
      const entry = await pools
        .connectionFor(request, key, () => connect(target))
        .catch(async (error: unknown) => {
          // Before a connection was tried (its slot could not be read), the turn was not used.
          throw error instanceof ConnectAttemptError ? error.cause : await notNow(error);
        });
      if (entry === undefined) {
        // Busy: back in a moment, spread so that the waiting messages do not all return at once. This is
        // the site's queue doing its work, not a throttle: nothing is written to the timeline.
        const until = new Date(now().getTime() + 1_000 + Math.random() * 3_000);
        const busy = held(until, 'throttled', `all ${state.connectionLimit} connections to ${key.site} are busy`);
        return notNow({ ...busy, quiet: true });
      }
      if ('held' in entry) return notNow(entry);
      // A pause or hold that came while this message waited for its turn or its connection (another
      // message's 421, the operator) stops it too: not one more message into a hold.
      const heldMeanwhile = await holdNow(request, key, configured).catch(async (error: unknown) => {
        pools.giveBack(entry, limits);
        throw await notNow(error);
      });
      if (heldMeanwhile) {
        pools.giveBack(entry, limits);
        return notNow(heldMeanwhile);
      }
      pools.served(key, request.organizationId);
      pace.noteStart(key);
      try {
        const value = await use(entry.connection as C, target);
        entry.deliveries += 1;
        pools.giveBack(entry, limits);
        return value;
      } catch (error) {
        pools.retire(entry);
        throw error;
      }
    },

    reply: (request, reply, cls) => replies.reply(request, reply, cls),

    async unused(request) {
      if (!request.warmup) return;
      const key = { source: request.source ?? DEFAULT_SOURCE, site: request.site };
      await giveBackWarmupTurn(db, key, request.recipients ?? 1, now()).catch(() => {});
    },

    openConnections: () => pools.openConnections(),

    async close() {
      clearInterval(renewal);
      pools.close();
      await replies.flushSuccesses().catch(() => {});
    },
  };
}
