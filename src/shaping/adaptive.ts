// Adaptive back-off for one destination site (or one sending domain at a site): how many connections
// and how many messages a minute it gets right now, below its configured limits, and whether it is
// paused. Pure functions of the state, the limits, the reply and the clock (`now` is always passed in),
// so every worker computes the same thing from the same history and tests drive time by hand.
//
// - A throttle reply halves the connections and the message rate (never below 1) and pauses briefly.
// - A rate throttle (a message over a rate the site counts per second or minute) halves only the
//   message rate, setting one where none is configured, and pauses for a second: a slower pace is
//   the answer, not minutes of silence. A rate set that way is lifted after RATE_QUIET_MS without a
//   throttle.
// - Successes win them back one step at a time: one more connection and 10% more rate after every
//   SUCCESSES_PER_STEP deliveries, never above the configured limits.
// - A provider hold pauses the site (or the sending domain at the site) for the hold's duration,
//   doubled for each hold that comes back within HOLD_REPEAT_WINDOW_MS of the previous one's end and
//   capped at `max`; afterwards the site restarts at ONE connection and climbs back additively.

import { BUILT_IN_HOLDS, ratePerMinute } from './limits.ts';
import type { ReplyHold } from './reply-classes.ts';

/** The configured limits this module needs (the site's limits from the shaping file fit this shape). */
export interface AdaptiveLimits {
  connectionLimit: number;
  maxMessageRate?: { count: number; perMs: number } | undefined;
}

export type PauseReason = 'throttled' | 'site_paused' | 'sender_paused';

export interface AdaptiveState {
  /** Connections allowed at once now (1 ≤ this ≤ the configured limit). */
  connectionLimit: number;
  /** Messages allowed a minute now, or undefined when the site has no configured rate. */
  messageRatePerMinute: number | undefined;
  /** No delivery starts before this (a throttle's or a hold's pause). */
  pausedUntil: Date | undefined;
  pauseReason: PauseReason | undefined;
  /** How many holds in a row, each within the repeat window of the previous one's end. */
  holdCount: number;
  /** The length of the last hold's pause. */
  lastHoldMs: number | undefined;
  /**
   * When the last hold's pause ends (or ended): the repeat window counts from here. A state stored
   * without it counts from `pausedUntil` while `pauseReason` still names a hold.
   */
  lastHoldUntil?: Date | undefined;
  /** Successes since the last step up (or the last throttle or hold). */
  successes: number;
  /** When the site last answered with a throttle (of any kind, or a shaping-file rule's match). */
  lastThrottleAt?: Date | undefined;
}

/**
 * Pause lengths in milliseconds, by hold key, as the shaping file's `[holds]` table gives them. Two
 * keys are not holds: `throttle` (the short pause after a plain throttle reply) and `max` (the cap of
 * every pause, however often a hold repeats).
 */
export type HoldDurations = Readonly<Record<string, number>>;

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/**
 * The built-in pauses: the shaping file's built-in `[holds]` (Gmail's rate limit 10 minutes, Yahoo's
 * TSS04 2 hours as KumoMTA's shipped rules suspend it, a plain throttle 5 minutes, never more than 4
 * hours), and half an hour for a sender fault: failing SPF, DKIM or DMARC needs a person to fix DNS,
 * and retrying sooner only adds failures to the domain's reputation.
 */
export const DEFAULT_HOLDS: HoldDurations = { ...BUILT_IN_HOLDS };

/** Successes that win back one connection (and 10% of the rate). */
export const SUCCESSES_PER_STEP = 20;
/** A hold that comes back within this long after the previous hold's end doubles. */
export const HOLD_REPEAT_WINDOW_MS = HOUR;
const RATE_STEP = 1.1;
/** The slowest a throttled rate goes: one message a minute (or the configured rate, if slower). */
const MIN_RATE_PER_MINUTE = 1;
/**
 * A rate a rate throttle set at a site with no configured rate is lifted once the site has gone this
 * long without a throttle: the provider's limit may have been raised, and a lowered rate is no longer
 * what it asks for.
 */
export const RATE_QUIET_MS = 10 * MINUTE;

/** A site's state before any reply: at its configured limits, not paused. */
export function initialState(limits: AdaptiveLimits): AdaptiveState {
  return {
    connectionLimit: Math.max(1, limits.connectionLimit),
    messageRatePerMinute: configuredRatePerMinute(limits),
    pausedUntil: undefined,
    pauseReason: undefined,
    holdCount: 0,
    lastHoldMs: undefined,
    lastHoldUntil: undefined,
    successes: 0,
  };
}

/**
 * A throttle reply (throttled, too_many_connections): halve the connections and the rate (never below
 * 1 connection or 1 message a minute), and pause for `holds.throttle`. A pause already running that
 * ends later (a hold) is kept as it is.
 */
export function onThrottle(
  state: AdaptiveState,
  limits: AdaptiveLimits,
  now: Date,
  holds: HoldDurations = DEFAULT_HOLDS,
): AdaptiveState {
  const pause = Math.min(durationOf('throttle', holds), maxOf(holds));
  const until = new Date(now.getTime() + pause);
  const keepPause = state.pausedUntil !== undefined && state.pausedUntil >= until;
  return {
    ...state,
    connectionLimit: Math.max(1, Math.floor(Math.min(state.connectionLimit, limits.connectionLimit) / 2)),
    messageRatePerMinute: halvedRate(state, limits),
    pausedUntil: keepPause ? state.pausedUntil : until,
    pauseReason: keepPause ? state.pauseReason : 'throttled',
    successes: 0,
    lastThrottleAt: now,
  };
}

/**
 * A rate throttle: halve the message rate in force (where the site has none, the rate it was being
 * sent at, `sendingPerMinute`), keep the connections, and pause for `holds.rate_throttle` while the
 * provider's window passes. A rate throttle during a pause (the replies to messages sent before the
 * rate was lowered, or a hold) lowers nothing more.
 */
export function onRateThrottle(
  state: AdaptiveState,
  limits: AdaptiveLimits,
  now: Date,
  sendingPerMinute: number,
  holds: HoldDurations = DEFAULT_HOLDS,
): AdaptiveState {
  if (!mayStart(state, now)) return { ...state, successes: 0, lastThrottleAt: now };
  const inForce = rateInForce(state, limits) ?? Math.max(MIN_RATE_PER_MINUTE, sendingPerMinute);
  const pause = Math.min(durationOf('rate_throttle', holds), maxOf(holds));
  return {
    ...state,
    messageRatePerMinute: Math.max(Math.min(MIN_RATE_PER_MINUTE, inForce), inForce / 2),
    pausedUntil: new Date(now.getTime() + pause),
    pauseReason: 'throttled',
    successes: 0,
    lastThrottleAt: now,
  };
}

/**
 * A delivery went through: after every SUCCESSES_PER_STEP of them, one more connection and 10% more
 * rate, up to the configured limits (and at once down to them, if the limits were lowered). A rate
 * that a rate throttle set where none is configured climbs the same way, with no ceiling, and is lifted
 * once RATE_QUIET_MS have passed since the last throttle. A success during a pause answers a delivery
 * that started before it: it neither ends the pause nor counts.
 */
export function onSuccess(state: AdaptiveState, limits: AdaptiveLimits, now: Date): AdaptiveState {
  if (!mayStart(state, now)) return state;
  const configuredRate = configuredRatePerMinute(limits);
  if (configuredRate === undefined && state.messageRatePerMinute !== undefined && isQuiet(state, now)) {
    state = { ...state, messageRatePerMinute: undefined };
  }
  const atLimits =
    state.connectionLimit >= limits.connectionLimit &&
    (configuredRate === undefined
      ? state.messageRatePerMinute === undefined
      : (state.messageRatePerMinute ?? 0) >= configuredRate);
  if (atLimits) return { ...state, ...clamped(state, limits), successes: 0 };
  const successes = state.successes + 1;
  if (successes < SUCCESSES_PER_STEP) return { ...state, ...clamped(state, limits), successes };
  const rate = state.messageRatePerMinute ?? configuredRate;
  return {
    ...state,
    connectionLimit: Math.max(1, Math.min(limits.connectionLimit, state.connectionLimit + 1)),
    messageRatePerMinute: rate === undefined ? undefined : Math.min(configuredRate ?? Infinity, rate * RATE_STEP),
    successes: 0,
  };
}

/** Whether the site has gone RATE_QUIET_MS without a throttle. */
function isQuiet(state: AdaptiveState, now: Date): boolean {
  return state.lastThrottleAt === undefined || now.getTime() - state.lastThrottleAt.getTime() >= RATE_QUIET_MS;
}

/**
 * A provider hold: pause until now + its duration, where the duration is the hold key's own for a
 * first hold and twice the previous one for a hold that comes back within HOLD_REPEAT_WINDOW_MS of
 * the previous hold's end, never more than `max`. The state restarts at one connection (and half its
 * rate). A hold that arrives while a hold is running (the other deliveries that were under way when
 * the first came back) is the same episode: it extends the pause to its own first duration at most,
 * and does not count as a repeat.
 */
export function onHold(
  state: AdaptiveState,
  hold: ReplyHold,
  now: Date,
  holds: HoldDurations = DEFAULT_HOLDS,
): AdaptiveState {
  const max = maxOf(holds);
  const first = Math.min(durationOf(hold.key, holds), max);
  const reason: PauseReason = hold.scope === 'site' ? 'site_paused' : 'sender_paused';

  if (isHeld(state, now)) {
    const until = later(state.pausedUntil!, new Date(now.getTime() + first));
    return {
      ...state,
      connectionLimit: 1,
      successes: 0,
      pausedUntil: until,
      lastHoldUntil: later(state.lastHoldUntil, until),
    };
  }

  const lastEnd = state.lastHoldUntil ?? (isHoldReason(state.pauseReason) ? state.pausedUntil : undefined);
  const repeated =
    state.holdCount > 0 && lastEnd !== undefined && now.getTime() - lastEnd.getTime() < HOLD_REPEAT_WINDOW_MS;
  const duration = repeated ? Math.min(max, Math.max(first, 2 * (state.lastHoldMs ?? first))) : first;
  const until = new Date(now.getTime() + duration);
  return {
    ...state,
    connectionLimit: 1,
    messageRatePerMinute: halvedRate(state, undefined),
    successes: 0,
    pausedUntil: state.pausedUntil !== undefined && state.pausedUntil > until ? state.pausedUntil : until,
    pauseReason: reason,
    holdCount: repeated ? state.holdCount + 1 : 1,
    lastHoldMs: duration,
    lastHoldUntil: until,
  };
}

/** Whether a delivery may start now (no pause running). */
export function mayStart(state: AdaptiveState, now: Date): boolean {
  return state.pausedUntil === undefined || state.pausedUntil <= now;
}

/** When deliveries may start again, if a pause is running now. */
export function resumesAt(state: AdaptiveState, now: Date): Date | undefined {
  return mayStart(state, now) ? undefined : state.pausedUntil;
}

/** Whether a provider hold (not a throttle's short pause) is running now. */
export function isHeld(state: AdaptiveState, now: Date): boolean {
  return !mayStart(state, now) && isHoldReason(state.pauseReason);
}

const isHoldReason = (reason: PauseReason | undefined) => reason === 'site_paused' || reason === 'sender_paused';

/** A configured rate as messages a minute. */
export function configuredRatePerMinute(limits: AdaptiveLimits): number | undefined {
  return ratePerMinute(limits.maxMessageRate);
}

/** The message rate in force: the state's, never above the configured one; undefined: none. */
function rateInForce(state: AdaptiveState, limits: AdaptiveLimits | undefined): number | undefined {
  const configured = limits === undefined ? undefined : configuredRatePerMinute(limits);
  if (state.messageRatePerMinute === undefined) return configured;
  return configured === undefined ? state.messageRatePerMinute : Math.min(configured, state.messageRatePerMinute);
}

function halvedRate(state: AdaptiveState, limits: AdaptiveLimits | undefined): number | undefined {
  const current = rateInForce(state, limits);
  if (current === undefined) return undefined;
  // A rate configured below the floor stays where it is: halving never goes under either.
  return Math.max(Math.min(MIN_RATE_PER_MINUTE, current), current / 2);
}

function clamped(
  state: AdaptiveState,
  limits: AdaptiveLimits,
): Pick<AdaptiveState, 'connectionLimit' | 'messageRatePerMinute'> {
  const configuredRate = configuredRatePerMinute(limits);
  return {
    connectionLimit: Math.max(1, Math.min(limits.connectionLimit, state.connectionLimit)),
    // Without a configured rate, a rate a rate throttle set stays until it is lifted (onSuccess).
    messageRatePerMinute:
      configuredRate === undefined
        ? state.messageRatePerMinute
        : Math.min(configuredRate, state.messageRatePerMinute ?? configuredRate),
  };
}

function durationOf(key: string, holds: HoldDurations): number {
  // A key the table does not name (a rule of the shaping file gives its own) pauses like a throttle.
  return holds[key] ?? DEFAULT_HOLDS[key] ?? holds.throttle ?? DEFAULT_HOLDS.throttle!;
}

function maxOf(holds: HoldDurations): number {
  return holds.max ?? DEFAULT_HOLDS.max!;
}

function later(a: Date | undefined, b: Date): Date {
  return a !== undefined && a > b ? a : b;
}
