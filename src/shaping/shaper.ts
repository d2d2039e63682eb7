import { randomUUID } from 'node:crypto';
import type { Database } from '../platform/db/database.ts';
import type { Logger } from '../platform/logger.ts';
import { ratePerMinute, type SiteLimits } from './limits.ts';
import {
  holdSender,
  releaseSlot,
  renewSlots,
  senderHoldsAt,
  siteState,
  takeSlot,
  takeToken,
  updateSite,
  type ConfiguredLimits,
  type SiteKey,
  type SiteState,
} from './destination-store.ts';

type SenderHold = { pausedUntil: Date; reply: string };
import {
  DEFAULT_HOLDS,
  onHold,
  onRateThrottle,
  onSuccess,
  onThrottle,
  type AdaptiveState,
  type HoldDurations,
} from './adaptive.ts';
import type { ClassifiedReply } from './reply-classes.ts';
import type { ShapingRule } from './shaping-file.ts';
import { destinationThrottles } from '../platform/metrics.ts';
import { siteLabel } from './sites.ts';
import { DEFAULT_SOURCE } from './egress.ts';
import { giveBackWarmupTurn, recordWarmupReply, takeWarmupTurn, type WarmupReply } from './warmup.ts';

// One process's side of traffic shaping: the SMTP connections it has open to each destination site,
// reused message after message (up to the site's deliveries per connection), each holding one of the
// site's numbered connection slots in the database so that the limit holds across processes. Before a
// message goes out, the site's holds and rate buckets are consulted; a message that cannot go now is
// *held* (it waits without spending a retry attempt) rather than sent into a throttle.
//
// Everything is kept per egress source and site: a message may go through any source of its pool
// (`targets`), each with its own connections, rates, holds and warm-up at the site; the sources take
// turns, and one that is paused or out of today's warm-up allowance is passed over.

export type HoldReason = 'throttled' | 'site_paused' | 'sender_paused' | 'warming_up';

/** The message is not sent now: it waits until `until`, for `reason`. */
export interface Held {
  held: true;
  until: Date;
  reason: HoldReason;
  /** What caused it: the provider's reply, the operator's words, or the limit that was reached. */
  reply: string;
  /** A moment's wait in the queue (every connection busy), not a hold to tell anyone about. */
  quiet?: boolean;
}

export const isHeld = (value: unknown): value is Held =>
  typeof value === 'object' && value !== null && (value as Held).held === true;

/** A connection the shaper keeps: how it is closed, and whether it can still carry another message. */
export interface ShapedConnection {
  close(): void;
  readonly usable: boolean;
}

/** One way a message can go: a source, and the site its connections count against from that source. */
export interface ShapeTarget {
  source: string;
  /** The destination site, or `relay` for a relay source. */
  site: string;
  /** The warm-up stages (daily volumes) while the source is warming up; undefined: a warm source. */
  warmup?: readonly number[];
  /** The pool's overflow: used only for mail over its warming sources' allowance. */
  overflow?: boolean;
}

export interface ShapeRequest {
  /** The destination site (of the recipient domain), or `relay`; with `source`, the key that a reply counts against. */
  site: string;
  /** The source the message went through (replies); default: `default`. */
  source?: string;
  /** The ways the message may go, in the order they take turns; default: `source` at `site`. */
  targets?: readonly ShapeTarget[];
  /** The warm-up stages of `source` at `site` while it is warming up (replies count towards its days). */
  warmup?: readonly number[];
  /**
   * The recipient domain's site when `site` is another (`relay`, for a relay source): sender holds are
   * kept there. Default: `site`.
   */
  destination?: string;
  /**
   * Whether the message may go over a kept connection (opened for another message of the site): a domain
   * that requires verified TLS takes only one verified for an MX host it names. Default: any.
   */
  reuse?: (connection: ShapedConnection) => boolean;
  /** Recipients in the transaction (or, in a reply, that got it): what a warm-up turn or reply counts (default 1). */
  recipients?: number;
  /** The sending domain (a sender hold at this site keeps its mail back). */
  senderDomain: string;
  organizationId: string;
  /** A first attempt (not a retry): goes before retries when connections are scarce. */
  fresh: boolean;
}

export interface ShaperOptions {
  db: Database;
  /** A site's limits (from `source`: a relay source's own limits apply over the site's). */
  limitsFor(site: string, source?: string): SiteLimits;
  /** Hold durations by key (the shaping file's `[holds]`). */
  holds?: HoldDurations;
  /** The shaping file's `[[rule]]`s: a reply whose text matches the first one pauses or lowers as it says. */
  rules?: readonly ShapingRule[];
  log: Pick<Logger, 'warn'>;
  now?: () => Date;
  /** How long a connection slot is leased; renewed every third of it while the connection is open. */
  leaseMs?: number;
  /** How long a message waits in this process for a connection of a busy site before it is held. */
  waitMs?: number;
  /**
   * How far ahead a message books its turn in the site's pace and waits for it in the worker; a message
   * whose turn is further off waits in the queue.
   */
  maxInlineWaitMs?: number;
  /**
   * An idle connection is closed (and its slot given back) after this long: 2 s, as Postfix keeps a
   * connection for the next message (smtp_connection_cache_time_limit), so that a connection a process
   * no longer needs does not keep a slot from another process that does.
   */
  idleMs?: number;
}

export interface Shaper {
  /**
   * Sends over a connection to the site: an idle one of this process, or a new one (`connect`) on a free
   * slot. `use` returns its value and whether the connection may carry another message. Returns Held
   * when the message must wait.
   */
  run<C extends ShapedConnection, T>(
    request: ShapeRequest,
    connect: (target: ShapeTarget) => Promise<C>,
    use: (connection: C, target: ShapeTarget) => Promise<T>,
  ): Promise<T | Held>;
  /**
   * What a site answered (classified): a delivery counts towards winning limits back; a throttle lowers
   * the site's limits and pauses it briefly; a provider hold pauses the site, or the sending domain at
   * the site. Returns the hold the message now waits in, when the reply put it in one.
   */
  reply(
    request: ShapeRequest,
    reply: { code: number | undefined; text: string },
    cls: ClassifiedReply,
  ): Promise<Held | undefined>;
  /**
   * The message went nowhere after all (a kept connection turned out closed before any of it was sent):
   * its warm-up turn goes back. `request` names the source, site and warm-up as for a reply.
   */
  unused(request: ShapeRequest): Promise<void>;
  /** Connections open now, per source and site (`source/site`, for metrics). */
  openConnections(): Map<string, number>;
  close(): Promise<void>;
}

interface Entry {
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
  waiters: Waiter[];
  /** When each organization last got a connection here: the longest-waiting organization goes next. */
  served: Map<string, number>;
}

export const configuredLimits = (limits: SiteLimits): ConfiguredLimits => ({
  connectionLimit: limits.connectionLimit,
  messageRate: ratePerMinute(limits.maxMessageRate),
  connectionRate: ratePerMinute(limits.maxConnectionRate),
});

/** The stored state as back-off reads it, and back. */
const adaptiveOf = (state: SiteState): AdaptiveState => ({
  connectionLimit: state.connectionLimit,
  messageRatePerMinute: state.messageRate,
  pausedUntil: state.pausedUntil,
  pauseReason: state.pauseReason,
  holdCount: state.holdCount,
  lastHoldMs: state.lastHoldMs,
  lastHoldUntil: state.lastHoldUntil,
  successes: state.successes,
  lastThrottleAt: state.lastThrottleAt,
});
const storedOf = (before: SiteState, after: AdaptiveState, pauseReply?: string): SiteState => ({
  ...before,
  connectionLimit: after.connectionLimit,
  messageRate: after.messageRatePerMinute,
  pausedUntil: after.pausedUntil,
  pauseReason: after.pauseReason === 'sender_paused' ? before.pauseReason : after.pauseReason,
  pauseReply: after.pausedUntil !== before.pausedUntil && pauseReply !== undefined ? pauseReply : before.pauseReply,
  holdCount: after.holdCount,
  lastHoldMs: after.lastHoldMs,
  lastHoldUntil: after.lastHoldUntil,
  successes: after.successes,
});

/** The limits back-off may climb back to: the configured ones, under a rule's cap while it lasts. */
function cappedLimits(limits: SiteLimits, state: SiteState, now: Date): SiteLimits {
  if (!state.capUntil || state.capUntil <= now) return limits;
  const configuredRate = ratePerMinute(limits.maxMessageRate);
  const rate =
    state.capMessageRate === undefined ? configuredRate : Math.min(configuredRate ?? Infinity, state.capMessageRate);
  return {
    ...limits,
    connectionLimit: Math.min(limits.connectionLimit, state.capConnectionLimit ?? Infinity),
    maxMessageRate: rate === undefined ? undefined : { count: rate, perMs: 60_000 },
  };
}

/** A connection was tried and failed: what `connect` threw, marked so the caller knows an attempt was made. */
class ConnectAttemptError extends Error {
  constructor(cause: unknown) {
    super('connect failed', { cause });
  }
}

/** The key of a source's site in this process's maps. */
const idOf = (key: SiteKey) => `${key.source}/${key.site}`;

/** What a reply counts as in a warming source's day: a block steps its stage back. */
function warmupKind(cls: ClassifiedReply): WarmupReply | undefined {
  if (cls.class === 'delivered') return 'delivered';
  if (cls.class === 'policy_block' || cls.hold?.scope === 'site') return 'blocked';
  if (cls.class === 'throttled' || cls.class === 'too_many_connections' || cls.class === 'deferred') return 'deferred';
  return undefined;
}

/**
 * How long a process goes by what it last read of a site (its state, its sender holds) before reading
 * again: a pause or a hold set by another process (or the operator) reaches it within this, and a busy
 * site costs its database two reads a second instead of two a message.
 */
const SITE_READ_MS = 500;

/** The window over which a process counts the messages it started to a site: a rate throttle's "now". */
const SENDING_WINDOW_MS = 1_000;

export function createShaper(options: ShaperOptions): Shaper {
  const { db } = options;
  const rules = options.rules ?? [];
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
  const holds = options.holds ?? DEFAULT_HOLDS;
  /** Deliveries per site since the last flush: written with the slot renewal, not one write each. */
  const successes = new Map<string, { key: SiteKey; count: number }>();
  const now = options.now ?? (() => new Date());
  /** The time rate buckets are counted in: the injected clock, else the database's (one for all processes). */
  const bucketNow = () => (options.now ? now() : undefined);
  const leaseMs = options.leaseMs ?? 15_000;
  const waitMs = options.waitMs ?? 5_000;
  const maxInlineWaitMs = options.maxInlineWaitMs ?? 2_000;
  const idleMs = options.idleMs ?? 2_000;
  const holder = randomUUID();
  const pools = new Map<string, SitePool>();
  /** Per site, when this process started its messages there within the last SENDING_WINDOW_MS. */
  const started = new Map<string, number[]>();
  const noteStart = (key: SiteKey) => {
    const at = now().getTime();
    const times = (started.get(idOf(key)) ?? []).filter((time) => at - time < SENDING_WINDOW_MS);
    times.push(at);
    started.set(idOf(key), times);
  };
  /** The rate this process was sending to the site at, as messages a minute (at least the one answered). */
  const sendingPerMinute = (key: SiteKey) => {
    const at = now().getTime();
    const recent = (started.get(idOf(key)) ?? []).filter((time) => at - time < SENDING_WINDOW_MS).length;
    return (Math.max(1, recent) * 60_000) / SENDING_WINDOW_MS;
  };
  /** Per site, this process's messages waiting for the site's pace: how many, and the last one's turn to ask. */
  const paceLines = new Map<string, { waiting: number; tail: Promise<void> }>();
  let closed = false;

  const poolOf = (key: SiteKey): SitePool => {
    let pool = pools.get(idOf(key));
    if (!pool) pools.set(idOf(key), (pool = { idle: [], open: 0, waiters: [], served: new Map() }));
    return pool;
  };
  /** Per set of targets, the next to take its turn first. */
  const turns = new Map<string, number>();
  const held = (until: Date, reason: HoldReason, reply: string): Held => ({ held: true, until, reason, reply });

  /** Closes a connection and gives its slot back. */
  const retire = (entry: Entry) => {
    clearTimeout(entry.idleTimer);
    poolOf(entry.key).open -= 1;
    entry.connection.close();
    releaseSlot(db, entry.key, entry.slot, holder).catch((error: unknown) =>
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
      // The slot is free: a waiter may open its own.
      nextWaiter(pool)?.give(undefined);
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
      // Every slot taken by idle connections this message may not use: close one to open its own.
      if (
        pool.idle.length > 0 &&
        pool.open >=
          (await readSite(key, configuredLimits(options.limitsFor(key.site, key.source))).state).connectionLimit
      ) {
        retire(pool.idle.shift()!);
      }
      const slot = await takeSlot(db, key, holder, leaseMs, now());
      if (slot !== undefined) {
        const { taken, waitMs: connectionWait } = await takeToken(db, key, 'connection', bucketNow());
        if (!taken) {
          await releaseSlot(db, key, slot, holder);
          // The site's pace of new connections: the message waits its turn quietly, as for its message rate.
          const until = new Date(now().getTime() + connectionWait);
          return { ...held(until, 'throttled', 'new connections to this site are paced'), quiet: true };
        }
        pool.open += 1;
        try {
          return { connection: await connect(), key, slot, deliveries: 0 };
        } catch (error) {
          pool.open -= 1;
          await releaseSlot(db, key, slot, holder).catch(() => {});
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

  /**
   * Books the message's turn in the site's pace. The messages of this process waiting for a site's pace
   * stand in one line and ask the database one at a time (one statement a turn, not one per waiting
   * message); each books the next turn within maxInlineWaitMs and waits for it here. A message that
   * would stand behind more than maxInlineWaitMs of turns goes back to the queue for about that long
   * (quietly: it is the site's pace, not a throttle), so a slow site does not take every worker slot.
   */
  async function waitForTurn(request: ShapeRequest, key: SiteKey, messageRate: number): Promise<Held | undefined> {
    let line = paceLines.get(idOf(key));
    if (!line) paceLines.set(idOf(key), (line = { waiting: 0, tail: Promise.resolve() }));
    const turnMs = 60_000 / messageRate;
    const rule = `at most ${Math.round(messageRate)} messages a minute to ${key.site}`;
    const behind = line.waiting * turnMs;
    if (behind > maxInlineWaitMs) {
      const until = new Date(now().getTime() + behind + Math.random() * turnMs);
      return { ...held(until, 'throttled', rule), quiet: true };
    }
    line.waiting += 1;
    const previous = line.tail;
    let leave!: () => void;
    line.tail = new Promise<void>((resolve) => (leave = resolve));
    let inLine = true;
    const stepOut = () => {
      if (!inLine) return;
      inLine = false;
      line.waiting -= 1;
      leave();
    };
    try {
      await previous;
      for (;;) {
        const turn = await takeToken(db, key, 'message', bucketNow(), maxInlineWaitMs);
        if (turn.taken) {
          stepOut(); // the next in line may book the turn after this one
          if (turn.waitMs > 0) await new Promise((resolve) => setTimeout(resolve, turn.waitMs));
          return undefined;
        }
        if (turn.waitMs > maxInlineWaitMs) {
          return { ...held(new Date(now().getTime() + turn.waitMs), 'throttled', rule), quiet: true };
        }
        await new Promise((resolve) => setTimeout(resolve, turn.waitMs));
      }
    } finally {
      stepOut();
    }
  }

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

  /** Applies the deliveries counted since the last flush to their sites' limits. */
  const flushSuccesses = async () => {
    for (const [id, { key, count }] of [...successes]) {
      successes.delete(id);
      const limits = options.limitsFor(key.site, key.source);
      const flushed = await updateSite(db, key, configuredLimits(limits), now(), (state) => {
        let adaptive = adaptiveOf(state);
        const ceiling = cappedLimits(limits, state, now());
        for (let i = 0; i < count; i++) adaptive = onSuccess(adaptive, ceiling, now());
        return storedOf(state, adaptive);
      });
      remember(key, flushed);
    }
  };

  /** A shaping-file rule matched the reply: it pauses the site (or the sender there), or lowers the limits. */
  async function applyRule(
    request: ShapeRequest,
    key: SiteKey,
    rule: ShapingRule,
    reply: { code: number | undefined; text: string },
  ): Promise<Held | undefined> {
    const until = new Date(now().getTime() + rule.durationMs);
    destinationThrottles.inc({
      site: siteLabel(request.site),
      class: rule.action === 'pause' ? 'rule_pause' : 'rule_lower',
    });
    if (rule.action === 'pause' && rule.scope === 'sender') {
      const destination = request.destination ?? request.site;
      await holdSender(db, destination, request.senderDomain, until, reply.text);
      holdReads.delete(destination);
      return held(until, 'sender_paused', reply.text);
    }
    const limits = options.limitsFor(key.site, key.source);
    const after = await updateSite(
      db,
      key,
      configuredLimits(limits),
      now(),
      (state) => {
        if (rule.action === 'pause') {
          const later = state.pausedUntil && state.pausedUntil > until ? state.pausedUntil : until;
          return { ...state, pausedUntil: later, pauseReason: 'site_paused', pauseReply: reply.text };
        }
        const cap = configuredLimits({ ...limits, ...rule.limits });
        return {
          ...state,
          connectionLimit: Math.min(state.connectionLimit, cap.connectionLimit),
          messageRate:
            cap.messageRate === undefined
              ? state.messageRate
              : Math.min(state.messageRate ?? Infinity, cap.messageRate),
          capUntil: until,
          capConnectionLimit: rule.limits.connectionLimit,
          capMessageRate: rule.limits.maxMessageRate ? cap.messageRate : undefined,
          successes: 0,
        };
      },
      { code: reply.code, text: reply.text, throttle: true },
    );
    remember(key, after);
    if (rule.action === 'pause') return held(after.pausedUntil!, 'site_paused', reply.text);
    // Lowered: a temporary refusal waits a moment for the slower pace instead of spending an attempt.
    if (reply.code !== undefined && reply.code >= 500) return undefined;
    return { ...held(new Date(now().getTime() + 5_000), 'throttled', reply.text), quiet: true };
  }

  /**
   * A message came over the site's rate (counted per second or minute): the rate is lowered and the
   * message waits quietly for the site's short pause to pass, then goes at the slower pace; the try
   * does not count.
   */
  async function rateThrottle(key: SiteKey, reply: { code: number | undefined; text: string }) {
    const limits = options.limitsFor(key.site, key.source);
    const sending = sendingPerMinute(key);
    const after = await updateSite(
      db,
      key,
      configuredLimits(limits),
      now(),
      (state) => {
        const ceiling = cappedLimits(limits, state, now());
        return storedOf(state, onRateThrottle(adaptiveOf(state), ceiling, now(), sending, holds), reply.text);
      },
      { code: reply.code, text: reply.text, throttle: true },
    );
    remember(key, after);
    const pausedUntil = after.pausedUntil && after.pausedUntil > now() ? after.pausedUntil : now();
    if (after.pauseReason === 'site_paused') return held(pausedUntil, 'site_paused', reply.text);
    // Spread over one turn of the new pace, so that the messages throttled together do not all return at once.
    const turnMs = after.messageRate === undefined ? 1_000 : 60_000 / after.messageRate;
    const until = new Date(pausedUntil.getTime() + Math.random() * Math.min(turnMs, 5_000));
    return { ...held(until, 'throttled', reply.text), quiet: true };
  }

  const renewal = setInterval(() => {
    flushSuccesses().catch((error: unknown) =>
      options.log.warn({ err: error }, 'could not record deliveries per site'),
    );
    if ([...pools.values()].every((pool) => pool.open === 0)) return;
    renewSlots(db, holder, leaseMs, now())
      .then((slots) => {
        // A slot above the site's limit in force (back-off lowered it): its connection closes when idle.
        for (const slot of slots) {
          if (slot.slot <= slot.connectionLimit) continue;
          const pool = poolOf(slot);
          const idle = pool.idle.find((entry) => entry.slot === slot.slot);
          if (idle) {
            pool.idle.splice(pool.idle.indexOf(idle), 1);
            retire(idle);
          }
        }
      })
      .catch((error: unknown) => options.log.warn({ err: error }, 'could not renew connection slots'));
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
        const waited = await waitForTurn(request, key, state.messageRate).catch(async (error: unknown) => {
          throw await notNow(error);
        });
        if (waited) return notNow(waited);
      }
      const entry = await connectionFor(request, key, () => connect(target)).catch(async (error: unknown) => {
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
        giveBack(entry, limits);
        throw await notNow(error);
      });
      if (heldMeanwhile) {
        giveBack(entry, limits);
        return notNow(heldMeanwhile);
      }
      const pool = poolOf(key);
      pool.served.set(request.organizationId, Date.now());
      noteStart(key);
      try {
        const value = await use(entry.connection as C, target);
        entry.deliveries += 1;
        giveBack(entry, limits);
        return value;
      } catch (error) {
        retire(entry);
        throw error;
      }
    },

    async reply(request, reply, cls) {
      const key = { source: request.source ?? DEFAULT_SOURCE, site: request.site };
      if (request.warmup) {
        const kind = warmupKind(cls);
        if (kind) {
          const count = request.recipients ?? 1;
          await recordWarmupReply(db, key, request.warmup, { kind, text: reply.text, count }, now());
        }
      }
      if (cls.class === 'delivered') {
        const counted = successes.get(idOf(key));
        successes.set(idOf(key), { key, count: (counted?.count ?? 0) + 1 });
        return undefined;
      }
      const text = reply.text;
      const rule = rules.find((candidate) => candidate.regex.test(text));
      if (rule) return applyRule(request, key, rule, reply);
      if (cls.hold?.scope === 'sender') {
        destinationThrottles.inc({ site: siteLabel(request.site), class: cls.class });
        const until = new Date(now().getTime() + Math.min(holds[cls.hold.key] ?? holds.sender_fault!, holds.max!));
        const destination = request.destination ?? request.site;
        await holdSender(db, destination, request.senderDomain, until, text);
        holdReads.delete(destination);
        return held(until, 'sender_paused', text);
      }
      const throttle = cls.class === 'throttled' || cls.class === 'too_many_connections';
      if (!cls.hold && !throttle) return undefined;
      destinationThrottles.inc({ site: siteLabel(request.site), class: cls.class });
      if (cls.rateLimit && !cls.hold) return rateThrottle(key, reply);
      const limits = options.limitsFor(key.site, key.source);
      const after = await updateSite(
        db,
        key,
        configuredLimits(limits),
        now(),
        (state) => {
          const adaptive = adaptiveOf(state);
          const changed = cls.hold
            ? onHold(adaptive, cls.hold, now(), holds)
            : onThrottle(adaptive, limits, now(), holds);
          return storedOf(state, changed, text);
        },
        { code: reply.code, text, throttle: true },
      );
      remember(key, after);
      if (!after.pausedUntil || after.pausedUntil <= now()) return undefined;
      return held(after.pausedUntil, after.pauseReason === 'site_paused' ? 'site_paused' : 'throttled', text);
    },

    async unused(request) {
      if (!request.warmup) return;
      const key = { source: request.source ?? DEFAULT_SOURCE, site: request.site };
      await giveBackWarmupTurn(db, key, request.recipients ?? 1, now()).catch(() => {});
    },

    openConnections: () => new Map([...pools].map(([id, pool]) => [id, pool.open])),

    async close() {
      closed = true;
      clearInterval(renewal);
      await flushSuccesses().catch(() => {});
      for (const pool of pools.values()) {
        for (const entry of pool.idle.splice(0)) retire(entry);
        for (const waiter of pool.waiters.splice(0)) waiter.give(undefined);
      }
    },
  };
}
