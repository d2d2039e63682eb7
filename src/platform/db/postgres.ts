import { createHash } from 'node:crypto';
import pg from 'pg';
import {
  channelsToNotify,
  coalescingNotifier,
  isConnectionLost,
  setLocalStatements,
  type Database,
  type QueryResult,
  type Transaction,
} from './database.ts';
import { hostChoosingClient } from './host-choice.ts';
import { parseDatabaseUrl } from './hosts.ts';
import { ListeningUnavailableError } from './listening.ts';

// int8 (counts, sums) as a JS number, as PGlite returns it: every int8 Mailroom stores fits in 2^53.
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === pg.types.builtins.INT8) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

const names = new Map<string, string>();
function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `mr_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

export interface PostgresOptions {
  /** How long to wait for a connection (a new one, or a free one of the pool) before failing. */
  connectTimeoutMs?: number;
  /**
   * PostgreSQL's statement_timeout on every connection. The process waits REPLY_GRACE_MS longer for
   * any answer; past that the answer was lost on the way (a cut link) and the connection is dropped.
   * 0 or absent: no limit either side.
   */
  statementTimeoutMs?: number;
  /** lock_timeout: how long a statement waits for one lock. 0 or absent: no limit. */
  lockTimeoutMs?: number;
  /**
   * idle_in_transaction_session_timeout: the server ends a session whose open transaction has waited
   * this long for its client, releasing its locks. 0 or absent: no limit.
   */
  idleInTransactionTimeoutMs?: number;
  /**
   * `transaction`: the connection string points at a pooler in transaction pooling mode (PgBouncer),
   * which hands each transaction (or statement outside one) to any of its server connections. Nothing
   * may then outlive a transaction: no start-up parameters (the timeouts are set with each BEGIN), no
   * named prepared statements, and no LISTEN except through `listenUrl`.
   */
  pooler?: 'none' | 'transaction';
  /** Where the LISTEN connections go (past the pooler, to PostgreSQL itself); absent: the connection string. */
  listenUrl?: string;
}

/** The timeouts as `SET LOCAL` settings of a transaction (0 or absent: left to the role's own settings). */
function timeoutSettings(options: PostgresOptions): Record<string, string> {
  const settings: Record<string, string> = {};
  if (options.statementTimeoutMs) settings.statement_timeout = String(options.statementTimeoutMs);
  if (options.lockTimeoutMs) settings.lock_timeout = String(options.lockTimeoutMs);
  if (options.idleInTransactionTimeoutMs)
    settings.idle_in_transaction_session_timeout = String(options.idleInTransactionTimeoutMs);
  return settings;
}

type ConnectCallback = ((error: Error) => void) | ((error: null, client: pg.Client) => void);

/**
 * The Client class whose refused start (a pooler in transaction mode takes no start-up parameters: PgBouncer
 * answers "unsupported startup parameter: statement_timeout") says which setting to use. The error keeps
 * its SQLSTATE (08P01): like any connection that cannot be made, requests meanwhile answer 503.
 */
function explainingRefusedStartup(Base: typeof pg.Client): typeof pg.Client {
  return class extends Base {
    override connect(): Promise<pg.Client>;
    override connect(callback: ConnectCallback): void;
    override connect(callback?: ConnectCallback): Promise<pg.Client> | void {
      const connected = super.connect().then(
        () => this as pg.Client,
        (error: Error) => {
          if (/^unsupported startup parameter/.test(error.message))
            error.message +=
              ' (a pooler in transaction pooling mode, such as PgBouncer, refuses the timeouts sent at start-up: set MAILROOM_DB_POOLER=transaction)';
          throw error;
        },
      );
      if (!callback) return connected;
      const done = callback as (error: Error | null, client?: pg.Client) => void;
      connected.then((client) => done(null, client), done);
    }
  };
}

// How much longer than the statement timeout the process waits for an answer: the server's own cancellation
// ("canceling statement due to statement timeout") comes first whenever the link works. The connection
// itself survives that error, but only a transaction keeps it (it rolls back and gives it back to the
// pool): a statement run through pool.query loses it, since pg-pool releases the client with the error and
// destroys a client released with any error. Only an answer that cannot arrive (lost in a network cut, or
// the request never reached the server) waits the whole time: without this wait the statement would hang
// until the kernel's retransmission backoff (tens of seconds after a cut, or never behind a silent
// middlebox), holding up whatever waits on it.
const REPLY_GRACE_MS = 2000;

// TCP keep-alive after this much silence on a connection (Node then probes every second, 10 times): an
// idle connection whose other end went away without a word (a host gone, a NAT's state lost) is
// noticed instead of being handed out by the pool. It does not help a connection waiting for an answer
// that was lost: the wait above does.
const KEEPALIVE_IDLE_MS = 10_000;

const UNIT_MS: Record<string, number> = { '': 1, ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration as PostgreSQL reads a time setting (`30s`, `5min`, `1500`: ms without a unit), in ms. */
function durationMs(value: string): number {
  const match = /^(\d+)(ms|s|min|h|d)?$/.exec(value);
  if (!match) throw new Error(`Invalid duration ${value}: a whole number with ms, s, min, h or d`);
  return Number(match[1]) * UNIT_MS[match[2] ?? '']!;
}

/** How long to wait for an answer under a statement timeout; undefined: for ever (no timeout). */
const replyTimeout = (statementTimeoutMs: number | undefined) =>
  statementTimeoutMs ? statementTimeoutMs + REPLY_GRACE_MS : undefined;

// A statement whose parameters are large (a 29 MiB attachment is 39 MB of base64) takes time to send
// before the server starts on it: the wait for its answer grows by a second per MiB sent (8 Mbit/s), so
// a slower link to the database is still given the time to carry it.
const MS_PER_MIB_SENT = 1000;

/** The wait for an answer to a statement with these parameters. */
function replyTimeoutFor(timeoutMs: number | undefined, params: readonly unknown[] | undefined): number | undefined {
  if (timeoutMs === undefined || params === undefined) return timeoutMs;
  let bytes = 0;
  for (const param of params) {
    if (typeof param === 'string') bytes += param.length;
    else if (param instanceof Uint8Array) bytes += param.byteLength;
  }
  return timeoutMs + Math.floor(bytes / 1_048_576) * MS_PER_MIB_SENT;
}

export function openPostgres(connectionString: string, poolSize: number, options: PostgresOptions = {}): Database {
  const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
  const connection: pg.ClientConfig = {
    connectionString,
    types,
    // While the server is away, a statement fails after at most connectTimeoutMs instead of waiting for it.
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
  };
  const pooled = options.pooler === 'transaction';
  // Behind a transaction pooler, set with each transaction's BEGIN instead (see transaction below).
  const ownTimeouts = pooled ? timeoutSettings(options) : {};
  if (!pooled)
    Object.assign(connection, {
      // Sent with the connection's start-up message: no round trip of their own. node-postgres leaves a 0
      // out, which keeps the server's default (none unless an administrator set one).
      statement_timeout: options.statementTimeoutMs ?? false,
      lock_timeout: options.lockTimeoutMs,
      idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs,
    });
  const sessionReplyTimeout = replyTimeout(options.statementTimeoutMs);
  // Several hosts, or a server that must take writes: each connection (the pool's, LISTEN's) picks its host.
  const target = parseDatabaseUrl(connectionString);
  const clientFor = (target: ReturnType<typeof parseDatabaseUrl>) =>
    explainingRefusedStartup(
      target.hosts.length > 1 || target.targetSessionAttrs !== 'any' ? hostChoosingClient(target) : pg.Client,
    );
  const Client = clientFor(target);
  // LISTEN's own connections: past a pooler, to PostgreSQL itself, when told where.
  const listenConnection = options.listenUrl ? { ...connection, connectionString: options.listenUrl } : connection;
  const ListenClient = options.listenUrl ? clientFor(parseDatabaseUrl(options.listenUrl)) : Client;
  const canListen = !pooled || options.listenUrl !== undefined;
  const pool = new pg.Pool({ ...connection, max: poolSize, Client });
  // An idle client that loses its connection emits here; without a listener the process would crash.
  pool.on('error', () => {});

  // A statement whose answer does not come within `timeoutMs` fails with "Query read timeout". Its
  // connection is then unusable (the answer may still arrive, and would be taken for the next
  // statement's): the pool drops a connection released with an error (pool.query does so for every
  // failed statement), and node-postgres closes the socket of one whose statement is still out.
  const statement = (text: string, params: readonly unknown[] | undefined, timeoutMs: number | undefined) => {
    // Statements with parameters are prepared once per connection under a name derived from their text,
    // so PostgreSQL parses and plans each of Mailroom's statements once instead of on every call. Behind a
    // transaction pooler a name would be looked for on whichever server connection comes next: unnamed.
    const query =
      params === undefined
        ? { text }
        : pooled
          ? { text, values: params as unknown[] }
          : { name: statementName(text), text, values: params as unknown[] };
    return (timeoutMs === undefined ? query : { ...query, query_timeout: timeoutMs }) as pg.QueryConfig;
  };

  const notify = coalescingNotifier((channel) =>
    pool.query(statement('SELECT pg_notify($1, $2)', [channel, ''], sessionReplyTimeout)),
  );

  const run = async <Row>(
    client: pg.Pool | pg.PoolClient,
    text: string,
    params: readonly unknown[] | undefined,
    timeoutMs: number | undefined,
  ) => {
    const result = await client.query(statement(text, params, replyTimeoutFor(timeoutMs, params)));
    return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 } satisfies QueryResult<Row>;
  };

  return {
    kind: 'postgres',
    async query<Row>(text: string, params?: readonly unknown[]) {
      const result = await run<Row>(pool, text, params, sessionReplyTimeout);
      for (const channel of channelsToNotify(text)) notify(channel);
      return result;
    },
    async transaction(fn, ownSettings) {
      // Behind a transaction pooler the timeouts come first, then the transaction's own (the later SET wins).
      const settings = pooled ? { ...ownTimeouts, ...ownSettings } : ownSettings;
      // A transaction that sets its own statement timeout waits for answers accordingly (0: for ever).
      const own = ownSettings?.statement_timeout;
      const timeoutMs = own === undefined ? sessionReplyTimeout : replyTimeout(durationMs(own));
      const client = await pool.connect();
      // A checked-out client whose connection drops emits 'error' (the pool only listens on idle ones):
      // unheard, it would crash the process. The statement in flight fails on its own, and a client
      // that errored is not returned to the pool.
      let lost: Error | undefined;
      const onLost = (error: Error) => void (lost = error);
      client.on('error', onLost);
      const channels = new Set<string>();
      // Only this connection's own failures say it is lost: a failure of another statement the callback
      // ran (on the pool, say, waiting for a free connection) leaves this one healthy, to be rolled back.
      const ownStep = async <T>(step: Promise<T>): Promise<T> => {
        try {
          return await step;
        } catch (error) {
          if (lost === undefined && isConnectionLost(error)) lost = error as Error;
          throw error;
        }
      };
      try {
        // With settings, one simple-protocol query holding several statements: BEGIN and its SET LOCALs.
        const begin = settings && Object.keys(settings).length > 0 ? settings : undefined;
        await ownStep(
          client.query(statement(begin ? `BEGIN; ${setLocalStatements(begin)}` : 'BEGIN', undefined, timeoutMs)),
        );
        const tx: Transaction = {
          query: async <Row>(text: string, params?: readonly unknown[]) => {
            const result = await ownStep(run<Row>(client, text, params, timeoutMs));
            for (const channel of channelsToNotify(text)) channels.add(channel);
            return result;
          },
          exec: async (script) => {
            await ownStep(client.query(statement(script, undefined, timeoutMs)));
          },
        };
        const result = await fn(tx);
        await ownStep(client.query(statement('COMMIT', undefined, timeoutMs)));
        for (const channel of channels) notify(channel);
        return result;
      } catch (error) {
        // A connection lost (or whose answer never came) is dropped, not rolled back: a ROLLBACK would
        // wait behind the answer that is not coming, and the server rolls back a session that ends.
        if (lost === undefined)
          await client.query(statement('ROLLBACK', undefined, timeoutMs)).catch((failed: Error) => (lost ??= failed));
        throw error;
      } finally {
        client.off('error', onLost);
        client.release(lost);
      }
    },
    async listen(channel, onNotify, onLost) {
      if (!canListen)
        throw new ListeningUnavailableError(
          'no LISTEN through a transaction pooler: set MAILROOM_DB_LISTEN_URL to reach PostgreSQL directly',
        );
      // A connection of its own, outside the pool: LISTEN holds it for as long as the listener lives.
      // When it drops, it is reopened every second until that succeeds (the server may be down for a
      // while); the caller's polling covers the gap, and a wake-up after reconnecting catches up.
      let client: pg.Client | undefined;
      let stopped = false;
      const connect = async () => {
        // TCP keep-alive: a connection dropped silently on the way (a NAT, a load balancer) is noticed.
        const next = new ListenClient(listenConnection);
        next.on('notification', () => onNotify());
        let dropped = false;
        const reconnect = () => {
          if (dropped) return;
          dropped = true;
          if (client === next) {
            client = undefined;
            if (!stopped) onLost?.();
          }
          next.end().catch(() => {});
          if (!stopped) setTimeout(() => void retry(), 1000).unref();
        };
        next.on('error', reconnect);
        try {
          await next.connect();
          await next.query(statement(`LISTEN ${pg.escapeIdentifier(channel)}`, undefined, sessionReplyTimeout));
        } catch (error) {
          reconnect();
          throw error;
        }
        if (stopped) {
          await next.end().catch(() => {});
          return;
        }
        client = next;
      };
      const retry = async () => {
        if (stopped) return;
        try {
          await connect();
          onNotify(); // notifications sent while the connection was down are lost: look for work now
        } catch {
          // connect() scheduled the next try
        }
      };
      try {
        await connect();
      } catch (error) {
        stopped = true; // the caller gets no listener to stop: no retries behind its back
        throw error;
      }
      return async () => {
        stopped = true;
        await client?.end().catch(() => {});
      };
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: () => pool.end(),
  };
}
