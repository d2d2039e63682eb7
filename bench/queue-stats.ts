// What a metrics scrape costs the database: the queue's depth and lag (mailroom_queue_due_jobs,
// mailroom_queue_oldest_due_seconds) read with JOBS due jobs waiting (default 1,000,000), against an
// empty queue. Prints the median and p90 of ROUNDS (default 50) reads of both queues.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/queue-stats.ts
import { performance } from 'node:perf_hooks';
import { queueStats, QUEUES } from '../src/queue/jobs.ts';
import { buildTestApp } from '../test/helpers/app.ts';

const JOBS = Number(process.env.JOBS ?? 1_000_000);
const ROUNDS = Number(process.env.ROUNDS ?? 50);
const t = await buildTestApp();

async function measure(label: string) {
  const times: number[] = [];
  let stats = await queueStats(t.db, QUEUES);
  for (let i = 0; i < ROUNDS; i++) {
    const started = performance.now();
    stats = await queueStats(t.db, QUEUES);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const pct = (p: number) => times[Math.floor(times.length * p)]!.toFixed(2);
  const shown = stats.map((s) => `${s.queue} ${s.due} due, oldest ${s.oldestDueSeconds.toFixed(0)} s`).join('; ');
  console.log(`${label.padEnd(28)} median ${pct(0.5)} ms   p90 ${pct(0.9)} ms   (${shown})`);
}

console.log(`database: ${t.db.kind}`);
await measure('empty queues');
await t.db.query(
  `INSERT INTO jobs (queue, payload, run_at)
   SELECT 'deliver-email', jsonb_build_object('email_id', gen_random_uuid()), now() - make_interval(secs => i)
     FROM generate_series(1, $1::int) i`,
  [JOBS],
);
await t.db.query('ANALYZE jobs');
await measure(`${JOBS.toLocaleString('en')} due jobs`);
await t.close();
