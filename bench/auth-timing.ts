// Does an unknown bearer token cost the same as a known one? Resolves tokens through the real app
// (app.inject, so no network noise) against the configured database, interleaving known, unknown and
// malformed tokens, and prints the median and p90 time of each kind.
//
//   node bench/auth-timing.ts                      # PGlite in memory
//   DATABASE_URL=postgres://… node bench/auth-timing.ts
import { performance } from 'node:perf_hooks';
import { buildTestApp, createTestOrganization } from '../test/helpers/app.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 3000);
const t = await buildTestApp();
const org = await createTestOrganization(t.db, t.config);
const kinds = {
  // A sending_access key on a full_access route: found, then refused, so all three kinds stop right
  // after the look-up and only the look-up is compared.
  known: `Bearer ${org.sendingKey}`,
  unknown: `Bearer mr_${'A'.repeat(43)}`,
  malformed: 'Bearer x',
} as const;
const samples: Record<keyof typeof kinds, number[]> = { known: [], unknown: [], malformed: [] };

for (let i = 0; i < ROUNDS + 200; i++) {
  for (const kind of Object.keys(kinds) as Array<keyof typeof kinds>) {
    const start = performance.now();
    await t.app.inject({ method: 'GET', url: '/api-keys', headers: { authorization: kinds[kind] } });
    if (i >= 200) samples[kind].push(performance.now() - start); // the first 200 warm up
  }
}

const pct = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.floor(values.length * p)]!;
console.log(`database: ${t.db.kind}, ${ROUNDS} requests of each kind (GET /api-keys, all answered 401)`);
for (const [kind, values] of Object.entries(samples)) {
  console.log(`${kind.padEnd(10)} median ${pct(values, 0.5).toFixed(3)} ms   p90 ${pct(values, 0.9).toFixed(3)} ms`);
}
await t.close();
