// Accept benchmark: POST /emails accepted per second and p99 latency, on PostgreSQL with durable
// commits (synchronous_commit on), beside a bare Fastify route on the same machine in the same run, and
// beside the floor of a durable accept: that route committing each body as one row before answering.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/accept.ts
//
// DURATION (seconds per measurement, default 15), CONNECTIONS (default 50) and PROFILE_DIR may be set.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { driveAccept } from './accept-message.ts';

const DURATION = Number(process.env.DURATION ?? 15);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

const settings = new pg.Client({ connectionString: process.env.DATABASE_URL });
await settings.connect();
const show = async (name: string) => (await settings.query(`SHOW ${name}`)).rows[0][name];
const durability = { synchronous_commit: await show('synchronous_commit'), fsync: await show('fsync') };
await settings.end();

// PROFILE_DIR: the server process writes a CPU profile there (node --cpu-prof) when it exits.
const profile = process.env.PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROFILE_DIR}`] : [];
const server = spawn(process.execPath, [...profile, new URL('./accept-server.ts', import.meta.url).pathname], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: process.env,
});
const first = await new Promise<string>((resolve) => createInterface({ input: server.stdout! }).once('line', resolve));
const target = JSON.parse(first) as { mailroom: string; bare: string; floor: string; token: string; from: string };

async function measure(name: string, url: string, seconds: number) {
  const result = await driveAccept({
    base: url,
    token: target.token,
    from: target.from,
    connections: CONNECTIONS,
    seconds,
  });
  const ok = result['2xx'];
  const perSecond = ok / (result.duration || seconds);
  return {
    name,
    perSecond,
    p99: result.latency.p99,
    p50: result.latency.p50,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

// Warm all up (JIT, connection pools, PostgreSQL caches), then measure each in turn.
await measure('warm-up', target.mailroom, 3);
await measure('warm-up', target.bare, 3);
await measure('warm-up', target.floor, 3);
const mailroom = await measure('POST /emails (Mailroom)', target.mailroom, DURATION);
const bare = await measure('POST /emails (bare Fastify)', target.bare, DURATION);
const floor = await measure('durable floor', target.floor, DURATION);

console.log(
  `PostgreSQL synchronous_commit=${durability.synchronous_commit} fsync=${durability.fsync}; ${CONNECTIONS} connections, ${DURATION} s each`,
);
for (const r of [mailroom, bare, floor]) {
  console.log(
    `${r.name.padEnd(28)} ${r.perSecond.toFixed(0).padStart(7)} accepted/s   p50 ${r.p50} ms   p99 ${r.p99} ms   non-2xx ${r.non2xx}   errors ${r.errors}`,
  );
}
console.log(`ratio (Mailroom / bare): ${(mailroom.perSecond / bare.perSecond).toFixed(3)}`);
// The floor: bare Fastify committing each body as one row before it answers (accept-server.ts).
console.log(
  `floor (durable floor / bare): ${(floor.perSecond / bare.perSecond).toFixed(3)}   Mailroom / floor: ${(mailroom.perSecond / floor.perSecond).toFixed(3)}`,
);

server.kill('SIGTERM');
await new Promise((resolve) => server.once('exit', resolve));
