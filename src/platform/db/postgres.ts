import { createHash } from 'node:crypto';
import pg from 'pg';
import {
  channelsToNotify,
  coalescingNotifier,
  setLocalStatements,
  type Database,
  type QueryResult,
  type Transaction,
} from './database.ts';

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
}

export function openPostgres(connectionString: string, poolSize: number, options: PostgresOptions = {}): Database {
  const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
  // While the server is away, a statement fails after at most connectTimeoutMs instead of waiting for it.
  const pool = new pg.Pool({ connectionString, max: poolSize, types, connectionTimeoutMillis: connectTimeoutMs });
  // An idle client that loses its connection emits here; without a listener the process would crash.
  pool.on('error', () => {});

  const notify = coalescingNotifier((channel) => pool.query('SELECT pg_notify($1, $2)', [channel, '']));

  const run = async <Row>(client: pg.Pool | pg.PoolClient, text: string, params?: readonly unknown[]) => {
    // Statements with parameters are prepared once per connection under a name derived from their text,
    // so PostgreSQL parses and plans each of Mailroom's statements once instead of on every call.
    const query = params === undefined ? { text } : { name: statementName(text), text, values: params as unknown[] };
    const result = await client.query(query);
    return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 } satisfies QueryResult<Row>;
  };

  return {
    kind: 'postgres',
    async query<Row>(text: string, params?: readonly unknown[]) {
      const result = await run<Row>(pool, text, params);
      for (const channel of channelsToNotify(text)) notify(channel);
      return result;
    },
    async transaction(fn, settings) {
      const client = await pool.connect();
      // A checked-out client whose connection drops emits 'error' (the pool only listens on idle ones):
      // unheard, it would crash the process. The statement in flight fails on its own, and a client
      // that errored is not returned to the pool.
      let lost: Error | undefined;
      const onLost = (error: Error) => void (lost = error);
      client.on('error', onLost);
      const channels = new Set<string>();
      try {
        // With settings, one simple-protocol query holding several statements: BEGIN and its SET LOCALs.
        await client.query(settings ? `BEGIN; ${setLocalStatements(settings)}` : 'BEGIN');
        const tx: Transaction = {
          query: async <Row>(text: string, params?: readonly unknown[]) => {
            const result = await run<Row>(client, text, params);
            for (const channel of channelsToNotify(text)) channels.add(channel);
            return result;
          },
          exec: async (script) => {
            await client.query(script);
          },
        };
        const result = await fn(tx);
        await client.query('COMMIT');
        for (const channel of channels) notify(channel);
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      } finally {
        client.off('error', onLost);
        client.release(lost);
      }
    },
    async listen(channel, onNotify, onLost) {
      // A connection of its own, outside the pool: LISTEN holds it for as long as the listener lives.
      // When it drops, it is reopened every second until that succeeds (the server may be down for a
      // while); the caller's polling covers the gap, and a wake-up after reconnecting catches up.
      let client: pg.Client | undefined;
      let stopped = false;
      const connect = async () => {
        // TCP keep-alive: a connection dropped silently on the way (a NAT, a load balancer) is noticed.
        const next = new pg.Client({ connectionString, connectionTimeoutMillis: connectTimeoutMs, keepAlive: true });
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
          await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
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
