// What traffic shaping is asked and answers: a message's request (its site, its sender, the sources it
// may go through), the hold it may be told to wait in, and the shaper's interface and options
// (shaper.ts makes one).
import type { Database } from '../platform/db/database.ts';
import type { Logger } from '../platform/logger.ts';
import type { HoldDurations } from './adaptive.ts';
import type { SiteLimits } from './limits.ts';
import type { ClassifiedReply } from './reply-classes.ts';
import type { ShapingRule } from './shaping-file.ts';

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

/** A hold of `reason` until `until`, caused by `reply`. */
export const held = (until: Date, reason: HoldReason, reply: string): Held => ({ held: true, until, reason, reply });
