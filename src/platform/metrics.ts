import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

// The process's Prometheus metrics, in one registry (GET /metrics, docs/operations.md lists them).
// Labels are bounded: route templates, never ids or addresses; recipient domains as a handful of groups.
// Counters move only after the change they count has committed.

export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'mailroom_' });

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const DELIVERY_SECONDS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 21_600, 86_400];

export const httpRequests = new Counter({
  name: 'mailroom_http_requests_total',
  help: 'HTTP requests answered, by method, route template and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [registry],
});

export const httpRequestDuration = new Histogram({
  name: 'mailroom_http_request_duration_seconds',
  help: 'Time to answer an HTTP request, by method and route template',
  labelNames: ['method', 'route'] as const,
  buckets: SECONDS,
  registers: [registry],
});

export const messagesAccepted = new Counter({
  name: 'mailroom_messages_accepted_total',
  help: 'Messages accepted (committed with their delivery job), by carrier: api or smtp',
  labelNames: ['carrier'] as const,
  registers: [registry],
});

export const acceptGroupSize = new Histogram({
  name: 'mailroom_accept_group_requests',
  help: 'Send requests written by one group commit (committed groups only)',
  buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
  registers: [registry],
});

/** Items done by one batch of the workers' bookkeeping (platform/db/batcher.ts), by what was batched. */
export const workerBatchSize = new Histogram({
  name: 'mailroom_worker_batch_items',
  help: 'Items written (or read) by one batch of a worker: jobs claimed, messages taken, copies recorded, jobs finished, webhook jobs claimed with their deliveries, attempts recorded',
  labelNames: ['batch'] as const,
  buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
  registers: [registry],
});

/** What became of a recipient, as counted: each is one recipient of one message. */
export type RecipientOutcome = 'delivered' | 'deferred' | 'held' | 'bounced' | 'failed' | 'complained' | 'suppressed';

export const recipientOutcomes = new Counter({
  name: 'mailroom_recipient_outcomes_total',
  help: 'Recipient outcomes by kind (deferred: an attempt to be retried) and recipient domain group',
  labelNames: ['outcome', 'domain_group'] as const,
  registers: [registry],
});

export const acceptedToDelivered = new Histogram({
  name: 'mailroom_accepted_to_delivered_seconds',
  help: "From a message's acceptance to a recipient's delivery",
  buckets: DELIVERY_SECONDS,
  registers: [registry],
});

export const webhookAttempts = new Counter({
  name: 'mailroom_webhook_attempts_total',
  help: 'Webhook delivery attempts by result: succeeded, retrying (failed, tried again later), failed (given up)',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const jobsFailed = new Counter({
  name: 'mailroom_jobs_failed_total',
  help: 'Jobs that failed for good, by kind (queue) and cause: permanent (an error that cannot change, e.g. a file that is not CSV) or attempts (MAILROOM_JOB_MAX_ATTEMPTS failed runs in a row)',
  labelNames: ['kind', 'cause'] as const,
  registers: [registry],
});

export const webhookDeliveryLag = new Histogram({
  name: 'mailroom_webhook_delivery_lag_seconds',
  help: 'From an event to its successful delivery to an endpoint',
  buckets: DELIVERY_SECONDS,
  registers: [registry],
});

/** Recipient domains counted apart; everything else is `other`, so the label stays bounded. */
const DOMAIN_GROUPS: Array<[string, RegExp]> = [
  ['gmail', /^(gmail|googlemail)\.com$/],
  ['outlook', /^(outlook|hotmail|live|msn)\.[a-z.]+$/],
  ['yahoo', /^(yahoo|ymail|rocketmail)\.[a-z.]+$/],
  ['icloud', /^(icloud|me|mac)\.com$/],
];

export function domainGroup(address: string): string {
  const domain = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
  return DOMAIN_GROUPS.find(([, pattern]) => pattern.test(domain))?.[0] ?? 'other';
}

export function countOutcome(outcome: RecipientOutcome, address: string): void {
  recipientOutcomes.inc({ outcome, domain_group: domainGroup(address) });
}

/**
 * Gauges whose values are read when Prometheus scrapes (the queue's depth, the database pool): the
 * composition root gives each its source, so that this module knows no domain.
 */
export interface QueueStats {
  queue: string;
  /** Due jobs not running, counted up to a cap so a scrape stays cheap. */
  due: number;
  /** Seconds the oldest due job has waited; 0 when none is due. */
  oldestDueSeconds: number;
}

let queueSource: (() => Promise<QueueStats[]>) | undefined;
let poolSource: (() => { total: number; idle: number; waiting: number } | undefined) | undefined;

/** Both queue gauges of one scrape read one answer (kept for a quarter of a second). */
export function setQueueStatsSource(source: () => Promise<QueueStats[]>): void {
  let cached: { at: number; stats: Promise<QueueStats[]> } | undefined;
  queueSource = () => {
    if (!cached || Date.now() - cached.at > 250) {
      cached = { at: Date.now(), stats: source().catch(() => []) };
    }
    return cached.stats;
  };
}

export function setPoolStatsSource(source: () => { total: number; idle: number; waiting: number } | undefined): void {
  poolSource = source;
}

new Gauge({
  name: 'mailroom_queue_due_jobs',
  help: 'Jobs due and not running, per queue (counted up to 100000)',
  labelNames: ['queue'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const stats of (await queueSource?.()) ?? []) this.set({ queue: stats.queue }, stats.due);
  },
});

new Gauge({
  name: 'mailroom_queue_oldest_due_seconds',
  help: 'Age of the oldest due job not running, per queue',
  labelNames: ['queue'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const stats of (await queueSource?.()) ?? []) this.set({ queue: stats.queue }, stats.oldestDueSeconds);
  },
});

new Gauge({
  name: 'mailroom_db_pool_connections',
  help: 'PostgreSQL pool connections by state: total, idle, waiting (requests waiting for one)',
  labelNames: ['state'] as const,
  registers: [registry],
  collect() {
    this.reset();
    const pool = poolSource?.();
    if (!pool) return;
    this.set({ state: 'total' }, pool.total);
    this.set({ state: 'idle' }, pool.idle);
    this.set({ state: 'waiting' }, pool.waiting);
  },
});

/** One destination site as the gauges show it: `site` is already a bounded label (see siteLabel). */
export interface DestinationStats {
  site: string;
  connections: number;
  connectionLimit: number;
  queued: number;
  paused: boolean;
}

let destinationSource: (() => Promise<DestinationStats[]>) | undefined;

/** The destination gauges of one scrape read one answer (kept for a quarter of a second). */
export function setDestinationStatsSource(source: () => Promise<DestinationStats[]>): void {
  let cached: { at: number; stats: Promise<DestinationStats[]> } | undefined;
  destinationSource = () => {
    if (!cached || Date.now() - cached.at > 250) cached = { at: Date.now(), stats: source().catch(() => []) };
    return cached.stats;
  };
}

/** Sums the stats of sites that share a label (every site without a name of its own is `other`). */
function destinationGauge(name: string, help: string, value: (stats: DestinationStats) => number) {
  new Gauge({
    name,
    help,
    labelNames: ['site'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const sums = new Map<string, number>();
      for (const stats of (await destinationSource?.()) ?? []) {
        sums.set(stats.site, (sums.get(stats.site) ?? 0) + value(stats));
      }
      for (const [site, sum] of sums) this.set({ site }, sum);
    },
  });
}

destinationGauge(
  'mailroom_destination_connections',
  'Connections open to a destination site, across every worker process',
  (s) => s.connections,
);
destinationGauge(
  'mailroom_destination_connection_limit',
  'Connections a destination site allows now (back-off lowers it below the configured limit)',
  (s) => s.connectionLimit,
);
destinationGauge('mailroom_destination_queued', 'Recipients waiting for a destination site', (s) => s.queued);
destinationGauge('mailroom_destination_paused', 'Destination sites paused now (a hold or the operator)', (s) =>
  s.paused ? 1 : 0,
);

/** One warming source at one site as the warm-up gauges show it (`site` a bounded label). */
export interface WarmupStats {
  source: string;
  site: string;
  /** 1-based; the number of stages + 1 once warm. */
  stage: number;
  /** The day's allowance; undefined once warm. */
  allowance: number | undefined;
  sentToday: number;
}

let warmupSource: (() => Promise<WarmupStats[]>) | undefined;

export function setWarmupStatsSource(source: () => Promise<WarmupStats[]>): void {
  warmupSource = () => source().catch(() => []);
}

/** Sites that share a label (`other`) show their lowest stage and their summed allowance and sends. */
function warmupGauge(name: string, help: string, value: (stats: WarmupStats) => number | undefined, sum: boolean) {
  new Gauge({
    name,
    help,
    labelNames: ['source', 'site'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const values = new Map<string, { source: string; site: string; value: number }>();
      for (const stats of (await warmupSource?.()) ?? []) {
        const v = value(stats);
        if (v === undefined) continue;
        const key = `${stats.source} ${stats.site}`;
        const before = values.get(key);
        const merged = before === undefined ? v : sum ? before.value + v : Math.min(before.value, v);
        values.set(key, { source: stats.source, site: stats.site, value: merged });
      }
      for (const { source, site, value: v } of values.values()) this.set({ source, site }, v);
    },
  });
}

warmupGauge(
  'mailroom_warmup_stage',
  'Warm-up stage of a source at a site (1-based; past the last once warm)',
  (s) => s.stage,
  false,
);
warmupGauge(
  'mailroom_warmup_allowance',
  "Today's warm-up allowance of a source at a site (absent once warm)",
  (s) => s.allowance,
  true,
);
warmupGauge(
  'mailroom_warmup_sent_today',
  'Messages a warming source sent to a site today (UTC)',
  (s) => s.sentToday,
  true,
);

export const destinationThrottles = new Counter({
  name: 'mailroom_destination_throttle_replies_total',
  help: 'Replies that throttled or held a destination site (or a sender at it), by site and reply class',
  labelNames: ['site', 'class'] as const,
  registers: [registry],
});
