// The limits a destination site is delivered to with, their built-in values, and the two value
// syntaxes of the shaping file: rates ("100/m") and durations ("10m").

/** `count` events per `perMs` milliseconds. */
export interface Rate {
  count: number;
  perMs: number;
}

/** A rate as events a minute; undefined for no rate (or one that counts over no time). */
export function ratePerMinute(rate: Rate | undefined): number | undefined {
  if (rate === undefined || rate.perMs <= 0) return undefined;
  return (rate.count * 60_000) / rate.perMs;
}

export interface SiteLimits {
  /** Connections open to the site at once, across every worker process. */
  connectionLimit: number;
  /** Messages sent over one connection before it is closed and another opened. */
  maxDeliveriesPerConnection: number;
  /** Messages started per time unit; undefined: no limit. */
  maxMessageRate: Rate | undefined;
  /** Connections opened per time unit; undefined: no limit. */
  maxConnectionRate: Rate | undefined;
}

/**
 * Every site starts from these: KumoMTA's shipped shaping file (policy-extras/shaping.toml, its
 * `[default]` table) opens at most 10 connections to a site and sends 100 messages on each. Its rates
 * (100 messages/s, 100 connections/min) are not built in: no rate unless a shaping file sets one.
 */
export const BUILT_IN_DEFAULT_LIMITS: Readonly<SiteLimits> = {
  connectionLimit: 10,
  maxDeliveriesPerConnection: 100,
  maxMessageRate: undefined,
  maxConnectionRate: undefined,
};

/**
 * Per provider, as KumoMTA's shipped shaping file sets them (its `[provider.*]` tables), with the
 * provider page that file cites. A key left out keeps the default above.
 */
export const BUILT_IN_SITE_LIMITS: Readonly<Record<string, Readonly<Partial<SiteLimits>>>> = {
  // 5 connections, 50 per connection (support.google.com/mail/answer/81126).
  google: { connectionLimit: 5, maxDeliveriesPerConnection: 50 },
  // 5 × 50 for Outlook.com, Microsoft 365 and its DANE set (sendersupport.olc.protection.outlook.com/pm/Policies).
  microsoft: { connectionLimit: 5, maxDeliveriesPerConnection: 50 },
  // 20 per connection, "provided by Yahoo directly" (senders.yahooinc.com/best-practices); 10 connections.
  yahoo: { maxDeliveriesPerConnection: 20 },
  // 10 connections, 5 per connection (support.apple.com/102322).
  apple: { connectionLimit: 10, maxDeliveriesPerConnection: 5 },
  // The relay (MAILROOM_SMTP_URL) is one's own or an ESP's submission server: 20 connections, Postfix's
  // default_destination_concurrency_limit, which kept a busy worker fed (3,000 messages: 376-401/s with
  // 20 against 317-348/s with 5). An ESP's sending rate goes in the shaping file's [site.relay].
  relay: { connectionLimit: 20 },
};

/**
 * How long a site (or a sender) is paused when a provider puts it on hold, by the hold's key, and
 * `max`, the longest any hold grows to when it repeats.
 */
export const BUILT_IN_HOLDS = {
  // Gmail's rate limit on a sender (421 4.7.28 "unusual rate of unsolicited mail").
  google_rate_limit: 10 * 60_000,
  // Yahoo's [TSS04] deferral (complaints): KumoMTA's shipped file suspends the site for 2 hours.
  yahoo_tss04: 2 * 3_600_000,
  // A provider said to slow down without saying how long: the second retry's wait (5 minutes).
  throttle: 5 * 60_000,
  // The site refused the sending domain itself (its SPF, DKIM or DMARC): that domain's mail to the site
  // waits while the owner fixes its DNS, other senders' mail goes on.
  sender_fault: 30 * 60_000,
  // A relay's or provider's daily or hourly sending quota is spent (SES's "Daily message quota
  // exceeded"): every message would get the same answer until its period turns.
  sending_quota: 3_600_000,
  // A message came over a rate counted per second (SES's "Maximum sending rate exceeded"): the site's
  // rate is lowered, and the site waits this long for the provider's window to pass.
  rate_throttle: 1_000,
  max: 4 * 3_600_000,
} as const;

export type HoldKey = keyof typeof BUILT_IN_HOLDS;

const RATE_UNITS: Record<string, number> = {
  s: 1000,
  sec: 1000,
  second: 1000,
  m: 60_000,
  min: 60_000,
  minute: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hour: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
};

const DURATION_UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "100/m", "14/s", "1000/h", "20/min" → a Rate; undefined when the text is not one. */
export function parseRate(text: string): Rate | undefined {
  const match = /^\s*(\d+)\s*\/\s*([a-z]+)\s*$/i.exec(text);
  if (match === null) return undefined;
  const count = Number(match[1]);
  const perMs = RATE_UNITS[match[2]!.toLowerCase()];
  if (perMs === undefined || !Number.isSafeInteger(count) || count < 1) return undefined;
  return { count, perMs };
}

/** "30s", "10m", "2h", "1d" → milliseconds; undefined when the text is not one, or is zero. */
export function parseDuration(text: string): number | undefined {
  const match = /^\s*(\d+)\s*([a-z]+)\s*$/i.exec(text);
  if (match === null) return undefined;
  const unit = DURATION_UNITS[match[2]!.toLowerCase()];
  const ms = Number(match[1]) * (unit ?? Number.NaN);
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined;
}

/** A duration as the file would write it, for messages: 7200000 → "2h". */
export function formatDuration(ms: number): string {
  for (const [unit, size] of Object.entries(DURATION_UNITS).reverse()) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
