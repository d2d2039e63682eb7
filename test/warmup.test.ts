// Automatic warm-up of a new sending address: the day's judgement (pure), and several simulated days
// end to end with an injected clock: a warming source (127.0.0.2) delivering to a simulated Gmail on
// loopback, its stage advancing after good days and stepping back at a block, the mail over the day's
// allowance going to the pool's overflow (a relay on loopback) or waiting for the next hour's part.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { startProvider, type Provider } from './helpers/simulated-provider.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { message, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';
import { createTransport } from '../src/delivery/transports/index.ts';
import { startDelivery } from '../src/delivery/start-delivery.ts';
import { compileShapingPolicy, type ShapingPolicy } from '../src/shaping/shaping-file.ts';
import { nextRelease, releasedBy, rollOver, type WarmupState } from '../src/shaping/warmup.ts';
import { listSources, warmupStats } from '../src/shaping/sources.ts';
import { registry } from '../src/platform/metrics.ts';
import { setWarmupStatsSource } from '../src/platform/metrics.ts';

const at = (iso: string) => new Date(iso);

test('the day’s allowance is released one 24th at the start of each UTC hour', () => {
  assert.equal(releasedBy(240, at('2026-11-20T00:00:00Z')), 10);
  assert.equal(releasedBy(240, at('2026-11-20T00:59:59Z')), 10);
  assert.equal(releasedBy(240, at('2026-11-20T01:00:00Z')), 20);
  assert.equal(releasedBy(200, at('2026-11-20T12:30:00Z')), 109);
  assert.equal(releasedBy(200, at('2026-11-20T23:59:59Z')), 200);
  assert.deepEqual(nextRelease(at('2026-11-20T23:10:00Z')), at('2026-11-21T00:00:00Z'));
});

const day = (overrides: Partial<WarmupState>): WarmupState => ({
  source: 'mta1',
  site: 'google',
  stage: 0,
  day: '2026-11-20',
  sent: 0,
  delivered: 0,
  deferred: 0,
  blocked: false,
  startedAt: at('2026-11-20T08:00:00Z'),
  lastChange: null,
  changedAt: null,
  ...overrides,
});
const STAGES = [100, 300, 1000];
const next = at('2026-11-21T00:05:00Z');

test('a stage advances after a day over 90% delivered, under 5% deferred and without a block; otherwise it says why not', () => {
  const same = day({ sent: 50 });
  assert.equal(rollOver(same, STAGES, '2026-11-20', next), same, 'the same day is not judged');

  const good = rollOver(day({ sent: 100, delivered: 95, deferred: 4 }), STAGES, '2026-11-21', next);
  assert.deepEqual([good.stage, good.day, good.sent, good.delivered], [1, '2026-11-21', 0, 0]);
  assert.match(good.lastChange!, /^2026-11-20: stage 1 \(100 a day\) delivered 95 .*advanced to stage 2 \(300 a day\)/);

  const few = rollOver(day({ sent: 90, delivered: 90 }), STAGES, '2026-11-21', next);
  assert.equal(few.stage, 0);
  assert.match(few.lastChange!, /stayed at stage 1 \(100 a day\): delivered 90 of the 91 needed/);

  const deferring = rollOver(day({ sent: 100, delivered: 95, deferred: 5 }), STAGES, '2026-11-21', next);
  assert.equal(deferring.stage, 0);
  assert.match(deferring.lastChange!, /deferred 5% \(5% or more\)/);

  const blocked = day({ stage: 1, sent: 400, delivered: 400, blocked: true, lastChange: 'blocked' });
  assert.equal(rollOver(blocked, STAGES, '2026-11-21', next).stage, 1, 'a blocked day never advances');

  const quiet = rollOver(day({ stage: 1 }), STAGES, '2026-11-23', next);
  assert.deepEqual([quiet.stage, quiet.lastChange], [1, null], 'a day without mail says nothing');

  const last = rollOver(day({ stage: 2, sent: 1000, delivered: 1000 }), STAGES, '2026-11-21', next);
  assert.equal(last.stage, 3);
  assert.match(last.lastChange!, /warm-up complete/);
  assert.equal(rollOver({ ...last, sent: 50_000, day: '2026-11-21' }, STAGES, '2026-11-22', next).stage, 3);
});

// End to end, over simulated days.
const PROVIDER_HOST = '127.0.0.7';
const WARMING = '127.0.0.2';
const silent = { error: () => {}, warn: () => {} };

let provider: Provider;
let relay: SmtpSink;
let dns: DnsServer;
let t: TestApp;
let org: TestOrganization;
/** The shaping clock: real time moved to a chosen moment of a simulated day. */
let skew = 0;
const clock = () => new Date(Date.now() + skew);
const setClock = (iso: string) => void (skew = Date.parse(iso) - Date.now());

before(async () => {
  provider = await startProvider(PROVIDER_HOST, { dataDelayMs: 1 });
  relay = await startSmtpSink({ starttls: false });
  dns = await startDnsServer();
  dns.zone.set('gmail-one.test', { mx: [{ priority: 5, exchange: 'gmail-smtp-in.l.google.com' }] });
  dns.zone.set('gmail-smtp-in.l.google.com', { a: [PROVIDER_HOST] });
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'mx',
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_MX_PORT: String(provider.port),
    MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_SMTP_TIMEOUT_MS: '5000',
  });
  org = await createTestOrganization(t.db, t.config, 'warmup');
});
after(async () => {
  await t.close();
  await provider.close();
  await relay.close();
  await dns.close();
});
beforeEach(async () => {
  provider.reset();
  relay.reset();
  skew = 0;
  await t.db.query('DELETE FROM warmup_state');
  await t.db.query('DELETE FROM destination_sites');
});

const policyWith = (overflow: boolean, schedule: number[]) =>
  compileShapingPolicy({
    source: {
      fresh: { address: WARMING, ehlo: 'fresh.warmup.test', warmup: true },
      esp: { relay: `smtp://${relay.host}:${relay.port}` },
    },
    pool: { main: { sources: ['fresh'], ...(overflow ? { overflow: 'esp' } : {}) } },
    warmup: { schedule },
  });

async function delivering(policy: ShapingPolicy, run: () => Promise<void>) {
  const transport = createTransport(t.config, t.db, { policy, shaping: { now: clock, waitMs: 500 } });
  const worker = await startDelivery(t.db, t.config, transport, silent);
  try {
    await run();
  } finally {
    await worker.stop();
    await transport.close();
  }
}

const sendMany = async (count: number, prefix: string) => {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await send(t.app, org.sendingKey, message(org, { to: `${prefix}${i}@gmail-one.test` }));
    assert.equal(res.statusCode, 200, res.body);
    ids.push(res.json().id as string);
  }
  return ids;
};
const settled = (ids: string[]) =>
  waitFor(async () => {
    const { rows } = await t.db.query<{ waiting: number; all: number }>(
      `SELECT count(*) FILTER (WHERE status = 'pending')::int AS waiting, count(*)::int AS all
         FROM email_recipients WHERE email_id = ANY($1::uuid[])`,
      [ids],
    );
    return rows[0]!.all > 0 && rows[0]!.waiting === 0;
  }, 20_000);
const events = async (id: string) =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) })).json()
    .data as Array<{ type: string; data?: Record<string, unknown> }>;
const google = async () => {
  const source = (await listSources(t.db, policy.egress, clock())).find((s) => s.name === 'fresh')!;
  return source.warmup.find((w) => w.site === 'google')!;
};
let policy: ShapingPolicy;

test('over simulated days: good days advance the stage, a block steps it back, and the mail over the allowance takes the overflow', async () => {
  policy = policyWith(true, [4, 8, 16]);
  await delivering(policy, async () => {
    // Day 1, late (the whole day's allowance is released): 4 from the warming address, 2 through the relay.
    setClock('2026-11-20T23:00:00Z');
    const first = await sendMany(6, 'd1-');
    await settled(first);
    assert.equal(provider.accepted.filter((a) => a.client === WARMING).length, 4);
    assert.equal(relay.transactions.length, 2);
    assert.deepEqual(
      [await google()].map((w) => [w.stage, w.allowance_today, w.sent_today, w.delivered_today]),
      [[1, 4, 4, 4]],
    );
    // Each message's timeline says which way it went.
    const delivered = await Promise.all(
      first.map(async (id) => (await events(id)).find((e) => e.type === 'delivered')!.data),
    );
    assert.equal(delivered.filter((d) => d?.source === 'fresh' && d.overflow === undefined).length, 4);
    assert.equal(delivered.filter((d) => d?.source === 'esp' && d.overflow === true).length, 2);

    // Day 2: the good first day advanced it to 8 a day.
    setClock('2026-11-21T23:00:00Z');
    provider.reset();
    relay.reset();
    await settled(await sendMany(10, 'd2-'));
    assert.equal(provider.accepted.length, 8);
    assert.equal(relay.transactions.length, 2);
    const day2 = await google();
    assert.deepEqual([day2.stage, day2.allowance_today, day2.sent_today], [2, 8, 8]);
    assert.match(day2.last_change!, /^2026-11-20: stage 1 \(4 a day\) delivered 4 .*advanced to stage 2 \(8 a day\)/);

    // Day 3: the good second day took it to 16 a day; a reputation block steps it back to 8 at once, and
    // the day cannot advance it.
    setClock('2026-11-22T23:00:00Z');
    provider.reset();
    relay.reset();
    provider.script = ({ to }) =>
      to.startsWith('d3-0@')
        ? { code: 550, message: '5.7.1 Our system has detected that this message is likely unsolicited mail.' }
        : undefined;
    const blockedId = (await sendMany(1, 'd3-'))[0]!;
    await settled([blockedId]);
    const day3 = await google();
    assert.deepEqual([day3.stage, day3.allowance_today, day3.blocked_today], [2, 8, true]);
    assert.match(day3.last_change!, /^2026-11-22: blocked \(.*unsolicited mail.*\): back to stage 2 \(8 a day\)/);
    provider.script = () => undefined;
    await settled(await sendMany(9, 'd3b-'));
    assert.equal(provider.accepted.length, 7, 'the rest of the day’s 8 after the blocked one');
    assert.equal(relay.transactions.length, 2);

    // Day 4: the blocked day did not advance it.
    setClock('2026-11-23T23:00:00Z');
    provider.reset();
    await settled(await sendMany(4, 'd4-'));
    assert.deepEqual([(await google()).stage, provider.accepted.length], [2, 4]);

    // The gauges: stage, today's allowance and sends, per source and site.
    setWarmupStatsSource(() => warmupStats(t.db, policy.egress, clock()));
    const metrics = await registry.metrics();
    assert.match(metrics, /^mailroom_warmup_stage\{source="fresh",site="google"\} 2$/m);
    assert.match(metrics, /^mailroom_warmup_allowance\{source="fresh",site="google"\} 8$/m);
    assert.match(metrics, /^mailroom_warmup_sent_today\{source="fresh",site="google"\} 4$/m);
  });
});

test('without an overflow, mail over the part of the day released so far waits for the next hour, on its timeline', async () => {
  policy = policyWith(false, [48]);
  await delivering(policy, async () => {
    // 00:30: 2 of the day's 48 are released.
    setClock('2026-11-20T00:30:00Z');
    const ids = await sendMany(3, 'spread-');
    await waitFor(async () => {
      const delayed = await Promise.all(
        ids.map(async (id) => (await events(id)).some((e) => e.type === 'delivery_delayed')),
      );
      return provider.accepted.length === 2 && delayed.some(Boolean);
    }, 20_000);
    const waiting = (
      await Promise.all(ids.map(async (id) => (await events(id)).find((e) => e.type === 'delivery_delayed')))
    ).find(Boolean)!;
    assert.equal(waiting.data?.reason, 'warming_up');
    // The next hour's release, spread over its first minute.
    const nextAttempt = Date.parse(String(waiting.data?.next_attempt_at));
    assert.ok(nextAttempt >= Date.parse('2026-11-20T01:00:00Z') && nextAttempt < Date.parse('2026-11-20T01:01:00Z'));
    assert.match(String(waiting.data?.response), /fresh is warming up at google: 2 of today's 48 sent/);
    assert.equal(relay.transactions.length, 0, 'nothing goes to the relay without an overflow');

    // 01:00: the next part is released; the message goes (it waited without spending an attempt).
    setClock('2026-11-20T01:01:30Z');
    await t.db.query(`UPDATE jobs SET run_at = now() WHERE queue = 'deliver-email'`);
    await settled(ids);
    assert.equal(provider.accepted.length, 3);
    const { rows } = await t.db.query<{ attempts: number }>(
      'SELECT attempts FROM email_recipients WHERE email_id = ANY($1::uuid[]) ORDER BY attempts',
      [ids],
    );
    assert.deepEqual(
      rows.map((r) => r.attempts),
      [1, 1, 1],
    );
  });
});

test('a message to several recipients at one site counts each of them, sent and delivered', async () => {
  policy = policyWith(true, [48]);
  await delivering(policy, async () => {
    setClock('2026-11-20T23:00:00Z');
    const to = ['a@gmail-one.test', 'b@gmail-one.test', 'c@gmail-one.test'];
    const res = await send(t.app, org.sendingKey, message(org, { to }));
    assert.equal(res.statusCode, 200, res.body);
    await settled([res.json().id as string]);
    const day = await google();
    assert.deepEqual([day.sent_today, day.delivered_today], [3, 3]);
  });
});

test('GET /sources shows each source with its warm-up per site', async () => {
  const res = await t.app.inject({ method: 'GET', url: '/sources', headers: bearer(org.fullKey) });
  assert.equal(res.statusCode, 200);
  // This app has no shaping file: its one source is the host's own.
  assert.deepEqual(res.json().data, [
    {
      object: 'source',
      name: 'default',
      kind: 'address',
      address: null,
      ehlo: null,
      relay: null,
      pools: ['default'],
      warming: false,
      warmup: [],
    },
  ]);
});
