import type { Database } from '../platform/db/database.ts';
import { destinationThrottles } from '../platform/metrics.ts';
import { onHold, onRateThrottle, onSuccess, onThrottle, type AdaptiveState, type HoldDurations } from './adaptive.ts';
import { holdSender, updateSite, type ConfiguredLimits, type SiteKey, type SiteState } from './destination-store.ts';
import { DEFAULT_SOURCE } from './egress.ts';
import { ratePerMinute, type SiteLimits } from './limits.ts';
import type { ClassifiedReply } from './reply-classes.ts';
import { held, type Held, type ShapeRequest } from './shaper-types.ts';
import type { ShapingRule } from './shaping-file.ts';
import { siteLabel } from './sites.ts';
import { recordWarmupReply, type WarmupReply } from './warmup.ts';
import { idOf } from './connection-pool.ts';

// What a site's replies do to its shared state: back-off (adaptive.ts) applied under the site's row
// lock, the shaping file's rules, sender holds, a warming source's day, and the deliveries that win
// limits back, counted in memory and written in batches.

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

/** What a reply counts as in a warming source's day: a block steps its stage back. */
function warmupKind(cls: ClassifiedReply): WarmupReply | undefined {
  if (cls.class === 'delivered') return 'delivered';
  if (cls.class === 'policy_block' || cls.hold?.scope === 'site') return 'blocked';
  if (cls.class === 'throttled' || cls.class === 'too_many_connections' || cls.class === 'deferred') return 'deferred';
  return undefined;
}

export interface SiteRepliesOptions {
  db: Database;
  limitsFor(site: string, source?: string): SiteLimits;
  holds: HoldDurations;
  rules: readonly ShapingRule[];
  now: () => Date;
  /** What this process changed: the site's state as now stored. */
  remember(key: SiteKey, state: SiteState): void;
  /** A sender hold was written at this destination site: read its holds again. */
  forgetHolds(site: string): void;
  /** The rate this process was sending to the site at, as messages a minute. */
  sendingPerMinute(key: SiteKey): number;
}

export function createSiteReplies(options: SiteRepliesOptions) {
  const { db, holds, rules, now, remember } = options;
  /** Deliveries per site since the last flush: written with the slot renewal, not one write each. */
  const successes = new Map<string, { key: SiteKey; count: number }>();

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

  /** Holds this sending domain at the destination until `until`, for every process (the reply says why). */
  async function pauseSender(request: ShapeRequest, until: Date, text: string): Promise<Held> {
    const destination = request.destination ?? request.site;
    await holdSender(db, destination, request.senderDomain, until, text);
    options.forgetHolds(destination);
    return held(until, 'sender_paused', text);
  }

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
    if (rule.action === 'pause' && rule.scope === 'sender') return pauseSender(request, until, reply.text);
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
    const sending = options.sendingPerMinute(key);
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

  /**
   * What a site answered (classified): a delivery counts towards winning limits back; a throttle lowers
   * the site's limits (a rate throttle its message rate) and pauses it briefly; a provider hold pauses
   * the site, or the sending domain at the site. Returns the hold the message now waits in, when the
   * reply put it in one.
   */
  async function reply(
    request: ShapeRequest,
    reply: { code: number | undefined; text: string },
    cls: ClassifiedReply,
  ): Promise<Held | undefined> {
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
      return pauseSender(request, until, text);
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
  }

  return { reply, flushSuccesses };
}
