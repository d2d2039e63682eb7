// Memory benchmark: the resident memory (RSS) of a Mailroom process as its work piles up, against its own
// RSS after the first 10,000 items of the same work, in the same run. Two processes, one after the other:
//
// - accept: the API (bench/accept-server.ts, a fresh PostgreSQL database) takes ACCEPTS (1,000,000)
//   two-recipient sends from 50 connections; its RSS is read after 10,000 and at each CHECKPOINT after.
// - webhooks: a process running only the webhook worker delivers WEBHOOKS (100,000) signed events to a
//   loopback receiver in this process; events are fanned out 10,000 at a time, each batch once the last
//   is delivered, and the worker's RSS is read after the first 10,000 and after each batch.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/memory.ts
//
// ONLY=accept / ONLY=webhooks runs one side. RSS is read from /proc/<pid>/status (VmRSS) after the work
// has settled for SETTLE_MS (1,000: the request log's entries written, sockets idle). The target: after
// all of it, RSS within 1.2 × its value after the first 10,000.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { acceptMessage } from './accept-message.ts';

const ACCEPTS = Number(process.env.ACCEPTS ?? 1_000_000);
const WEBHOOKS = Number(process.env.WEBHOOKS ?? 100_000);
const FIRST = 10_000;
const SETTLE_MS = Number(process.env.SETTLE_MS ?? 1000);
const TARGET = 1.2;
const ONLY = process.env.ONLY;
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

async function main(): Promise<void> {
  const results: string[] = [];
  if (ONLY !== 'webhooks') results.push(await acceptSide());
  if (ONLY !== 'accept') results.push(await webhookSide());
  console.log(results.join('\n'));
}

/** VmRSS of a process, in MiB. */
function rssMiB(pid: number): number {
  const kib = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
  return kib / 1024;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
const mib = (value: number) => `${value.toFixed(0)} MiB`;

/** The line of figures a side prints: each checkpoint's RSS, and the last against the first. */
function summary(name: string, unit: string, points: Array<[number, number]>): string {
  const [, first] = points[0]!;
  const [count, last] = points.at(-1)!;
  const ratio = last / first;
  return (
    `${name}: RSS after ${points.map(([n, rss]) => `${n.toLocaleString('en')} ${unit} ${mib(rss)}`).join(', ')}\n` +
    `ratio (RSS after ${count.toLocaleString('en')} / after ${FIRST.toLocaleString('en')}): ${ratio.toFixed(3)}   ` +
    `(target ≤ ${TARGET}: ${ratio <= TARGET ? 'met' : 'NOT met'})`
  );
}

async function acceptSide(): Promise<string> {
  const server = spawn(process.execPath, [new URL('./accept-server.ts', import.meta.url).pathname], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: process.env,
  });
  const first = await new Promise<string>((resolve) =>
    createInterface({ input: server.stdout! }).once('line', resolve),
  );
  const target = JSON.parse(first) as { mailroom: string; token: string; from: string };
  const send = async (amount: number) => {
    const result = await autocannon({
      url: `${target.mailroom}/emails`,
      method: 'POST',
      connections: 50,
      amount,
      headers: { authorization: `Bearer ${target.token}`, 'content-type': 'application/json' },
      body: acceptMessage(target.from),
    });
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} non-2xx, ${result.errors} errors`);
    return result['2xx'];
  };
  const checkpoints = [FIRST, ...[0.1, 0.25, 0.5, 0.75, 1].map((f) => Math.round(ACCEPTS * f))].filter(
    (n, i, all) => n >= FIRST && n <= ACCEPTS && all.indexOf(n) === i,
  );
  const points: Array<[number, number]> = [];
  let accepted = 0;
  const started = performance.now();
  for (const checkpoint of checkpoints) {
    accepted += await send(checkpoint - accepted);
    await settle();
    points.push([accepted, rssMiB(server.pid!)]);
    const rate = accepted / ((performance.now() - started) / 1000);
    console.error(
      `accept: ${accepted.toLocaleString('en')} accepted (${rate.toFixed(0)}/s), RSS ${mib(points.at(-1)![1])}`,
    );
  }
  await stop(server);
  return summary('accept (POST /emails, PostgreSQL)', 'accepted', points);
}

async function webhookSide(): Promise<string> {
  let received = 0;
  let waiting: { count: number; resolve: () => void } | undefined;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.end('ok');
      received += 1;
      if (waiting && received >= waiting.count) waiting.resolve();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  const until = (count: number) =>
    new Promise<void>((resolve) => (received >= count ? resolve() : (waiting = { count, resolve })));

  const worker = spawn(process.execPath, ['--expose-gc', import.meta.filename, '--webhook-worker', url], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: process.env,
  });
  const lines = createInterface({ input: worker.stdout! });
  const next = () => new Promise<string>((resolve) => lines.once('line', resolve));
  await next(); // ready
  const points: Array<[number, number]> = [];
  for (let sent = 0; sent < WEBHOOKS;) {
    const batch = Math.min(FIRST, WEBHOOKS - sent);
    // The worker's process fans out the batch (one statement) and goes on delivering.
    worker.stdin!.write(`fan ${batch}\n`);
    sent += batch;
    await until(sent);
    await settle();
    points.push([sent, rssMiB(worker.pid!)]);
    // What the process itself says it holds: its JavaScript heap (garbage included) and memory outside it.
    worker.stdin!.write('memory\n');
    const usage = JSON.parse(await next()) as NodeJS.MemoryUsage;
    console.error(
      `webhooks: ${sent.toLocaleString('en')} delivered, RSS ${mib(points.at(-1)![1])} ` +
        `(heap ${mib(usage.heapUsed / 2 ** 20)} used of ${mib(usage.heapTotal / 2 ** 20)}, external ${mib(usage.external / 2 ** 20)})`,
    );
  }
  // Once, after the last reading (a collection would change the readings after it): what is alive.
  worker.stdin!.write('live\n');
  const live = (JSON.parse(await next()) as NodeJS.MemoryUsage).heapUsed / 2 ** 20;
  worker.stdin!.end();
  await new Promise((resolve) => worker.once('exit', resolve));
  receiver.close();
  return `${summary('webhooks (signed deliveries, PostgreSQL)', 'delivered', points)}\n  live JavaScript heap after a full collection at the end: ${mib(live)}`;
}

async function stop(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
}

/**
 * The webhook side's process: a fresh database with one organization and an endpoint at `url`, the
 * webhook worker running. Each line on standard input is a command: `fan N` fans out N `email.delivered`
 * events, `memory` prints process.memoryUsage() as a JSON line, `live` the same after a full collection.
 * Standard input's end stops it and drops the database.
 */
async function runWebhookWorker(url: string): Promise<void> {
  const { loadConfig } = await import('../src/platform/config.ts');
  const { openPostgres } = await import('../src/platform/db/postgres.ts');
  const { migrate } = await import('../src/platform/db/migrate.ts');
  const { createOrganization } = await import('../src/tenancy/organizations.ts');
  const { createEndpoint } = await import('../src/webhooks/endpoints.ts');
  const { startWebhookDelivery } = await import('../src/webhooks/start-webhooks.ts');
  const { fanOutCtes } = await import('../src/webhooks/fan-out.ts');
  const { createPostgresDatabase } = await import('../test/helpers/database.ts');

  const created = await createPostgresDatabase();
  const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
  const db = openPostgres(created.url, 10);
  await migrate(db);
  const org = await createOrganization(db, { name: 'bench' });
  await createEndpoint(db, config, org.id, { endpoint: url, events: [] });
  const worker = await startWebhookDelivery(db, config, { error: (...args) => console.error(...args), warn: () => {} });
  let fanned = 0;
  // Events as the delivery path records them, many in one statement: each row of `event` is one event.
  const fanOut = (count: number) =>
    db.query(
      `WITH event AS (
         SELECT gen_random_uuid() AS id, clock_timestamp() AS created_at,
                jsonb_build_object('email_id', gen_random_uuid(), 'from', 'Shop <shop@example.test>',
                  'to', jsonb_build_array('alice@example.com'), 'subject', 'Your receipt ' || n,
                  'recipient', 'alice@example.com', 'smtp_code', 250, 'response', '250 2.0.0 OK') AS data
           FROM generate_series($2::int + 1, $2::int + $3::int) AS n
       )${fanOutCtes({ org: '$1::uuid', type: `'email.delivered'::text`, data: 'event.data' })}
       SELECT 1`,
      [org.id, fanned, count],
    );
  process.stdout.write('ready\n');
  const input = createInterface({ input: process.stdin });
  for await (const line of input) {
    const [command, argument] = line.split(' ');
    if (command === 'memory' || command === 'live') {
      // live: what a full collection leaves.
      if (command === 'live') (globalThis as { gc?: () => void }).gc?.();
      process.stdout.write(`${JSON.stringify(process.memoryUsage())}\n`);
    } else if (command === 'fan') {
      await fanOut(Number(argument));
      fanned += Number(argument);
    }
  }
  await worker.close();
  await db.close();
  await created.drop();
}

// Run as the webhook worker's own process (see webhookSide), or as the benchmark.
if (process.argv[2] === '--webhook-worker') await runWebhookWorker(process.argv[3]!);
else await main();
