// Memory benchmark: the resident memory (RSS) of a Mailroom process as its work piles up, against its own
// RSS after the first 10,000 items of the same work, in the same run. Three processes, one after the other:
//
// - accept: the API (bench/accept-server.ts, a fresh PostgreSQL database) takes ACCEPTS (1,000,000)
//   two-recipient sends from 50 connections; its RSS is read after 10,000 and at each CHECKPOINT after.
// - webhooks: a process running only the webhook worker delivers WEBHOOKS (100,000) signed events to a
//   loopback receiver in this process; events are fanned out 10,000 at a time, each batch once the last
//   is delivered, and the worker's RSS is read after the first 10,000 and after each batch.
// - webhook floor: the same work done by the least a Node process can do (pg + undici, no Mailroom; see
//   runWebhookFloor), read the same way: what growth V8, undici and pg bring by themselves.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/memory.ts
//
// ONLY=accept / ONLY=webhooks (the worker and its floor) runs one side. RSS is read from /proc/<pid>/status (VmRSS) after the work
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
  if (ONLY !== 'accept') results.push(await webhookSides());
  console.log(results.join('\n'));
}

interface WebhookSide {
  /** [delivered so far, RSS in MiB] after each batch. */
  points: Array<[number, number]>;
  /** The JavaScript heap a full collection leaves at the end, in MiB. */
  live: number;
}

/** Mailroom's webhook worker, then the floor, each in its own process: their RSS readings side by side. */
async function webhookSides(): Promise<string> {
  const mailroom = await webhookSide('--webhook-worker', 'webhooks');
  const floor = await webhookSide('--webhook-floor', 'webhook floor');
  const growth = (side: WebhookSide) => side.points.at(-1)![1] / side.points[0]![1];
  return [
    `${summary('webhooks (signed deliveries, PostgreSQL)', 'delivered', mailroom.points)}`,
    `  live JavaScript heap after a full collection at the end: ${mib(mailroom.live)}`,
    `${summary('webhook floor (pg + undici, no Mailroom)', 'delivered', floor.points)}`,
    `  live JavaScript heap after a full collection at the end: ${mib(floor.live)}`,
    `growth (Mailroom's ratio / the floor's): ${(growth(mailroom) / growth(floor)).toFixed(3)}`,
  ].join('\n');
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

/**
 * One webhook process (`--webhook-worker`: Mailroom's webhook worker; `--webhook-floor`: the floor)
 * delivering WEBHOOKS events to a loopback receiver here, its RSS read after each batch of FIRST.
 */
async function webhookSide(kind: '--webhook-worker' | '--webhook-floor', name: string): Promise<WebhookSide> {
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

  const worker = spawn(process.execPath, ['--expose-gc', import.meta.filename, kind, url], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: process.env,
  });
  const lines = createInterface({ input: worker.stdout! });
  // A process that ends before it is told to (a failed delivery, a lost database) fails the benchmark
  // instead of leaving it waiting for deliveries that will not come.
  let ending = false;
  const died = new Promise<never>((_resolve, reject) =>
    worker.once('exit', (code) => {
      if (!ending) reject(new Error(`${name}: its process exited with ${code} before the end`));
    }),
  );
  died.catch(() => {});
  const next = () => Promise.race([new Promise<string>((resolve) => lines.once('line', resolve)), died]);
  await next(); // ready
  const points: Array<[number, number]> = [];
  for (let sent = 0; sent < WEBHOOKS;) {
    const batch = Math.min(FIRST, WEBHOOKS - sent);
    // The worker's process fans out the batch (one statement) and goes on delivering.
    worker.stdin!.write(`fan ${batch}\n`);
    sent += batch;
    await Promise.race([until(sent), died]);
    await settle();
    points.push([sent, rssMiB(worker.pid!)]);
    // What the process itself says it holds: its JavaScript heap (garbage included) and memory outside it.
    worker.stdin!.write('memory\n');
    const usage = JSON.parse(await next()) as NodeJS.MemoryUsage;
    console.error(
      `${name}: ${sent.toLocaleString('en')} delivered, RSS ${mib(points.at(-1)![1])} ` +
        `(heap ${mib(usage.heapUsed / 2 ** 20)} used of ${mib(usage.heapTotal / 2 ** 20)}, external ${mib(usage.external / 2 ** 20)})`,
    );
  }
  // Once, after the last reading (a collection would change the readings after it): what is alive.
  worker.stdin!.write('live\n');
  const live = (JSON.parse(await next()) as NodeJS.MemoryUsage).heapUsed / 2 ** 20;
  ending = true;
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.stdin!.end();
  await exited;
  receiver.close();
  return { points, live };
}

async function stop(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
}

/**
 * The webhook side's process: a fresh database with one organization and an endpoint at `url`, the
 * webhook worker running, taking the commands of serveCommands (`fan N` fans out N `email.delivered`
 * events). Standard input's end stops it and drops the database.
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
  await serveCommands(async (count) => {
    await fanOut(count);
    fanned += count;
  });
  await worker.close();
  await db.close();
  await created.drop();
}

/**
 * The commands a webhook process (the worker's or the floor's) takes on standard input, one a line, until
 * it ends: `fan N` makes N events, `memory` prints process.memoryUsage() as a JSON line, `live` the same
 * after a full collection (what is alive). Prints `ready` first.
 */
async function serveCommands(fan: (count: number) => Promise<void>): Promise<void> {
  process.stdout.write('ready\n');
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, argument] = line.split(' ');
    if (command === 'memory' || command === 'live') {
      if (command === 'live') (globalThis as { gc?: () => void }).gc?.();
      process.stdout.write(`${JSON.stringify(process.memoryUsage())}\n`);
    } else if (command === 'fan') {
      await fan(Number(argument));
    }
  }
}

/**
 * The floor of a webhook worker, for comparison: the least a process can do to deliver stored events.
 * The same commands as the worker's process. Events are rows of one table holding the body as sent;
 * a loop takes 256 at a time (deleted as taken: no retry, no record of the answer), signs each with
 * the same HMAC and POSTs it with undici, as many in flight as the worker's connections to one
 * endpoint. What it holds is what any Node process doing this work holds (V8, undici, pg).
 */
async function runWebhookFloor(url: string): Promise<void> {
  const { default: pg } = await import('pg');
  const { Pool } = await import('undici');
  const { loadConfig } = await import('../src/platform/config.ts');
  const { signatureHeader } = await import('../src/webhooks/signature.ts');
  const { createPostgresDatabase } = await import('../test/helpers/database.ts');

  const created = await createPostgresDatabase();
  const db = new pg.Pool({ connectionString: created.url, max: 2 });
  await db.query('CREATE TABLE floor_events (id bigserial PRIMARY KEY, body text NOT NULL)');
  const target = new URL(url);
  const connections = loadConfig({}).webhookConnectionsPerEndpoint;
  const http = new Pool(target.origin, { connections });
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  let fanned = 0;
  let wake: (() => void) | undefined;
  let stopping = false;

  const deliverAll = async () => {
    while (!stopping) {
      const { rows } = await db.query<{ body: string }>(
        'DELETE FROM floor_events WHERE id IN (SELECT id FROM floor_events ORDER BY id LIMIT 256) RETURNING body',
      );
      if (rows.length === 0) {
        // Woken by the next fan-out, or after 50 ms (one that committed while this DELETE ran).
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 50);
        });
        continue;
      }
      let next = 0;
      await Promise.all(
        Array.from({ length: connections }, async () => {
          while (next < rows.length) {
            const body = rows[next++]!.body;
            const res = await http.request({
              path: target.pathname,
              method: 'POST',
              body,
              headers: {
                'content-type': 'application/json',
                'x-service-signature': signatureHeader([secret], Math.floor(Date.now() / 1000), body),
              },
            });
            await res.body.text();
          }
        }),
      );
    }
  };
  // A failed delivery ends the process (the benchmark sees it end early) after dropping its database.
  const delivering = deliverAll().catch(async (error: unknown) => {
    console.error('webhook floor: a delivery failed:', error);
    await created.drop().catch(() => {});
    process.exit(1);
  });

  await serveCommands(async (count) => {
    // The body the worker sends for the same event: its type, time and the message's fields.
    await db.query(
      `INSERT INTO floor_events (body)
       SELECT jsonb_build_object('type', 'email.delivered', 'created_at', clock_timestamp(),
                'data', jsonb_build_object('email_id', gen_random_uuid(), 'from', 'Shop <shop@example.test>',
                  'to', jsonb_build_array('alice@example.com'), 'subject', 'Your receipt ' || n,
                  'recipient', 'alice@example.com', 'smtp_code', 250, 'response', '250 2.0.0 OK'))::text
         FROM generate_series($1::int + 1, $1::int + $2::int) AS n`,
      [fanned, count],
    );
    fanned += count;
    wake?.();
  });
  stopping = true;
  wake?.();
  await delivering;
  await http.close();
  await db.end();
  await created.drop();
}

// Run as the webhook worker's own process or the floor's (see webhookSide), or as the benchmark.
if (process.argv[2] === '--webhook-worker') await runWebhookWorker(process.argv[3]!);
else if (process.argv[2] === '--webhook-floor') await runWebhookFloor(process.argv[3]!);
else await main();
