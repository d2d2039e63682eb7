// Webhook benchmark: signed deliveries per second to a loopback receiver (events fanned out in the
// database, claimed by the webhook worker, signed, POSTed, answered 200, recorded), beside raw undici
// POSTs of the same bodies over the same number of connections, in the same run.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/webhooks.ts
//
// EVENTS per round (default 10,000), ROUNDS (default 3: the raw side's rate varies by a third from
// run to run on a small machine, so the median ratio is printed), WARMUP (untimed rounds first, default
// 1: both sides' code is compiled by V8 during its first round, which ran a third slower). Connections:
// MAILROOM_WEBHOOK_CONNECTIONS_PER_ENDPOINT's default, 4, for both.
import { createServer } from 'node:http';
import { Pool } from 'undici';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { emitEvent } from '../src/webhooks/fan-out.ts';
import { createEndpoint } from '../src/webhooks/endpoints.ts';
import { startWebhookDelivery } from '../src/webhooks/start-webhooks.ts';
import { signatureHeader } from '../src/webhooks/signature.ts';
import { createOrganization } from '../src/tenancy/organizations.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { workerBatchSize } from '../src/platform/metrics.ts';

const EVENTS = Number(process.env.EVENTS ?? 10_000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const WARMUP = Number(process.env.WARMUP ?? 1);
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

let received = 0;
let done: (() => void) | undefined;
const receiver = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.end('ok');
    if (++received >= EVENTS) done?.();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
const allReceived = () => new Promise<void>((resolve) => (received >= EVENTS ? resolve() : (done = resolve)));

const created = await createPostgresDatabase();
const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
const db = openPostgres(created.url, 10);
await migrate(db);
const org = await createOrganization(db, { name: 'bench' });
const endpoint = await createEndpoint(db, config, org.id, { endpoint: url, events: [] });
const data = (i: number) => ({
  email_id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
  from: 'Shop <shop@example.test>',
  to: ['alice@example.com'],
  subject: 'Your receipt',
  tags: null,
  recipient: 'alice@example.com',
  smtp_code: 250,
  response: '250 2.0.0 OK',
});
const log = { error: (...args: unknown[]) => console.error(...args), warn: () => {} };
const bodies = Array.from({ length: EVENTS }, (_, i) =>
  JSON.stringify({ id: `evt_${i}`, type: 'email.delivered', created_at: new Date().toISOString(), data: data(i) }),
);

/** Mailroom: EVENTS events fanned out before the worker starts (the run times delivery alone). */
async function mailroomRound(round: number): Promise<number> {
  await db.transaction(async (tx) => {
    for (let i = 0; i < EVENTS; i++) await emitEvent(tx, org.id, 'email.delivered', data(round * EVENTS + i));
  });
  received = 0;
  const started = performance.now();
  const worker = await startWebhookDelivery(db, config, log);
  await allReceived();
  const seconds = (performance.now() - started) / 1000;
  await worker.close();
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'succeeded'",
  );
  if (rows[0]!.n !== (round + 1) * EVENTS) throw new Error(`${rows[0]!.n} deliveries recorded as succeeded`);
  return seconds;
}

/** Raw undici: the same bodies and a signature header, the same connections, as many in flight. */
async function rawRound(): Promise<number> {
  received = 0;
  const pool = new Pool(new URL(url).origin, { connections: config.webhookConnectionsPerEndpoint });
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: config.webhookConnectionsPerEndpoint }, async () => {
      while (next < EVENTS) {
        const body = bodies[next++]!;
        const res = await pool.request({
          path: '/hook',
          method: 'POST',
          body,
          headers: {
            'content-type': 'application/json',
            'x-service-signature': signatureHeader([endpoint.signing_secret], Math.floor(Date.now() / 1000), body),
          },
        });
        await res.body.text();
      }
    }),
  );
  await allReceived();
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  return seconds;
}

console.log(
  `${EVENTS} events to one loopback endpoint, ${config.webhookConnectionsPerEndpoint} connections, PostgreSQL; ${WARMUP} warm-up and ${ROUNDS} rounds, each Mailroom then raw`,
);
const ratios: number[] = [];
for (let round = 0; round < WARMUP + ROUNDS; round++) {
  const mailroomRate = EVENTS / (await mailroomRound(round));
  const rawRate = EVENTS / (await rawRound());
  if (round < WARMUP) {
    console.log(`warm-up round ${round + 1} (not counted): ratio ${(mailroomRate / rawRate).toFixed(3)}`);
    continue;
  }
  ratios.push(mailroomRate / rawRate);
  console.log(
    `round ${round - WARMUP + 1}: Mailroom signed deliveries ${mailroomRate.toFixed(0).padStart(6)} /s (recorded as succeeded)   raw undici POSTs ${rawRate.toFixed(0).padStart(6)} /s   ratio ${(mailroomRate / rawRate).toFixed(3)}`,
  );
}
receiver.close();
await db.close();
await created.drop();
const sorted = [...ratios].sort((a, b) => a - b);
// With an even number of rounds, the mean of the middle two.
const median = (sorted[Math.floor((sorted.length - 1) / 2)]! + sorted[Math.floor(sorted.length / 2)]!) / 2;
console.log(
  `ratio (Mailroom / raw): median ${median.toFixed(3)}, from ${sorted[0]!.toFixed(3)} to ${sorted.at(-1)!.toFixed(3)}`,
);
// What the database saw: statements per kind of batch, and items per statement.
const batches = (await workerBatchSize.get()).values;
const statements = batches
  .filter((value) => value.metricName === 'mailroom_worker_batch_items_count')
  .map((count) => {
    const sum = batches.find(
      (value) => value.metricName === 'mailroom_worker_batch_items_sum' && value.labels.batch === count.labels.batch,
    )!.value;
    return `${count.labels.batch} ${count.value} (${(sum / count.value).toFixed(1)} each)`;
  });
console.log(`batches: ${statements.join(', ')}`);
