// Traffic shaping end to end, offline: Mailroom's own MX delivery to a simulated provider on loopback.
// A loopback DNS server maps the recipient domains' MX to Google's host names (so they are the site
// `google`) and those names to the simulator; the simulator is a real SMTP server that counts
// connections at once and answers as each test scripts it (Gmail's 421 4.7.28 rate limit, a 550 5.7.1
// reputation block, a 550 5.7.26 DMARC refusal of one sending domain). Time is injected where holds
// are ten minutes long.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { startProvider, type Provider } from './helpers/simulated-provider.ts';
import { message, send, sendBatch, setLimits } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';
import { onPostgres, withMethods } from './helpers/database.ts';
import type { Database } from '../src/platform/db/database.ts';
import { runCli } from './helpers/cli.ts';
import { createTransport } from '../src/delivery/transports/index.ts';
import { startDelivery } from '../src/delivery/start-delivery.ts';
import { compileShapingPolicy } from '../src/shaping/shaping-file.ts';
import { createShaper, isHeld } from '../src/shaping/shaper.ts';
import { classifyReply } from '../src/shaping/reply-classes.ts';
import type { Worker } from '../src/queue/worker.ts';
import type { Transport } from '../src/delivery/transport.ts';

const PROVIDER_HOST = '127.0.0.7';
const silent = { error: () => {}, warn: () => {} };

let provider: Provider;
let dns: DnsServer;
let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
/** The shaping clock: real time plus what a test has moved it on. */
let skew = 0;
const clock = () => new Date(Date.now() + skew);

before(async () => {
  provider = await startProvider(PROVIDER_HOST);
  dns = await startDnsServer();
  for (const domain of ['gmail-one.test', 'gmail-two.test']) {
    dns.zone.set(domain, { mx: [{ priority: 5, exchange: 'gmail-smtp-in.l.google.com' }] });
  }
  dns.zone.set('gmail-smtp-in.l.google.com', { a: [PROVIDER_HOST] });
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'mx',
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_MX_PORT: String(provider.port),
    MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_SMTP_TIMEOUT_MS: '5000',
  });
  org = await createTestOrganization(t.db, t.config, 'shape');
  other = await createTestOrganization(t.db, t.config, 'other');
});
after(async () => {
  await t.close();
  await provider.close();
  await dns.close();
});

/** Delivery workers (each with its own transport, so its own connections, as a process has). */
async function startWorkers(
  count: number,
  policy = compileShapingPolicy({ site: { google: { connection_limit: 2 } } }),
) {
  const running: Array<{ worker: Worker; transport: Transport }> = [];
  for (let i = 0; i < count; i++) {
    const transport = createTransport(t.config, t.db, { policy, shaping: { now: clock, waitMs: 500 } });
    running.push({ worker: await startDelivery(t.db, t.config, transport, silent), transport });
  }
  return async () => {
    for (const { worker, transport } of running) {
      await worker.stop();
      await transport.close();
    }
  };
}

const sendTo = async (from: TestOrganization, to: string | string[]) => {
  const res = await send(t.app, from.sendingKey, message(from, { to }));
  assert.equal(res.statusCode, 200, res.body);
  return res.json().id as string;
};
const recipients = (id: string) =>
  t.db.query<{
    address: string;
    status: string;
    attempts: number;
    failure_reason: string | null;
    hold_reason: string | null;
  }>(
    'SELECT address, status, attempts, failure_reason, hold_reason FROM email_recipients WHERE email_id = $1 ORDER BY address',
    [id],
  );
const timeline = async (id: string) =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) })).json()
    .data as Array<{
    type: string;
    data?: Record<string, unknown>;
  }>;

beforeEach(async () => {
  provider.reset();
  skew = 0;
  await t.db.query('DELETE FROM destination_sites');
  await t.db.query('DELETE FROM destination_sender_holds');
  // Slots a previous test's transport was still giving back when it closed.
  await t.db.query('DELETE FROM destination_connections');
});

test('the connection limit of a site holds summed over two workers, and every message is delivered once', async () => {
  const stop = await startWorkers(2);
  try {
    const ids = [];
    for (let i = 0; i < 30; i++) ids.push(await sendTo(org, `user${i}@gmail-${i % 2 ? 'one' : 'two'}.test`));
    await waitFor(() => provider.accepted.length >= 30, 30_000);
    assert.equal(provider.accepted.length, 30);
    assert.ok(provider.maxConcurrent <= 2, `at most 2 connections at once, saw ${provider.maxConcurrent}`);
    // Both domains are one site: google.
    const { rows } = await t.db.query<{ site: string }>('SELECT site FROM destination_sites');
    assert.deepEqual(rows, [{ site: 'google' }]);
  } finally {
    await stop();
  }
});

test('messages waiting for a busy site ask the database for a slot only when one can be free', async () => {
  // Each slot the database is asked for, counted: takeSlot's INSERT into destination_connections.
  let slotAsks = 0;
  const counting = withMethods(t.db, {
    query: (text: string, params?: readonly unknown[]) => {
      if (text.includes('INSERT INTO destination_connections')) slotAsks += 1;
      return t.db.query(text, params);
    },
  } as Partial<Database>);
  const policy = compileShapingPolicy({ site: { google: { connection_limit: 2, max_deliveries_per_connection: 5 } } });
  const transport = createTransport(t.config, counting, { policy, shaping: { now: clock, waitMs: 500 } });
  const worker = await startDelivery(t.db, t.config, transport, silent);
  try {
    for (let i = 0; i < 30; i++) await sendTo(org, `user${i}@gmail-one.test`);
    await waitFor(() => provider.accepted.length >= 30, 30_000);
    assert.ok(provider.maxConcurrent <= 2, `at most 2 connections at once, saw ${provider.maxConcurrent}`);
    // A new connection every 5 deliveries: each takes a slot. Messages that find both slots busy (held by
    // this process, or being given back) wait for a connection without asking, and the process asks for
    // one slot at a time (two asks at once would race for the same slot and one would ask again): one
    // ask per connection.
    assert.ok(provider.connected >= 6, `connections opened: ${provider.connected}`);
    assert.ok(slotAsks <= provider.connected, `${slotAsks} slots asked for, ${provider.connected} connections`);
  } finally {
    await worker.stop();
    await transport.close();
  }
});

test("organizations share a site: one's burst of 300 does not hold up another's message to the same provider", async () => {
  // The burst is queued first, the other organization's message after it, and only then do the workers
  // start: taken oldest first, it went out 143rd. Shared out, it goes in the first claim, and at the site
  // it takes the next free connection (its organization has been served least); the bound leaves room
  // for a slow machine's compose thread, which signs the claim's messages in the order they came.
  await setLimits(t.db, org.id, { rateLimit: 1000 });
  for (let batch = 0; batch < 3; batch++) {
    const entries = Array.from({ length: 100 }, (_, i) =>
      message(org, { to: `burst${batch * 100 + i}@gmail-one.test` }),
    );
    const res = await sendBatch(t.app, org.sendingKey, entries);
    assert.equal(res.statusCode, 200, res.body);
  }
  await sendTo(other, 'reset@gmail-two.test');
  const stop = await startWorkers(1);
  try {
    await waitFor(() => provider.accepted.length >= 301, 60_000);
    const position = provider.accepted.findIndex((tx) => tx.to === 'reset@gmail-two.test');
    assert.ok(position >= 0 && position < 30, `the other organization's message went out at position ${position + 1}`);
    assert.ok(provider.maxConcurrent <= 2, `at most 2 connections at once, saw ${provider.maxConcurrent}`);
  } finally {
    await stop();
  }
});

test('a hold that comes while a message waits for its turn stops it before it sends: not one more into a hold', async () => {
  // The shaper alone, over the database, with a connection that only counts what it carries: 40 a
  // minute (a turn every 1.53 s), connections kept. The first message goes; the second books the next
  // turn and waits for it; meanwhile the first one's reply is Gmail's 421 4.7.28.
  const shaper = createShaper({
    db: t.db,
    limitsFor: compileShapingPolicy({ site: { google: { connection_limit: 2, max_message_rate: '40/m' } } }).limitsFor,
    log: silent,
    idleMs: 10_000,
  });
  const carried: string[] = [];
  const connect = async () => ({ usable: true, close: () => {} });
  const request = (organizationId: string) => ({
    site: 'google',
    senderDomain: org.domain,
    organizationId,
    fresh: true,
  });
  try {
    assert.equal(await shaper.run(request('first'), connect, async () => carried.push('first')), 1);
    const second = shaper.run(request('second'), connect, async () => carried.push('second'));
    await new Promise((resolve) => setTimeout(resolve, 100)); // the second has booked its turn by now
    const reply = { code: 421, text: '4.7.28 Our system has detected an unusual rate of unsolicited mail' };
    const hold = await shaper.reply(request('first'), reply, classifyReply(reply.code, reply.text));
    assert.equal(hold?.reason, 'site_paused');
    const outcome = await second;
    assert.ok(isHeld(outcome) && outcome.reason === 'site_paused', JSON.stringify(outcome));
    assert.deepEqual(carried, ['first']);
  } finally {
    await shaper.close();
  }
});

test("Gmail's 421 4.7.28 pauses the site 10 minutes without spending an attempt, then it restarts at one connection", async () => {
  provider.script = () => ({
    code: 421,
    message: '4.7.28 Our system has detected an unusual rate of unsolicited mail',
  });
  const stop = await startWorkers(1, compileShapingPolicy({}));
  try {
    const first = await sendTo(org, 'ada@gmail-one.test');
    await waitFor(async () => (await recipients(first)).rows[0]!.hold_reason === 'site_paused', 15_000);
    const second = await sendTo(org, 'bob@gmail-two.test');
    await waitFor(async () => (await recipients(second)).rows[0]!.hold_reason === 'site_paused', 15_000);
    // Held, not tried: no attempt spent, one delivery_delayed entry each, with the reason and the reply.
    for (const id of [first, second]) {
      const [recipient] = (await recipients(id)).rows;
      assert.deepEqual([recipient!.status, recipient!.attempts], ['pending', 0]);
      const delayed = (await timeline(id)).filter((entry) => entry.type === 'delivery_delayed');
      assert.equal(delayed.length, 1);
      assert.equal(delayed[0]!.data!.reason, 'site_paused');
    }
    const site = await t.db.query<{ connection_limit: number; paused_until: Date; pause_reason: string }>(
      `SELECT connection_limit, paused_until, pause_reason FROM destination_sites WHERE site = 'google'`,
    );
    const pausedFor = site.rows[0]!.paused_until.getTime() - Date.now();
    assert.ok(pausedFor > 9 * 60_000 && pausedFor <= 10 * 60_000 + 1000, `paused for ${pausedFor} ms`);
    assert.deepEqual([site.rows[0]!.connection_limit, site.rows[0]!.pause_reason], [1, 'site_paused']);

    // While paused, a new try is held again without a second entry.
    await t.db.query(`UPDATE jobs SET run_at = now() WHERE payload->>'email_id' = $1`, [first]);
    await waitFor(async () => {
      const { rows } = await t.db.query(`SELECT 1 FROM jobs WHERE payload->>'email_id' = $1 AND run_at > now()`, [
        first,
      ]);
      return rows.length === 1;
    });
    assert.equal((await timeline(first)).filter((entry) => entry.type === 'delivery_delayed').length, 1);

    // Ten minutes later (the clock moved; the jobs made due), Gmail takes mail again, over one connection.
    provider.script = () => undefined;
    // The refused connections are closed first, so that what is counted next is the restart alone.
    await waitFor(() => provider.open() === 0);
    provider.maxConcurrent = 0;
    skew = 10 * 60_000 + 1000;
    await t.db.query(`UPDATE jobs SET run_at = now() WHERE queue = 'deliver-email'`);
    await waitFor(() => provider.accepted.length === 2, 15_000);
    assert.equal(provider.maxConcurrent, 1);
    for (const id of [first, second]) {
      await waitFor(async () => (await recipients(id)).rows[0]!.status === 'delivered', 15_000);
    }
  } finally {
    await stop();
  }
});

test('a reputation 550 fails the recipient as refused: not a bounce, not suppressed', async () => {
  provider.script = () => ({
    code: 550,
    message:
      '5.7.1 Our system has detected that this message is likely unsolicited mail. To reduce the amount of spam sent to Gmail, this message has been blocked. Low reputation of the sending domain',
  });
  const stop = await startWorkers(1);
  try {
    const id = await sendTo(org, 'cy@gmail-one.test');
    await waitFor(async () => (await recipients(id)).rows[0]!.status !== 'pending', 15_000);
    const [recipient] = (await recipients(id)).rows;
    assert.deepEqual([recipient!.status, recipient!.failure_reason], ['failed', 'refused']);
    assert.equal((await timeline(id)).filter((entry) => entry.type === 'bounced').length, 0);
    const suppressed = await t.db.query(`SELECT 1 FROM suppressions WHERE address = 'cy@gmail-one.test'`);
    assert.equal(suppressed.rowCount, 0);
  } finally {
    await stop();
  }
});

test("a sender fault holds only that sending domain at the site; another organization's mail goes on", async () => {
  provider.script = ({ from }) =>
    from.endsWith(`@${org.domain}`)
      ? {
          code: 550,
          message: `5.7.26 Unauthenticated email from ${org.domain} is not accepted due to domain's DMARC policy`,
        }
      : undefined;
  const stop = await startWorkers(1);
  try {
    const refused = await sendTo(org, 'dee@gmail-one.test');
    await waitFor(async () => (await recipients(refused)).rows[0]!.status !== 'pending', 15_000);
    assert.deepEqual((await recipients(refused)).rows[0]!.failure_reason, 'refused');
    const held = await sendTo(org, 'eve@gmail-two.test');
    const fine = await sendTo(other, 'fay@gmail-two.test');
    await waitFor(async () => (await recipients(held)).rows[0]!.hold_reason === 'sender_paused', 15_000);
    // Accepted by the provider, then recorded: the outcome is waited for, not read as the 250 goes out.
    await waitFor(async () => (await recipients(fine)).rows[0]!.status === 'delivered', 15_000);
    assert.ok(provider.accepted.some((tx) => tx.to === 'fay@gmail-two.test'));
    assert.deepEqual((await recipients(held)).rows[0]!.attempts, 0);
    const delayed = (await timeline(held)).filter((entry) => entry.type === 'delivery_delayed');
    assert.equal(delayed[0]!.data!.reason, 'sender_paused');

    // The page shows the hold to its owner only, and the site to both.
    const mine = (await t.app.inject({ method: 'GET', url: '/destinations', headers: bearer(org.fullKey) })).json();
    const theirs = (await t.app.inject({ method: 'GET', url: '/destinations', headers: bearer(other.fullKey) })).json();
    const google = (list: { data: Array<{ site: string; sender_holds: unknown[]; queued: number }> }) =>
      list.data.find((site) => site.site === 'google')!;
    assert.deepEqual(
      google(mine).sender_holds.map((hold) => (hold as { sender_domain: string }).sender_domain),
      [org.domain],
    );
    assert.equal(google(mine).queued, 1);
    assert.deepEqual(google(theirs).sender_holds, []);
    assert.equal(google(theirs).queued, 0);
  } finally {
    await stop();
  }
});

test('the operator pauses and resumes a site from the CLI; GET /destinations shows it', async () => {
  // The CLI opens the database itself: a PostgreSQL one (PGlite in memory is this process's own).
  if (!onPostgres) return;
  const { rows } = await t.db.query<{ name: string }>('SELECT current_database() AS name');
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${rows[0]!.name}`;
  const env = { DATABASE_URL: url.toString() };
  const paused = await runCli(['destinations', 'pause', 'google', '--for', '30m', '--json'], env);
  assert.equal(paused.code, 0, paused.stderr);
  const listed = (await t.app.inject({ method: 'GET', url: '/destinations', headers: bearer(org.fullKey) })).json();
  const google = listed.data.find((site: { site: string }) => site.site === 'google');
  assert.deepEqual([google.pause_reason, google.pause_reply], ['site_paused', 'paused by the operator']);
  assert.ok(Date.parse(google.paused_until) > Date.now() + 29 * 60_000);
  const list = await runCli(['destinations', 'list'], env);
  assert.match(list.stdout, /^google\s+0\/5 connections, \d+ queued, paused until .*site_paused/m);
  const resumed = await runCli(['destinations', 'resume', 'google', '--json'], env);
  assert.equal(resumed.code, 0, resumed.stderr);
  const after = (await t.app.inject({ method: 'GET', url: '/destinations', headers: bearer(org.fullKey) })).json();
  assert.equal(after.data.find((site: { site: string }) => site.site === 'google').paused_until, null);
});

test("the shaping file's rules: a matching reply pauses the site for the rule's time, or lowers its limits", async () => {
  const policy = compileShapingPolicy({
    rule: [
      { regex: '(?i:unusual volume from your block)', action: 'pause', scope: 'site', duration: '30m' },
      {
        regex: '(?i:too many messages)',
        action: 'lower',
        connection_limit: 1,
        max_message_rate: '600/m',
        duration: '1h',
      },
    ],
  });
  provider.script = () => ({ code: 451, message: '4.7.1 Too many messages from you, slow down' });
  const stop = await startWorkers(1, policy);
  try {
    const lowered = await sendTo(org, 'gil@gmail-one.test');
    const site = () =>
      t.db.query<{
        connection_limit: number;
        message_rate: number | null;
        capped_until: Date | null;
        paused_until: Date | null;
      }>(
        `SELECT connection_limit, message_rate, capped_until, paused_until FROM destination_sites WHERE site = 'google'`,
      );
    // Waits for the rule's limits themselves: a cap seen before them (CI once read capped_until set with the
    // limits still 5 and none) is not yet this rule's.
    await waitFor(async () => {
      const { rows } = await site();
      return rows.length === 1 && rows[0]!.connection_limit === 1 && rows[0]!.message_rate === 600;
    }, 15_000);
    const after = (await site()).rows[0]!;
    assert.deepEqual([after.connection_limit, after.message_rate], [1, 600]);
    const cappedFor = after.capped_until!.getTime() - Date.now();
    assert.ok(cappedFor > 59 * 60_000 && cappedFor <= 60 * 60_000 + 1000, `capped for ${cappedFor} ms`);
    // The temporary refusal did not spend an attempt.
    assert.equal((await recipients(lowered)).rows[0]!.attempts, 0);

    provider.script = () => ({ code: 421, message: '4.7.0 Unusual volume from your block, try later' });
    await t.db.query(`UPDATE jobs SET run_at = now() WHERE queue = 'deliver-email'`);
    await waitFor(async () => (await recipients(lowered)).rows[0]!.hold_reason === 'site_paused', 15_000);
    const paused = (await site()).rows[0]!;
    const pausedFor = paused.paused_until!.getTime() - Date.now();
    assert.ok(pausedFor > 29 * 60_000 && pausedFor <= 30 * 60_000 + 1000, `paused for ${pausedFor} ms`);
  } finally {
    await stop();
  }
});

test('a 421 4.7.28 at the greeting is read like any reply: the site is held, no attempt spent', async () => {
  provider.greeting = () => ({
    code: 421,
    message: '4.7.28 Our system has detected an unusual rate of unsolicited mail',
  });
  const stop = await startWorkers(1);
  try {
    const id = await sendTo(org, 'hal@gmail-one.test');
    await waitFor(async () => (await recipients(id)).rows[0]!.hold_reason === 'site_paused', 15_000);
    assert.deepEqual((await recipients(id)).rows[0]!.attempts, 0);
    const { rows } = await t.db.query<{ throttle_replies: string }>(
      `SELECT throttle_replies FROM destination_sites WHERE site = 'google'`,
    );
    assert.ok(Number(rows[0]!.throttle_replies) >= 1);
  } finally {
    await stop();
  }
});
