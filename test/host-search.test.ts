// The search for a host that takes writes, among the hosts of a multi-host DATABASE_URL, against hosts
// that fail without a word: one that never answers the connection, and one that accepts it and falls
// silent before saying whether it takes writes. Neither may hold up the hosts after it. The working
// host is the PostgreSQL server of DATABASE_URL, so these run in the PostgreSQL pass of the suite.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { onPostgres } from './helpers/database.ts';
import { startCutProxy } from './helpers/cut-proxy.ts';

if (onPostgres) {
  const server = new URL(process.env.DATABASE_URL!);
  const credentials = server.username ? `${server.username}${server.password ? `:${server.password}` : ''}@` : '';
  /** The URL listing `firstPort` on the loopback, then the DATABASE_URL server, for a primary. */
  const urlWith = (firstPort: number) =>
    `postgres://${credentials}127.0.0.1:${firstPort},${server.host}${server.pathname}?target_session_attrs=read-write`;

  // Without a bound of its own the search waits for ever: the test fails instead of hanging the suite.
  const bounded = { timeout: 30_000 };

  const cleanups: Array<() => Promise<void>> = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  test(
    'a host that never answers the connection gets its share of the connect timeout, and the next host is found',
    bounded,
    async () => {
      const sockets = new Set<Socket>();
      const silent = createServer((socket) => void sockets.add(socket.on('error', () => {})));
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      cleanups.push(async () => {
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => silent.close(resolve));
      });
      const db = openPostgres(urlWith((silent.address() as { port: number }).port), 2, { connectTimeoutMs: 2000 });
      try {
        const { rows } = await db.query<{ one: number }>('SELECT 1 AS one');
        assert.deepEqual(rows, [{ one: 1 }]);
        assert.ok(sockets.size > 0, 'the silent host was tried first');
      } finally {
        await db.close();
      }
    },
  );

  test(
    'a host that accepts the connection and falls silent before saying whether it takes writes does not stop the search',
    bounded,
    async () => {
      const proxy = await startCutProxy({ host: server.hostname, port: Number(server.port || 5432) });
      cleanups.push(() => proxy.close());
      // The question every host is asked is handed over, and its answer lost.
      const cut = proxy.cutAfter((request) => request.includes('pg_is_in_recovery()'));
      const db = openPostgres(urlWith(proxy.port), 2, { connectTimeoutMs: 2000 });
      try {
        const { rows } = await db.query<{ one: number }>('SELECT 1 AS one');
        assert.deepEqual(rows, [{ one: 1 }]);
        await cut; // the first host was asked, and its answer never came
        // The host found is kept: the next connections go there at once.
        const more = await Promise.all([1, 2].map(() => db.transaction((tx) => tx.query('SELECT 2 AS two'))));
        assert.deepEqual(
          more.map((result) => result.rows),
          [[{ two: 2 }], [{ two: 2 }]],
        );
      } finally {
        await db.close();
      }
    },
  );
}
