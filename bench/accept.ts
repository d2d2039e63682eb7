// Accept benchmark: POST /emails accepted per second and p99 latency, on PostgreSQL with durable
// commits (synchronous_commit on), beside a bare Fastify route on the same machine in the same run, and
// beside three floors: the durable floor (that route committing each body as one row before answering),
// the storage floor (that route storing each message as Mailroom stores an accepted one, nothing else)
// and the API floor (Mailroom's own app doing all its API work but not storing the message). Each line
// says where the machine's time went per answer (from /proc: the server, PostgreSQL, this process
// driving the load, idle) and what 0.40 of bare Fastify leaves per answer.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/accept.ts
//
// DURATION (seconds per measurement, default 15), ROUNDS (default 1), CONNECTIONS (default 50) and
// PROFILE_DIR may be set.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { driveAccept } from './accept-message.ts';
import { cpuPerAnswer, describeCpu, readCpu } from './cpu-time.ts';
import { cpus } from 'node:os';

const DURATION = Number(process.env.DURATION ?? 15);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.ROUNDS ?? 1);
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
  env: { ...process.env, API_FLOOR: '1' },
});
const first = await new Promise<string>((resolve) => createInterface({ input: server.stdout! }).once('line', resolve));
const target = JSON.parse(first) as {
  mailroom: string;
  bare: string;
  floor: string;
  storage: string;
  api: string;
  token: string;
  from: string;
};

/** The server process's event loop: cumulative idle and active milliseconds (see accept-server.ts). */
const eventLoop = async () =>
  (await (await fetch(`${target.bare}/event-loop`)).json()) as { idle: number; active: number };

async function measure(name: string, url: string, seconds: number) {
  const loopBefore = await eventLoop();
  const before = readCpu(server.pid!);
  const result = await driveAccept({
    base: url,
    token: target.token,
    from: target.from,
    connections: CONNECTIONS,
    seconds,
  });
  const after = readCpu(server.pid!);
  const loopAfter = await eventLoop();
  const active = loopAfter.active - loopBefore.active;
  const ok = result['2xx'];
  const perSecond = ok / (result.duration || seconds);
  return {
    name,
    cpu: before && after && ok > 0 ? cpuPerAnswer(before, after, ok) : undefined,
    loopBusy: active / (active + loopAfter.idle - loopBefore.idle),
    perSecond,
    p99: result.latency.p99,
    p50: result.latency.p50,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

// Warm all up (JIT, connection pools, PostgreSQL caches), then measure each in turn, ROUNDS times: the
// machine's speed moves from minute to minute, so the ratios are taken within each round and the
// median of the rounds is the figure.
await measure('warm-up', target.mailroom, 3);
await measure('warm-up', target.bare, 3);
await measure('warm-up', target.floor, 3);
await measure('warm-up', target.storage, 3);
await measure('warm-up', target.api, 3);
console.log(
  `PostgreSQL synchronous_commit=${durability.synchronous_commit} fsync=${durability.fsync}; ${CONNECTIONS} connections, ${DURATION} s each, ${ROUNDS} round(s)`,
);
const ratios: Array<{
  mailroom: number;
  floor: number;
  storage: number;
  mailroomFloor: number;
  mailroomStorage: number;
  api: number;
  mailroomApi: number;
  bound: number;
}> = [];
for (let round = 1; round <= ROUNDS; round++) {
  const mailroom = await measure('POST /emails (Mailroom)', target.mailroom, DURATION);
  const bare = await measure('POST /emails (bare Fastify)', target.bare, DURATION);
  const floor = await measure('durable floor', target.floor, DURATION);
  const storage = await measure('storage floor', target.storage, DURATION);
  const api = await measure('API floor (not durable)', target.api, DURATION);
  if (ROUNDS > 1) console.log(`round ${round}:`);
  for (const r of [mailroom, bare, floor, storage, api]) {
    console.log(
      `${r.name.padEnd(28)} ${r.perSecond.toFixed(0).padStart(7)} accepted/s   p50 ${r.p50} ms   p99 ${r.p99} ms   non-2xx ${r.non2xx}   errors ${r.errors}`,
    );
    if (r.cpu) console.log(`${''.padEnd(28)} per answer: ${describeCpu(r.cpu)}`);
    // Near 100%: the server's one JavaScript thread, not the cores or PostgreSQL, set the rate.
    console.log(`${''.padEnd(28)} server's event loop busy ${(100 * r.loopBusy).toFixed(0)}% of the time`);
  }
  // 0.40 of bare Fastify as the machine's time per answer: all its cores' time divided by that rate.
  const budget = (cpus().length * 1e6) / (0.4 * bare.perSecond);
  console.log(
    `0.40 of bare = ${(0.4 * bare.perSecond).toFixed(0)} answers/s: ${budget.toFixed(0)} µs of the machine's ${cpus().length} cores per answer`,
  );
  ratios.push({
    mailroom: mailroom.perSecond / bare.perSecond,
    floor: floor.perSecond / bare.perSecond,
    storage: storage.perSecond / bare.perSecond,
    mailroomFloor: mailroom.perSecond / floor.perSecond,
    mailroomStorage: mailroom.perSecond / storage.perSecond,
    api: api.perSecond / bare.perSecond,
    mailroomApi: mailroom.perSecond / api.perSecond,
    bound: 1 / (bare.perSecond / api.perSecond + bare.perSecond / floor.perSecond - 1),
  });
}

const median = (key: keyof (typeof ratios)[number]) => {
  const sorted = ratios.map((r) => r[key]).sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return (sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2).toFixed(3);
};
const each = (key: keyof (typeof ratios)[number]) =>
  ROUNDS > 1 ? ` (rounds: ${ratios.map((r) => r[key].toFixed(3)).join(', ')})` : '';
const label = ROUNDS > 1 ? 'median of rounds' : 'one round';
console.log(`ratio (Mailroom / bare), ${label}: ${median('mailroom')}${each('mailroom')}`);
// The floor: bare Fastify committing each body as one row before it answers (accept-server.ts).
console.log(
  `floor (durable floor / bare): ${median('floor')}${each('floor')}   Mailroom / floor: ${median('mailroomFloor')}`,
);
// The storage floor stores the rows an accepted message is kept as, by Mailroom's own statement, with
// no API work at all: a bound on any accept path that stores them before it answers.
console.log(
  `storage floor / bare: ${median('storage')}${each('storage')}   Mailroom / storage floor: ${median('mailroomStorage')}`,
);
// The API floor does all of Mailroom's API work and stores nothing; its one JavaScript thread is what
// holds it (busy nearly all the time): about the most one process doing that work can answer, however
// (and whenever) it stores the message.
console.log(`API floor / bare: ${median('api')}${each('api')}   Mailroom / API floor: ${median('mailroomApi')}`);
// An estimate, not a bound, of what an accept path doing that API work and committing before it
// answers could reach: the machine's time per answer of the API floor plus what the cheapest durable
// write (the durable floor) adds to a bare answer, 1 / (1/api + 1/floor - 1) of bare. The two costs
// fall partly on different cores (the API on the server's thread, the write on PostgreSQL), so a
// design that overlaps them well could do somewhat better.
console.log(
  `estimate, API work + the cheapest durable write (times added): ${median('bound')}${each('bound')} of bare`,
);

server.kill('SIGTERM');
await new Promise((resolve) => server.once('exit', resolve));
