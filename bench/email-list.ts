// Does a page of GET /emails cost the same with a million messages stored as with a thousand? Fills one
// organization with MESSAGES messages (written in bulk by SQL, each with a recipient and a timeline entry,
// one in ten bounced), measures a set of list requests through the real app (app.inject, so no network
// noise) at SMALL stored messages and again at MESSAGES, and prints the median and p90 of each.
//
//   DATABASE_URL=postgres://… node bench/email-list.ts          # MESSAGES=1000000, SMALL=1000
//   MESSAGES=100000 node bench/email-list.ts                    # PGlite in memory, smaller
import { performance } from 'node:perf_hooks';
import { bearer, buildTestApp, createTestOrganization } from '../test/helpers/app.ts';
import { fillMessages } from './fill-messages.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 1_000_000);
const SMALL = Number(process.env.SMALL ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 300);

const t = await buildTestApp();
const org = await createTestOrganization(t.db, t.config, 'bench');
const domainId = (await t.db.query<{ id: string }>('SELECT id FROM domains WHERE organization_id = $1', [org.id]))
  .rows[0]!.id;
let stored = 0;

/** Messages stored .. to - 1 (see fill-messages.ts). */
async function fill(to: number) {
  await fillMessages({ db: t.db, organizationId: org.id, domainId, domain: org.domain }, stored, to);
  stored = to;
}

/** The email id at position i (0 = oldest). */
async function idAt(i: number): Promise<string> {
  const { rows } = await t.db.query<{ id: string }>(
    `SELECT id FROM emails WHERE organization_id = $1 AND message_id = '<' || $2::int || '@' || $3 || '>'`,
    [org.id, i, org.domain],
  );
  return rows[0]!.id;
}

async function measure(label: string) {
  const middle = await idAt(Math.floor(stored / 2));
  const requests: Record<string, string> = {
    'first page (20)': '/emails',
    'first page (100)': '/emails?limit=100',
    'after the middle': `/emails?after=${middle}`,
    'before the middle': `/emails?before=${middle}`,
    'recipient (one message)': `/emails?recipient=user${Math.floor(stored / 3)}@example.com`,
    'last_event=bounced': '/emails?last_event=bounced',
    'tag=kind:reset': '/emails?tag=kind:reset',
  };
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(requests).map((k) => [k, []]));
  for (let round = 0; round < ROUNDS + 20; round++) {
    for (const [name, url] of Object.entries(requests)) {
      const start = performance.now();
      const res = await t.app.inject({ method: 'GET', url, headers: bearer(org.fullKey) });
      const elapsed = performance.now() - start;
      if (res.statusCode !== 200 || res.json().data.length === 0)
        throw new Error(`${url}: ${res.statusCode} ${res.body}`);
      if (round >= 20) times[name]!.push(elapsed); // the first 20 rounds warm up
    }
  }
  const pct = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.floor(values.length * p)]!;
  console.log(`${label}: ${stored.toLocaleString('en')} messages stored, ${ROUNDS} requests each`);
  for (const [name, values] of Object.entries(times)) {
    console.log(
      `  ${name.padEnd(24)} median ${pct(values, 0.5).toFixed(2)} ms   p90 ${pct(values, 0.9).toFixed(2)} ms`,
    );
  }
}

console.log(`database: ${t.db.kind}`);
await fill(SMALL);
await measure('small');
const started = performance.now();
await fill(MESSAGES);
console.log(`(filled to ${MESSAGES.toLocaleString('en')} in ${((performance.now() - started) / 1000).toFixed(0)} s)`);
await measure('large');
await t.close();
