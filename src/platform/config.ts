// The one place where Mailroom reads its environment. Each setting is declared once below (those of mail
// going out and coming in in config-mail.ts, in their place in the table; the parsers in
// config-parsers.ts): its variable, its default (as the text a user would write, parsed like their
// input), what it means, and how it is checked. `loadConfig` validates them all at boot and names the variable at fault;
// docs/configuration.md documents the same table (a test keeps the two in step).

import {
  ConfigError,
  setting,
  type Parse,
  type Setting,
  text,
  integer,
  optionalInteger,
  optionalPort,
  oneOf,
  optionalText,
  fraction,
  secondsList,
  cidrList,
  optionalUrl,
  databaseUrl,
  domainName,
} from './config-parsers.ts';
import { MAIL_SETTINGS } from './config-mail.ts';

export { ConfigError } from './config-parsers.ts';

const SETTING_TABLE = {
  databaseUrl: setting(
    'DATABASE_URL',
    undefined,
    'PostgreSQL 15+ connection string, e.g. `postgres://user@host:5432/mailroom`; several hosts as libpq takes them, `postgres://user@h1:5432,h2:5432/mailroom?target_session_attrs=read-write`, are tried in order for one that takes writes (target_session_attrs `any`, `read-write` or `primary`). Unset: embedded PGlite under `MAILROOM_DATA_DIR`.',
    databaseUrl,
  ),
  dataDir: setting(
    'MAILROOM_DATA_DIR',
    './.mailroom',
    'Where the embedded PGlite database lives. One process at a time may open it.',
    text,
  ),
  port: setting('PORT', '3000', 'HTTP port of the API.', integer(0, 65535)),
  host: setting('HOST', '127.0.0.1', 'Address the API listens on; `0.0.0.0` for every interface.', text),
  publicUrl: setting(
    'MAILROOM_PUBLIC_URL',
    undefined,
    'Base URL recipients reach Mailroom at, for open-tracking pixels, tracked links and unsubscribe links, e.g. `https://mail.example.com`. Unset: `http://<HOST>:<PORT>`, which only works on this machine.',
    optionalUrl(['http:', 'https:']),
  ),
  logLevel: setting(
    'MAILROOM_LOG_LEVEL',
    'info',
    'fatal, error, warn, info, debug, trace or silent. Logs are JSON lines on stdout; debug adds one line per request.',
    oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const),
  ),
  bodyLimitBytes: setting(
    'MAILROOM_BODY_LIMIT_BYTES',
    '41943040',
    'Largest request body accepted (40 MiB); a larger one is refused with 413 `payload_too_large`.',
    integer(1024, 1024 ** 3),
  ),
  attachmentsMaxBytes: setting(
    'MAILROOM_ATTACHMENTS_MAX_BYTES',
    '31457280',
    "Largest total size of one message's attachments once decoded from base64 (30 MiB); more is 413 `payload_too_large`.",
    integer(0, 1024 ** 3),
  ),
  maxScheduleDays: setting(
    'MAILROOM_MAX_SCHEDULE_DAYS',
    '30',
    'How far ahead a `scheduled_at` may be, in days (30, as Resend): a later time is 400 `validation_error` naming the limit, for a message (`POST /emails`, a batch entry, `PATCH /emails/:id`) and a broadcast alike.',
    integer(1, 36_500),
  ),
  requestTimeoutMs: setting(
    'MAILROOM_REQUEST_TIMEOUT_MS',
    '60000',
    'Time a client has to send a whole HTTP request (headers and body); a slower one is answered 408 `request_timeout` and cut off.',
    integer(1000, 3_600_000),
  ),
  keepAliveTimeoutMs: setting(
    'MAILROOM_KEEP_ALIVE_TIMEOUT_MS',
    '75000',
    "How long an idle keep-alive HTTP connection stays open. Longer than a load balancer's idle timeout (often 60 s), so the balancer closes first and never sends on a connection Mailroom is closing.",
    integer(1000, 3_600_000),
  ),
  dbPoolSize: setting(
    'MAILROOM_DB_POOL_SIZE',
    '10',
    'PostgreSQL connections per process (PGlite has one).',
    integer(1, 1000),
  ),
  dbConnectTimeoutMs: setting(
    'MAILROOM_DB_CONNECT_TIMEOUT_MS',
    '5000',
    'How long a statement waits for a PostgreSQL connection (opening one, or a free one of the pool) before it fails. While the database is unreachable, API requests that need it are answered 503 `service_unavailable` within this time instead of hanging.',
    integer(100, 600_000),
  ),
  dbStatementTimeoutMs: setting(
    'MAILROOM_DB_STATEMENT_TIMEOUT_MS',
    '15000',
    'Longest a PostgreSQL statement may run before the server cancels it (a request then answers 503; migrations are exempt). The process waits 2 s more for any answer, then counts it lost on the network and drops the connection: the longest a worker stays stuck on a network cut once the link is back. `0`: no limit.',
    integer(0, 3_600_000),
  ),
  dbLockTimeoutMs: setting(
    'MAILROOM_DB_LOCK_TIMEOUT_MS',
    '5000',
    'Longest a PostgreSQL statement waits for a lock another transaction holds before it fails (migrations are exempt). `0`: no limit.',
    integer(0, 3_600_000),
  ),
  dbIdleTransactionTimeoutMs: setting(
    'MAILROOM_DB_IDLE_TRANSACTION_TIMEOUT_MS',
    '10000',
    'PostgreSQL ends a session whose open transaction has waited this long for its process (cut off by the network, or gone), releasing its locks. Mailroom keeps no transaction open while it waits on anything slow. `0`: no limit.',
    integer(0, 3_600_000),
  ),
  dbPooler: setting(
    'MAILROOM_DB_POOLER',
    'none',
    "`transaction` when `DATABASE_URL` points at a pooler in transaction pooling mode (PgBouncer `pool_mode = transaction`): no start-up parameters (the timeouts above are set with each transaction's BEGIN; a statement outside a transaction takes the role's own settings), no named prepared statements, and LISTEN only through `MAILROOM_DB_LISTEN_URL` (without it, workers find work by polling alone). `none`: a direct connection, or a pooler in session mode.",
    oneOf(['none', 'transaction'] as const),
  ),
  dbListenUrl: setting(
    'MAILROOM_DB_LISTEN_URL',
    undefined,
    'Connection string of the connections that LISTEN for wake-ups (queued work, changed look-ups, a new schema), past the pooler straight to PostgreSQL, in the form of `DATABASE_URL`. Unset: they use `DATABASE_URL`, or with `MAILROOM_DB_POOLER=transaction` there are none: workers poll (every 250 ms for deliveries and webhooks, 1 s for broadcasts and imports), look-ups are not cached and a new schema is noticed within a minute.',
    databaseUrl,
  ),
  sessionTtlHours: setting(
    'MAILROOM_SESSION_TTL_HOURS',
    '168',
    'Lifetime of a dashboard session token, in hours (7 days).',
    integer(1, 24 * 366),
  ),
  devDomain: setting(
    'MAILROOM_DEV_DOMAIN',
    'example.test',
    'Verified domain of the development organization made on the first embedded start.',
    domainName,
  ),
  ...MAIL_SETTINGS,
  submissionPort: setting(
    'MAILROOM_SUBMISSION_PORT',
    undefined,
    'Port of the SMTP submission listener (STARTTLS), on `HOST`; 587 on a server. `0` picks a free port, `off` turns it off. Unset: 2587 on the embedded default (no `DATABASE_URL`), off on PostgreSQL.',
    optionalPort,
  ),
  submissionsPort: setting(
    'MAILROOM_SUBMISSIONS_PORT',
    undefined,
    'Port of the SMTP submission listener with implicit TLS, on `HOST`; 465 on a server. Unset or `off`: no such listener.',
    optionalPort,
  ),
  tlsCertFile: setting(
    'MAILROOM_TLS_CERT_FILE',
    undefined,
    'PEM certificate (with its chain) of the SMTP submission listeners. Unset: a self-signed certificate made once and kept under `MAILROOM_DATA_DIR/tls/`.',
    optionalText,
  ),
  tlsKeyFile: setting(
    'MAILROOM_TLS_KEY_FILE',
    undefined,
    'PEM private key of `MAILROOM_TLS_CERT_FILE`; the two are set together.',
    optionalText,
  ),
  metricsPort: setting(
    'MAILROOM_METRICS_PORT',
    undefined,
    "A port of its own, on `HOST`, answering `/metrics`, `/healthz` and `/readyz` only: how a `serve --role worker` process (which has no API port) is scraped and probed. Unset: none (the API's port answers them in the other roles).",
    optionalInteger(0, 65535),
  ),
  metricsToken: setting(
    'MAILROOM_METRICS_TOKEN',
    undefined,
    '`GET /metrics` then needs `Authorization: Bearer <token>`. Unset: `/metrics` answers anyone who reaches the port.',
    optionalText,
  ),
  readyMaxQueueLagSeconds: setting(
    'MAILROOM_READY_MAX_QUEUE_LAG_SECONDS',
    '300',
    'In a process that runs workers, `GET /readyz` fails (503) while the oldest due job of a queue has waited longer than this.',
    integer(1, 86_400 * 7),
  ),
  deliveryRetrySchedule: setting(
    'MAILROOM_DELIVERY_RETRY_SCHEDULE',
    '60,300,900,3600,10800,21600,43200',
    'Seconds to wait before each new attempt at a recipient whose server deferred (4xx) or could not be reached; after the last, the recipient is `failed`. The default retries for about 22 hours.',
    secondsList,
  ),
  workerConcurrency: setting(
    'MAILROOM_WORKER_CONCURRENCY',
    '50',
    'Messages one worker process delivers at the same time.',
    integer(1, 1000),
  ),
  composeThreads: setting(
    'MAILROOM_COMPOSE_THREADS',
    undefined,
    'Threads of a worker process that compose and DKIM-sign messages, so that signing does not hold up its event loop; 0 composes on the event loop. Unset: one fewer than the cores Node sees, at most 4.',
    optionalInteger(0, 64),
  ),
  jobLeaseSeconds: setting(
    'MAILROOM_JOB_LEASE_SECONDS',
    '30',
    'How long a worker holds a job it claimed unless it renews the claim, which it does every third of this while the job runs. If the worker dies (or loses the database), another takes its jobs once this has passed.',
    integer(1, 86_400),
  ),
  jobMaxAttempts: setting(
    'MAILROOM_JOB_MAX_ATTEMPTS',
    '10',
    'Runs in a row of a background job (an import, a fan-out, a webhook or email delivery) that may fail before it fails for good (a run without an error starts the count again), kept as failed: `mailroom jobs list --failed`, `mailroom_jobs_failed_total` (docs/operations.md). Retries wait 2, 4, 8 s… up to 5 minutes (about 14 minutes in all by default). An error that cannot change fails a job at once; a database outage does not count. Delivery deferrals keep their own schedule.',
    integer(1, 1000),
  ),
  mxAllowCidrs: setting(
    'MAILROOM_MX_ALLOW_CIDRS',
    undefined,
    "Comma-separated CIDRs the `mx` transport may connect to although they are private, loopback or reserved, e.g. `127.0.0.0/8` for tests or a private relay network. Unset: a recipient domain's mail servers must resolve to public addresses (the `smtp` relay you configure is not checked).",
    cidrList,
  ),
  shapingFile: setting(
    'MAILROOM_SHAPING_FILE',
    undefined,
    'Traffic-shaping file (TOML, or JSON when its name ends in `.json`): connections, deliveries per connection and rates for each destination site, reply rules and hold durations (`docs/shaping.md`). Checked at start. Unset: the built-in limits.',
    optionalText,
  ),
  webhookAllowCidrs: setting(
    'MAILROOM_WEBHOOK_ALLOW_CIDRS',
    undefined,
    'Comma-separated CIDRs exempt from the refusal of private and loopback webhook hosts, e.g. `127.0.0.0/8`. For tests only; unset, every private, loopback, link-local and reserved address is refused.',
    cidrList,
  ),
  webhookTimeoutMs: setting(
    'MAILROOM_WEBHOOK_TIMEOUT_MS',
    '10000',
    'Time a webhook receiver has to answer one delivery attempt; past it the attempt counts as failed and is retried.',
    integer(100, 120_000),
  ),
  webhookConnectionsPerEndpoint: setting(
    'MAILROOM_WEBHOOK_CONNECTIONS_PER_ENDPOINT',
    '4',
    'Deliveries in flight to one webhook endpoint at a time, so a slow endpoint cannot hold up the others.',
    integer(1, 100),
  ),
  retentionDays: setting(
    'MAILROOM_RETENTION_DAYS',
    '30',
    "Days a sent or canceled message keeps its content (html, text, headers, template variables, attachments, captured .eml), counted from when it was sent (or accepted, when never sent). Then the worker deletes it; the message's metadata and timeline stay. API request log entries (GET /logs) go as long after the request, and received messages (raw, parsed and attachments, all of them content) as long after they arrived.",
    integer(1, 36_500),
  ),
  metadataRetentionDays: setting(
    'MAILROOM_METADATA_RETENTION_DAYS',
    '90',
    "Days a sent or canceled message's metadata (addresses, subject, tags, recipients' outcomes, timeline) and settled webhook deliveries with their attempts are kept. Then the worker deletes them. At least `MAILROOM_RETENTION_DAYS`.",
    integer(1, 36_500),
  ),
  broadcastPauseAfter: setting(
    'MAILROOM_BROADCAST_PAUSE_AFTER',
    '1000',
    'Copies of a broadcast that must have an outcome (delivered, bounced or refused) before its automatic pause is checked: from then on, a broadcast whose hard bounces or complaints pass their rate below is paused (`docs/broadcasts.md`). `0`: never paused automatically.',
    integer(0, 10_000_000),
  ),
  broadcastPauseHardBounceRate: setting(
    'MAILROOM_BROADCAST_PAUSE_HARD_BOUNCE_RATE',
    '0.05',
    "Share of a broadcast's copies with an outcome that may bounce for good (hard bounces, at send time or reported later) before it is paused: more than this pauses it. A fraction from 0 to 1 (0.05 is 5%).",
    fraction,
  ),
  broadcastPauseComplaintRate: setting(
    'MAILROOM_BROADCAST_PAUSE_COMPLAINT_RATE',
    '0.003',
    "Share of a broadcast's copies with an outcome that may be reported as spam (complaints) before it is paused: more than this pauses it. A fraction from 0 to 1 (0.003 is 0.3%).",
    fraction,
  ),
  shutdownTimeoutMs: setting(
    'MAILROOM_SHUTDOWN_TIMEOUT_MS',
    '10000',
    'On SIGTERM, how long in-flight work may take before the process exits anyway.',
    integer(0, 600_000),
  ),
};

type Table = typeof SETTING_TABLE;
export type Config = { [K in keyof Table]: Table[K] extends Setting<infer T> ? T : never };

/** Every setting, for the documentation. */
export const SETTINGS: ReadonlyArray<Setting<unknown>> = Object.values(SETTING_TABLE);

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const config: Record<string, unknown> = {};
  for (const [key, { variable, default: fallback, parse }] of Object.entries(SETTING_TABLE)) {
    const value = env[variable]?.trim();
    config[key] = (parse as Parse<unknown>)(value === undefined || value === '' ? fallback : value, variable);
  }
  if ((config.tlsCertFile === undefined) !== (config.tlsKeyFile === undefined)) {
    const missing = config.tlsCertFile === undefined ? 'MAILROOM_TLS_CERT_FILE' : 'MAILROOM_TLS_KEY_FILE';
    throw new ConfigError(missing, 'is required with the other of MAILROOM_TLS_CERT_FILE and MAILROOM_TLS_KEY_FILE');
  }
  if (config.databaseUrl === undefined) {
    // The embedded database has no pooler and listens in process.
    if (config.dbPooler !== 'none') throw new ConfigError('MAILROOM_DB_POOLER', 'needs DATABASE_URL (PostgreSQL)');
    if (config.dbListenUrl !== undefined)
      throw new ConfigError('MAILROOM_DB_LISTEN_URL', 'needs DATABASE_URL (PostgreSQL)');
  }
  if ((config.metadataRetentionDays as number) < (config.retentionDays as number)) {
    throw new ConfigError(
      'MAILROOM_METADATA_RETENTION_DAYS',
      `must be at least MAILROOM_RETENTION_DAYS (${String(config.retentionDays)}): a message's metadata cannot go before its content, got ${String(config.metadataRetentionDays)}`,
    );
  }
  return config as Config;
}

/** Where links in sent messages point: MAILROOM_PUBLIC_URL without a trailing slash. */
export function publicBaseUrl(config: Pick<Config, 'publicUrl' | 'host' | 'port'>): string {
  const base =
    config.publicUrl ?? `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
  return base.replace(/\/+$/, '');
}
