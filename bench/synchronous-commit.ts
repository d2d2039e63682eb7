// Synchronous-commit benchmark: POST /emails accepted per second on a primary whose commits wait for a
// synchronous standby (synchronous_commit = on, synchronous_standby_names = '*'), against the same
// primary with synchronous_commit = local (commits flushed to its own disk only), alternated in one run.
//
//   PATH=$PWD/node_modules/.bin:$PATH node bench/synchronous-commit.ts
//
// Needs PostgreSQL's binaries (/usr/lib/postgresql/*/bin): a primary and a standby of its own are made
// in a temporary directory (as the postgres user when run as root), with fsync on. ROUNDS (pairs of
// measurements, default 3), DURATION (seconds each, default 10) and CONNECTIONS (default 50) may be set.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { startReplicatedPostgres } from '../test/helpers/replicated-postgres.ts';
import { driveAccept } from './accept-message.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const DURATION = Number(process.env.DURATION ?? 10);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);

const servers = await startReplicatedPostgres({ synchronous: true, durable: true });
const admin = new pg.Client({ connectionString: servers.primary.url });
await admin.connect();

// The same Mailroom API as bench/accept.ts, in a child process, on a fresh database of the primary.
const server = spawn(process.execPath, [new URL('./accept-server.ts', import.meta.url).pathname], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: { ...process.env, DATABASE_URL: servers.primary.url },
});
const first = await new Promise<string>((resolve) => createInterface({ input: server.stdout! }).once('line', resolve));
const target = JSON.parse(first) as { mailroom: string; token: string; from: string };

type Mode = 'on' | 'local';

// The server's default for every session, its own connections included: a reload reaches sessions that
// did not set the setting themselves (the accept path's commit does not).
async function setMode(mode: Mode) {
  await admin.query(`ALTER SYSTEM SET synchronous_commit = '${mode}'`);
  await admin.query('SELECT pg_reload_conf()');
  await new Promise((resolve) => setTimeout(resolve, 300));
}

async function measure(mode: Mode, seconds: number) {
  await setMode(mode);
  const result = await driveAccept({
    base: target.mailroom,
    token: target.token,
    from: target.from,
    connections: CONNECTIONS,
    seconds,
  });
  return {
    mode,
    ok: result['2xx'],
    seconds: result.duration || seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

const line = (r: Awaited<ReturnType<typeof measure>>) =>
  `synchronous_commit=${r.mode.padEnd(5)} ${(r.ok / r.seconds).toFixed(0).padStart(6)} accepted/s   p50 ${r.p50} ms   p99 ${r.p99} ms   non-2xx ${r.non2xx}   errors ${r.errors}`;

try {
  const { rows } = await admin.query<{ sync_state: string; fsync: string; version: string }>(
    `SELECT sync_state, current_setting('fsync') AS fsync, current_setting('server_version') AS version
       FROM pg_stat_replication`,
  );
  console.log(
    `PostgreSQL ${rows[0]?.version} fsync=${rows[0]?.fsync}, one standby (${rows[0]?.sync_state}) on loopback; ` +
      `${CONNECTIONS} connections, ${DURATION} s each, ${ROUNDS} rounds`,
  );
  await measure('on', 3); // warm-up: JIT, connection pools, caches
  await measure('local', 3);
  const totals = { on: { ok: 0, seconds: 0 }, local: { ok: 0, seconds: 0 } };
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts with the other mode, so a drift of the machine's speed falls on both alike.
    const order: Mode[] = round % 2 === 0 ? ['on', 'local'] : ['local', 'on'];
    for (const mode of order) {
      const r = await measure(mode, DURATION);
      totals[mode].ok += r.ok;
      totals[mode].seconds += r.seconds;
      console.log(`round ${round + 1}  ${line(r)}`);
    }
  }
  const rate = (mode: Mode) => totals[mode].ok / totals[mode].seconds;
  console.log(
    `total: on ${rate('on').toFixed(0)} accepted/s, local ${rate('local').toFixed(0)} accepted/s; ` +
      `ratio (synchronous standby / local): ${(rate('on') / rate('local')).toFixed(3)}`,
  );
} finally {
  server.kill('SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  await admin.end();
  await servers.destroy();
}
