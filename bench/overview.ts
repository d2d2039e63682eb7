// Does GET /overview cost the same with a million messages of the last 30 days as with a thousand? Fills
// one organization with MESSAGES messages spread evenly over the last 30 days (written in bulk by SQL,
// each with one recipient and its outcome in the timeline: one in ten bounced, the rest delivered; one in
// four opened, one in ten clicked), with the hourly counts those entries would have added to, spread over
// the shards. Measures GET /overview through the real app (app.inject) at SMALL messages and again at
// MESSAGES, and, for comparison, the same numbers counted from the timeline itself. Last, what the count
// adds to recording a timeline entry: a counted kind (delivered) against one that is not counted
// (delivery_delayed), on the same message.
//
//   DATABASE_URL=postgres://… node bench/overview.ts          # MESSAGES=1000000, SMALL=1000
//   MESSAGES=100000 node bench/overview.ts                    # PGlite in memory, smaller
import { performance } from 'node:perf_hooks';
import { bearer, buildTestApp, createTestOrganization } from '../test/helpers/app.ts';
import { EVENT_COUNT_SHARDS, recordTimelineEntry, type TimelineKind } from '../src/emails/timeline.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 1_000_000);
const SMALL = Number(process.env.SMALL ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 200);
const RECORDS = Number(process.env.RECORDS ?? 2000);
const CHUNK = 50_000;
const PERIOD_SECONDS = 30 * 24 * 3600;

const t = await buildTestApp();
const org = await createTestOrganization(t.db, t.config, 'bench');
const domainId = (await t.db.query<{ id: string }>('SELECT id FROM domains WHERE organization_id = $1', [org.id]))
  .rows[0]!.id;
// Message i of `total` is created at start + i × (30 days / total), so every fill covers the whole period.
const start = (await t.db.query<{ start: Date }>(`SELECT now() - interval '30 days' + interval '1 minute' AS start`))
  .rows[0]!.start;
let stored = 0;

/** Replaces the organization's messages with `total` of them, spread over the 30 days. */
async function fill(total: number) {
  await t.db.query('DELETE FROM emails WHERE organization_id = $1', [org.id]);
  await t.db.query('DELETE FROM email_events WHERE organization_id = $1', [org.id]);
  await t.db.query('DELETE FROM email_event_counts WHERE organization_id = $1', [org.id]);
  const step = PERIOD_SECONDS / total;
  for (let from = 0; from < total; from += CHUNK) {
    const end = Math.min(total, from + CHUNK) - 1;
    await t.db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO emails (id, organization_id, domain_id, "from", "to", subject, text, message_id, status,
                             recipient_count, created_at)
         SELECT gen_random_uuid(), $1, $2, 'Acme <hello@' || $3 || '>', jsonb_build_array('user' || i || '@example.com'),
                'Message ' || i, 'Hello', '<' || i || '@' || $3 || '>', 'sent', 1,
                $6::timestamptz + make_interval(secs => i * $7::float8)
           FROM generate_series($4::int, $5::int) i`,
        [org.id, domainId, org.domain, from, end, start, step],
      );
      const chunk = `e.organization_id = $1 AND e.created_at >= $2::timestamptz + make_interval(secs => $3 * $4::float8)`;
      await tx.query(
        `INSERT INTO email_recipients (email_id, address, kind, status)
         SELECT id, "to" ->> 0, 'to', CASE WHEN split_part(subject, ' ', 2)::int % 10 = 0 THEN 'bounced' ELSE 'delivered' END
           FROM emails e WHERE ${chunk}`,
        [org.id, start, from, step],
      );
      // The outcome a second after acceptance; an open a minute later for one in four, a click for one in ten.
      await tx.query(
        `INSERT INTO email_events (id, email_id, organization_id, type, recipient, created_at)
         SELECT gen_random_uuid(), e.id, e.organization_id, k.type, r.address, e.created_at + k.after
           FROM emails e JOIN email_recipients r ON r.email_id = e.id,
                LATERAL (VALUES (r.status, interval '1 second'),
                                (CASE WHEN split_part(e.subject, ' ', 2)::int % 4 = 0 THEN 'opened' END, interval '1 minute'),
                                (CASE WHEN split_part(e.subject, ' ', 2)::int % 10 = 1 THEN 'clicked' END, interval '2 minutes')
                        ) AS k (type, after)
          WHERE ${chunk} AND k.type IS NOT NULL`,
        [org.id, start, from, step],
      );
    });
  }
  // What recordTimelineEntry would have counted, entry by entry, each on a random shard.
  await t.db.query(
    `INSERT INTO email_event_counts (organization_id, hour, type, shard, count)
     SELECT organization_id, date_trunc('hour', created_at, 'UTC'), type, floor(random() * $2)::smallint AS shard, count(*)
       FROM email_events WHERE organization_id = $1 GROUP BY 1, 2, 3, 4`,
    [org.id, EVENT_COUNT_SHARDS],
  );
  stored = total;
  for (const table of ['emails', 'email_recipients', 'email_events', 'email_event_counts']) {
    await t.db.query(`ANALYZE ${table}`);
  }
}

const pct = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.floor(values.length * p)]!;
const line = (name: string, values: number[]) =>
  console.log(`  ${name.padEnd(34)} median ${pct(values, 0.5).toFixed(2)} ms   p90 ${pct(values, 0.9).toFixed(2)} ms`);

async function time(rounds: number, run: () => Promise<void>): Promise<number[]> {
  const times: number[] = [];
  for (let round = 0; round < rounds + 10; round++) {
    const began = performance.now();
    await run();
    if (round >= 10) times.push(performance.now() - began); // the first 10 warm up
  }
  return times;
}

async function measure(label: string) {
  let delivered = 0;
  const overview = await time(ROUNDS, async () => {
    const res = await t.app.inject({ method: 'GET', url: '/overview', headers: bearer(org.fullKey) });
    if (res.statusCode !== 200) throw new Error(`/overview: ${res.statusCode} ${res.body}`);
    delivered = (res.json().daily as Array<{ delivered: number }>).reduce((sum, day) => sum + day.delivered, 0);
  });
  // The same outcomes counted from the timeline, as the route would without its counts.
  const fromTimeline = await time(Math.min(ROUNDS, 20), async () => {
    await t.db.query(
      `SELECT date_trunc('hour', created_at, 'UTC') AS hour, type, count(*) FROM email_events
        WHERE organization_id = $1 AND created_at >= now() - interval '30 days'
          AND type IN ('delivered', 'bounced', 'complained', 'failed', 'opened', 'clicked')
        GROUP BY 1, 2`,
      [org.id],
    );
  });
  const { rows } = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM email_event_counts WHERE organization_id = $1',
    [org.id],
  );
  console.log(
    `${label}: ${stored.toLocaleString('en')} messages over 30 days (${delivered.toLocaleString('en')} delivered in the overview, ${rows[0]!.n.toLocaleString('en')} count rows)`,
  );
  line(`GET /overview (${ROUNDS} requests)`, overview);
  line(`counted from the timeline (${fromTimeline.length} runs)`, fromTimeline);
}

/** Recording one timeline entry in its own transaction, as delivery does, for a kind counted or not. */
async function measureRecording() {
  const emailId = (
    await t.db.query<{ id: string }>('SELECT id FROM emails WHERE organization_id = $1 LIMIT 1', [org.id])
  ).rows[0]!.id;
  const record = (kind: TimelineKind) => () =>
    t.db.transaction(async (tx) => {
      await recordTimelineEntry(tx, { emailId, organizationId: org.id, kind, recipient: 'user0@example.com' });
    });
  const counted: number[] = [];
  const uncounted: number[] = [];
  // Interleaved, so that both see the same machine.
  for (let i = 0; i < 10; i++) {
    counted.push(...(await time(RECORDS / 10, record('delivered'))));
    uncounted.push(...(await time(RECORDS / 10, record('delivery_delayed'))));
  }
  console.log(`recording a timeline entry (one transaction each, ${counted.length} of each kind):`);
  line('delivered (counted)', counted);
  line('delivery_delayed (not counted)', uncounted);
}

console.log(`database: ${t.db.kind}`);
await fill(SMALL);
await measure('small');
const began = performance.now();
await fill(MESSAGES);
console.log(`(filled to ${MESSAGES.toLocaleString('en')} in ${((performance.now() - began) / 1000).toFixed(0)} s)`);
await measure('large');
await measureRecording();
await t.close();
