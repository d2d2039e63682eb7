// Accept at scale: does POST /emails accept as many messages a second with a million messages stored as on
// an empty database? Starts bench/accept-server.ts (Mailroom's API on a fresh PostgreSQL database), drives
// POST /emails with autocannon as bench/accept.ts does, then fills the same organization with STORED
// messages (written in bulk by SQL, as delivered messages of the last 30 days: each with one recipient, its
// accepted and delivered timeline entries, and the hourly counts) and drives it again.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/accept-at-scale.ts
//
// STORED (default 1000000), DURATION (seconds per measurement, default 15) and CONNECTIONS (default 50).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { COUNTED_KINDS, EVENT_COUNT_SHARDS } from '../src/emails/timeline.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { withTeardown } from './teardown.ts';
import { driveAccept } from './accept-message.ts';

const STORED = Number(process.env.STORED ?? 1_000_000);
const DURATION = Number(process.env.DURATION ?? 15);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const CHUNK = 50_000;
const PERIOD_SECONDS = 30 * 24 * 3600;
const TARGET_RATIO = 0.8;
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

await withTeardown(async (teardown) => {
  // The server drops its database on SIGTERM.
  const server = await teardown.own(
    () =>
      spawn(process.execPath, [new URL('./accept-server.ts', import.meta.url).pathname], {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: process.env,
      }),
    async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  );
  const first = await new Promise<string>((resolve, reject) => {
    createInterface({ input: server.stdout! }).once('line', resolve);
    server.once('exit', (code) => reject(new Error(`accept-server exited with ${code} before it listened`)));
  });
  const target = JSON.parse(first) as {
    mailroom: string;
    token: string;
    from: string;
    database: string;
    organization: string;
    domain: string;
  };
  const db = await teardown.own(
    () => openPostgres(target.database, 2),
    (pool) => pool.close(),
  );

  const run = (seconds: number) =>
    driveAccept({ base: target.mailroom, token: target.token, from: target.from, connections: CONNECTIONS, seconds });
  const storedNow = async () =>
    (
      await db.query<{ n: number }>('SELECT count(*)::int AS n FROM emails WHERE organization_id = $1', [
        target.organization,
      ])
    ).rows[0]!.n;
  async function measure() {
    await run(3); // warm-up: JIT, pools, PostgreSQL caches
    const stored = await storedNow();
    const result = await run(DURATION);
    return {
      stored,
      perSecond: result['2xx'] / (result.duration || DURATION),
      p50: result.latency.p50,
      p99: result.latency.p99,
      non2xx: result.non2xx,
      errors: result.errors,
    };
  }

  /** STORED delivered messages spread over the last 30 days, older than anything the measurements sent. */
  async function fill() {
    const domainId = (
      await db.query<{ id: string }>('SELECT id FROM domains WHERE organization_id = $1', [target.organization])
    ).rows[0]!.id;
    const start = (await db.query<{ start: Date }>(`SELECT now() - interval '30 days' AS start`)).rows[0]!.start;
    const step = (PERIOD_SECONDS - 60) / STORED;
    for (let from = 0; from < STORED; from += CHUNK) {
      const end = Math.min(STORED, from + CHUNK) - 1;
      await db.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO emails (id, organization_id, domain_id, "from", "to", subject, html, text, tags, message_id,
                               status, recipient_count, created_at, sent_at)
           SELECT gen_random_uuid(), $1, $2, 'Shop <shop@' || $3 || '>', jsonb_build_array('user' || i || '@example.com'),
                  'Your receipt ' || i, '<p>Thanks for your order.</p>', 'Thanks for your order.',
                  '[{"name":"category","value":"receipt"}]'::jsonb, '<stored' || i || '@' || $3 || '>', 'sent', 1,
                  $6::timestamptz + make_interval(secs => i * $7::float8),
                  $6::timestamptz + make_interval(secs => i * $7::float8 + 1)
             FROM generate_series($4::int, $5::int) i`,
          [target.organization, domainId, target.domain, from, end, start, step],
        );
        const chunk = `e.organization_id = $1 AND e.created_at >= $2::timestamptz + make_interval(secs => $3 * $4::float8)
                       AND e.created_at < $2::timestamptz + make_interval(secs => $5 * $4::float8)`;
        const chunkValues = [target.organization, start, from, step, end + 1];
        await tx.query(
          `INSERT INTO email_recipients (email_id, address, kind, status)
           SELECT id, "to" ->> 0, 'to', 'delivered' FROM emails e WHERE ${chunk}`,
          chunkValues,
        );
        await tx.query(
          `INSERT INTO email_events (id, email_id, organization_id, type, recipient, created_at)
           SELECT gen_random_uuid(), e.id, e.organization_id, k.type, k.recipient, e.created_at + k.after
             FROM emails e, LATERAL (VALUES ('accepted', NULL, interval '0'),
                                            ('delivered', e."to" ->> 0, interval '1 second')) AS k (type, recipient, after)
            WHERE ${chunk}`,
          chunkValues,
        );
      });
    }
    // What recording the delivered entries would have counted, each on a random shard.
    await db.query(
      `INSERT INTO email_event_counts (organization_id, hour, type, shard, count)
       SELECT organization_id, date_trunc('hour', created_at, 'UTC'), type, floor(random() * $2)::smallint, count(*)
         FROM email_events WHERE organization_id = $1 AND type = ANY($3::text[]) GROUP BY 1, 2, 3, 4
       ON CONFLICT (organization_id, hour, type, shard) DO UPDATE SET count = email_event_counts.count + EXCLUDED.count`,
      [target.organization, EVENT_COUNT_SHARDS, [...COUNTED_KINDS]],
    );
    for (const table of ['emails', 'email_recipients', 'email_events', 'email_event_counts', 'jobs']) {
      await db.query(`VACUUM ANALYZE ${table}`);
    }
  }

  const empty = await measure();
  // The first run's messages count as delivered: their delivery jobs (no worker runs here) are dropped, so
  // both runs start with an empty queue.
  await db.query(`DELETE FROM jobs`);
  const filling = performance.now();
  await fill();
  const fillSeconds = (performance.now() - filling) / 1000;
  const full = await measure();

  console.log(`PostgreSQL; ${CONNECTIONS} connections, ${DURATION} s each (3 s warm-up before each)`);
  for (const [name, r] of [
    ['empty database', empty],
    [`${STORED.toLocaleString('en')} stored`, full],
  ] as const) {
    console.log(
      `POST /emails, ${name.padEnd(20)} ${r.perSecond.toFixed(0).padStart(6)} accepted/s   p50 ${r.p50} ms   p99 ${r.p99} ms   non-2xx ${r.non2xx}   errors ${r.errors}   (${r.stored.toLocaleString('en')} messages in the organization)`,
    );
  }
  console.log(`(filled ${STORED.toLocaleString('en')} messages in ${fillSeconds.toFixed(0)} s)`);
  console.log(`ratio (stored / empty): ${(full.perSecond / empty.perSecond).toFixed(3)}   (target ≥ ${TARGET_RATIO})`);
});
