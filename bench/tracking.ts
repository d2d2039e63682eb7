// Tracking benchmark: opens (GET /t/o/:token → GIF) and clicks (GET /t/c/:token → 302) recorded per
// second on PostgreSQL, beside bare Fastify routes that answer the same without recording anything.
// Each request picks one of 1,000 recipients' signed links at random, so the run mixes first opens
// (a timeline entry and its webhook fan-out) with repeats (found already recorded, nothing written).
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/tracking.ts
//
// DURATION (seconds per measurement, default 10) and CONNECTIONS (default 50) may be set.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';

const DURATION = Number(process.env.DURATION ?? 10);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

const server = spawn(process.execPath, [new URL('./accept-server.ts', import.meta.url).pathname], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: process.env,
});
const first = await new Promise<string>((resolve) => createInterface({ input: server.stdout! }).once('line', resolve));
const target = JSON.parse(first) as { mailroom: string; bare: string; opens: string[]; clicks: string[] };

async function measure(name: string, base: string, paths: string[], expected: number, seconds: number) {
  const result = await autocannon({
    url: base,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        setupRequest: (request) => ({ ...request, path: paths[Math.floor(Math.random() * paths.length)]! }),
      },
    ],
  });
  const answered = expected === 200 ? result['2xx'] : result['3xx'];
  return {
    name,
    perSecond: answered / (result.duration || seconds),
    p50: result.latency.p50,
    p99: result.latency.p99,
    other: result.requests.total - answered,
    errors: result.errors,
  };
}

await measure('warm-up', target.mailroom, target.opens, 200, 2);
await measure('warm-up', target.bare, target.opens, 200, 2);
const results = [
  await measure('open pixel (Mailroom)', target.mailroom, target.opens, 200, DURATION),
  await measure('open pixel (bare Fastify)', target.bare, target.opens, 200, DURATION),
  await measure('click redirect (Mailroom)', target.mailroom, target.clicks, 302, DURATION),
  await measure('click redirect (bare Fastify)', target.bare, target.clicks, 302, DURATION),
];

console.log(`PostgreSQL; ${CONNECTIONS} connections, ${DURATION} s each; 1,000 recipients' links, picked at random`);
for (const r of results) {
  console.log(
    `${r.name.padEnd(30)} ${r.perSecond.toFixed(0).padStart(6)}/s   p50 ${r.p50} ms   p99 ${r.p99} ms   other ${r.other}   errors ${r.errors}`,
  );
}
console.log(`ratio opens (Mailroom / bare): ${(results[0]!.perSecond / results[1]!.perSecond).toFixed(3)}`);
console.log(`ratio clicks (Mailroom / bare): ${(results[2]!.perSecond / results[3]!.perSecond).toFixed(3)}`);

server.kill('SIGTERM');
await new Promise((resolve) => server.once('exit', resolve));
