import { createHash } from 'node:crypto';
import pg from 'pg';
import { channelsToNotify, coalescingNotifier, type Database, type QueryResult, type Transaction } from './database.ts';

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

export function openPostgres(connectionString: string, poolSize: number): Database {
  const pool = new pg.Pool({ connectionString, max: poolSize, types });
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
    async transaction(fn) {
      const client = await pool.connect();
      const channels = new Set<string>();
      try {
        await client.query('BEGIN');
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
        client.release();
      }
    },
    async listen(channel, onNotify) {
      // A connection of its own, outside the pool: LISTEN holds it for as long as the listener lives.
      // When it drops, it is reopened after a second; the caller's polling covers the gap.
      let client: pg.Client | undefined;
      let stopped = false;
      const connect = async () => {
        if (stopped) return;
        const next = new pg.Client({ connectionString });
        next.on('notification', () => onNotify());
        next.on('error', () => {
          next.end().catch(() => {});
          if (!stopped) setTimeout(() => void connect().catch(() => {}), 1000).unref();
        });
        await next.connect();
        await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        client = next;
      };
      await connect();
      return async () => {
        stopped = true;
        await client?.end().catch(() => {});
      };
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: () => pool.end(),
  };
}
