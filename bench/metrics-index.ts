// What the email metrics' index (email_events_metrics_idx, on the timeline's organization and time) costs
// the writes it rides on. Every outcome of every recipient is a timeline entry, so the index is one more
// B-tree insert per entry on the delivery path. Two copies of the timeline table, one with the index and
// one without (both keep the table's other indexes), take the same multi-row inserts (BATCH entries a
// statement, as delivery writes outcomes for a group of copies at once), in alternating rounds so that a
// machine busy in one round is busy for both. Prints entries written per second for each, and the ratio.
//
//   node bench/metrics-index.ts                                                          (PGlite)
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/metrics-index.ts  (PostgreSQL)
//
// ENTRIES (default 200,000 per table), BATCH (default 100), ROUNDS (default 10).
import { performance } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import { buildTestApp } from '../test/helpers/app.ts';

const ENTRIES = Number(process.env.ENTRIES ?? 200_000);
const BATCH = Number(process.env.BATCH ?? 100);
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const t = await buildTestApp();

const TABLES = { without: 'bench_events_plain', with: 'bench_events_metrics' } as const;
for (const table of Object.values(TABLES)) {
  await t.db.query(`DROP TABLE IF EXISTS ${table}`);
  // The timeline's columns, identity and indexes (the once-only key, the per-message order, the metrics
  // one), without the foreign key: there are no messages to point at.
  await t.db.query(`CREATE TABLE ${table} (LIKE email_events INCLUDING ALL)`);
}
const { rows: metricsIndex } = await t.db.query<{ indexname: string }>(
  `SELECT indexname FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%(organization_id, created_at)'`,
  [TABLES.without],
);
if (metricsIndex.length !== 1) throw new Error('the copy of the timeline has no metrics index to drop');
await t.db.query(`DROP INDEX ${metricsIndex[0]!.indexname}`);

// Ten organizations, as a shared server has: the index's inserts land in ten places, not one.
const organizations = Array.from({ length: 10 }, () => randomUUID());
const TYPES = ['accepted', 'sent', 'delivered', 'opened', 'clicked'];

async function writeRound(table: string, entries: number): Promise<number> {
  const started = performance.now();
  for (let done = 0; done < entries; done += BATCH) {
    const n = Math.min(BATCH, entries - done);
    const email = Array.from({ length: n }, () => randomUUID());
    await t.db.query(
      `INSERT INTO ${table} (id, email_id, organization_id, type, recipient, data)
       SELECT gen_random_uuid(), e, o, ty, 'someone@example.com', '{"smtp_code":250}'::jsonb
         FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS x(e, o, ty)`,
      [
        email,
        email.map((_, i) => organizations[(done + i) % organizations.length]),
        email.map((_, i) => TYPES[(done + i) % TYPES.length]),
      ],
    );
  }
  return performance.now() - started;
}

console.log(`database: ${t.db.kind}; ${ENTRIES.toLocaleString('en')} entries per table, ${BATCH} a statement`);
// A warm-up round for each, not counted: the first statements of a connection cost more.
for (const table of Object.values(TABLES)) await writeRound(table, BATCH * 20);
const elapsed = { without: 0, with: 0 };
const perRound = Math.ceil(ENTRIES / ROUNDS);
for (let round = 0; round < ROUNDS; round++) {
  // Each round starts with the other table, so neither always writes second.
  const order = round % 2 === 0 ? (['without', 'with'] as const) : (['with', 'without'] as const);
  for (const which of order) elapsed[which] += await writeRound(TABLES[which], perRound);
}
const rate = (ms: number) => (perRound * ROUNDS * 1000) / ms;
console.log(`without the metrics index  ${rate(elapsed.without).toFixed(0).padStart(8)} entries/s`);
console.log(`with the metrics index     ${rate(elapsed.with).toFixed(0).padStart(8)} entries/s`);
console.log(
  `ratio (with / without)     ${(rate(elapsed.with) / rate(elapsed.without)).toFixed(3)}   ` +
    `(${(((elapsed.with - elapsed.without) * 1000) / (perRound * ROUNDS)).toFixed(1)} µs more per entry)`,
);
for (const table of Object.values(TABLES)) await t.db.query(`DROP TABLE ${table}`);
await t.close();
