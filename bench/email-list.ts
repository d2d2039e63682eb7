// Does a page of GET /emails cost the same with a million messages stored as with a thousand? Fills one
// organization with MESSAGES messages (written in bulk by SQL, each with a recipient and a timeline entry,
// one in ten bounced), measures a set of list requests through the real app (app.inject, so no network
// noise) at SMALL stored messages and again at MESSAGES, and prints the median and p90 of each.
//
//   DATABASE_URL=postgres://… node bench/email-list.ts          # MESSAGES=1000000, SMALL=1000
//   MESSAGES=100000 node bench/email-list.ts                    # PGlite in memory, smaller
import { performance } from 'node:perf_hooks';
import { bearer, buildTestApp, createTestOrganization } from '../test/helpers/app.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 1_000_000);
const SMALL = Number(process.env.SMALL ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 300);
const CHUNK = 50_000;

const t = await buildTestApp();
const org = await createTestOrganization(t.db, t.config, 'bench');
const domainId = (await t.db.query<{ id: string }>('SELECT id FROM domains WHERE organization_id = $1', [org.id]))
  .rows[0]!.id;
let stored = 0;

/** Messages i = from .. to - 1, one a millisecond apart in created_at; every tenth bounced, the rest delivered. */
async function fill(to: number) {
  for (let from = stored; from < to; from += CHUNK) {
    const end = Math.min(to, from + CHUNK) - 1;
    await t.db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO emails (id, organization_id, domain_id, "from", "to", subject, text, tags, message_id, status,
                             recipient_count, created_at)
         SELECT gen_random_uuid(), $1, $2, 'Acme <hello@' || $3 || '>', jsonb_build_array('user' || i || '@example.com'),
                'Message ' || i, 'Hello', jsonb_build_array(jsonb_build_object('name', 'kind', 'value',
                CASE WHEN i % 10 = 0 THEN 'reset' ELSE 'receipt' END)), '<' || i || '@' || $3 || '>', 'sent', 1,
                timestamptz '2026-01-01' + make_interval(secs => i / 1000.0)
           FROM generate_series($4::int, $5::int) i`,
        [org.id, domainId, org.domain, from, end],
      );
      await tx.query(
        `INSERT INTO email_recipients (email_id, address, kind, status)
         SELECT id, "to" ->> 0, 'to', CASE WHEN split_part(subject, ' ', 2)::int % 10 = 0 THEN 'bounced' ELSE 'delivered' END
           FROM emails WHERE organization_id = $1 AND created_at >= timestamptz '2026-01-01' + make_interval(secs => $2 / 1000.0)`,
        [org.id, from],
      );
      await tx.query(
        `INSERT INTO email_events (id, email_id, organization_id, type, recipient, created_at)
         SELECT gen_random_uuid(), e.id, e.organization_id, r.status, r.address, e.created_at + interval '1 second'
           FROM emails e JOIN email_recipients r ON r.email_id = e.id
          WHERE e.organization_id = $1 AND e.created_at >= timestamptz '2026-01-01' + make_interval(secs => $2 / 1000.0)`,
        [org.id, from],
      );
    });
  }
  stored = to;
  await t.db.query('ANALYZE emails');
  await t.db.query('ANALYZE email_recipients');
  await t.db.query('ANALYZE email_events');
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
