// Egress sources and routing end to end, offline: Mailroom's MX delivery from two loopback addresses
// (127.0.0.2 and 127.0.0.3, each bound for its connections and greeting with its own EHLO name) to a
// simulated provider that records the client address and name of every message, and a relay source
// (a loopback SMTP server that checks credentials). A loopback DNS server makes the recipient domains
// Google's and Microsoft's sites.
import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { startProvider, type Provider } from './helpers/simulated-provider.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { message, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';
import { runCli } from './helpers/cli.ts';
import { onPostgres } from './helpers/database.ts';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { networkInterfaces } from 'node:os';
import { createTransport } from '../src/delivery/transports/index.ts';
import { startDelivery } from '../src/delivery/start-delivery.ts';
import { compileShapingPolicy, type ShapingPolicy } from '../src/shaping/shaping-file.ts';
import { ConfigError } from '../src/platform/config.ts';
import { pauseSite } from '../src/shaping/destinations.ts';
import { addDomain, trustDomain } from '../src/domains/domains.ts';
import { isLocalAddress } from '../src/platform/network-address.ts';

const PROVIDER_HOST = '127.0.0.7';
const MTA1 = '127.0.0.2';
const MTA2 = '127.0.0.3';
const silent = { error: () => {}, warn: () => {} };

let provider: Provider;
let relay: SmtpSink;
let dns: DnsServer;
let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let third: TestOrganization;
let shapingDir: string;

before(async () => {
  provider = await startProvider(PROVIDER_HOST);
  relay = await startSmtpSink({
    starttls: false,
    checkCredentials: (user, pass) => user === 'esp' && pass === 'right',
  });
  dns = await startDnsServer();
  dns.zone.set('gmail-one.test', { mx: [{ priority: 5, exchange: 'gmail-smtp-in.l.google.com' }] });
  dns.zone.set('gmail-smtp-in.l.google.com', { a: [PROVIDER_HOST] });
  dns.zone.set('outlook-one.test', { mx: [{ priority: 0, exchange: 'outlook-one-test.mail.protection.outlook.com' }] });
  dns.zone.set('outlook-one-test.mail.protection.outlook.com', { a: [PROVIDER_HOST] });
  // The install's own file (what GET /sources and /pools show): the routing test's plan, by sending domain.
  shapingDir = await mkdtemp(path.join(tmpdir(), 'mailroom-egress-'));
  const shapingFile = path.join(shapingDir, 'shaping.json');
  await writeFile(
    shapingFile,
    JSON.stringify({
      ...routed(),
      routing: { default_pool: 'shared', domains: { 'dedicated.egress.test': 'dedicated' } },
    }),
  );
  t = await buildTestApp({
    MAILROOM_SHAPING_FILE: shapingFile,
    MAILROOM_TRANSPORT: 'mx',
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_MX_PORT: String(provider.port),
    MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_SMTP_TIMEOUT_MS: '5000',
  });
  org = await createTestOrganization(t.db, t.config, 'egress');
  // A second sending domain, which the file routes through the dedicated pool.
  await trustDomain(t.db, t.config, org.id, (await addDomain(t.db, t.config, org.id, 'dedicated.egress.test')).id);
  other = await createTestOrganization(t.db, t.config, 'egress-other');
  third = await createTestOrganization(t.db, t.config, 'egress-third');
});
after(async () => {
  await t.close();
  await provider.close();
  await relay.close();
  await dns.close();
  await rm(shapingDir, { recursive: true, force: true });
});

beforeEach(async () => {
  provider.reset();
  relay.reset();
  await t.db.query('DELETE FROM destination_sites');
  await t.db.query('DELETE FROM destination_connections');
});

const sources = {
  mta1: { address: MTA1, ehlo: 'mta1.egress.test' },
  mta2: { address: MTA2, ehlo: 'mta2.egress.test' },
};

/** Three pools: Microsoft goes through the relay from the shared one. */
const routed = () => ({
  source: {
    ...sources,
    esp: { relay: `smtp://esp:right@${relay.host}:${relay.port}`, ehlo: 'relay-client.egress.test' },
  },
  pool: {
    shared: { sources: ['mta1'], sites: { microsoft: 'relayed' } },
    dedicated: { sources: ['mta2'] },
    relayed: { sources: ['esp'] },
  },
});

/** One delivery worker with this policy until `run` ends. */
async function delivering(policy: ShapingPolicy, run: () => Promise<void>) {
  const transport = createTransport(t.config, t.db, { policy, shaping: { waitMs: 500 } });
  const worker = await startDelivery(t.db, t.config, transport, silent);
  try {
    await run();
  } finally {
    await worker.stop();
    await transport.close();
  }
}

const sendTo = async (from: TestOrganization, to: string) => {
  const res = await send(t.app, from.sendingKey, message(from, { to }));
  assert.equal(res.statusCode, 200, res.body);
  return res.json().id as string;
};
const events = async (from: TestOrganization, id: string) =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(from.fullKey) })).json()
    .data as Array<{ type: string; data?: Record<string, unknown> }>;

test('each source connects from its own address with its own EHLO name; the pool’s sources take turns; limits hold per source and site', async () => {
  const policy = compileShapingPolicy({ source: sources, site: { google: { connection_limit: 1 } } });
  await delivering(policy, async () => {
    const ids: string[] = [];
    for (let i = 0; i < 24; i++) ids.push(await sendTo(org, `user${i}@gmail-one.test`));
    await waitFor(() => provider.accepted.length >= 24, 30_000);

    const byClient = Map.groupBy(provider.accepted, (accepted) => accepted.client);
    assert.deepEqual([...byClient.keys()].sort(), [MTA1, MTA2]);
    for (const accepted of provider.accepted) {
      assert.equal(accepted.ehlo, accepted.client === MTA1 ? 'mta1.egress.test' : 'mta2.egress.test');
    }
    // Turns: neither source carries everything.
    assert.ok(byClient.get(MTA1)!.length >= 6 && byClient.get(MTA2)!.length >= 6, JSON.stringify([...byClient]));
    // One connection to Google per source, two in all.
    assert.equal(provider.maxConcurrentFrom.get(MTA1), 1);
    assert.equal(provider.maxConcurrentFrom.get(MTA2), 1);
    const { rows } = await t.db.query<{ source: string; site: string }>(
      'SELECT source, site FROM destination_sites ORDER BY source',
    );
    assert.deepEqual(rows, [
      { source: 'mta1', site: 'google' },
      { source: 'mta2', site: 'google' },
    ]);
    // The timeline says which source took each message.
    await waitFor(async () => (await events(org, ids[0]!)).some((event) => event.type === 'delivered'), 10_000);
    const delivered = (await events(org, ids[0]!)).find((event) => event.type === 'delivered')!;
    assert.ok(['mta1', 'mta2'].includes(delivered.data?.source as string), JSON.stringify(delivered));
    const destinations = (
      await t.app.inject({ method: 'GET', url: '/destinations', headers: bearer(org.fullKey) })
    ).json().data as Array<{ source: string; site: string; limits: { connection_limit: number } }>;
    assert.deepEqual(
      destinations.map((d) => [d.source, d.site, d.limits.connection_limit]),
      [
        ['mta1', 'google', 1],
        ['mta2', 'google', 1],
      ],
    );
  });
});

test('routing: a sending domain’s pool, an organization’s pool, the default pool, and a site routed through a relay', async () => {
  const policy = compileShapingPolicy({
    ...routed(),
    routing: {
      default_pool: 'shared',
      organizations: { [org.id]: 'dedicated' },
      domains: { [other.domain]: 'relayed' },
    },
  });
  await delivering(policy, async () => {
    await sendTo(org, 'dedicated@gmail-one.test');
    await sendTo(org, 'dedicated@outlook-one.test'); // the dedicated pool has no route for Microsoft
    await sendTo(other, 'relayed@gmail-one.test');
    await sendTo(third, 'shared@gmail-one.test');
    await sendTo(third, 'shared@outlook-one.test');
    await waitFor(() => provider.accepted.length >= 3 && relay.transactions.length >= 2, 20_000);

    const clients = Object.fromEntries(provider.accepted.map((accepted) => [accepted.to, accepted.client]));
    assert.deepEqual(clients, {
      'dedicated@gmail-one.test': MTA2,
      'dedicated@outlook-one.test': MTA2,
      'shared@gmail-one.test': MTA1,
    });
    assert.deepEqual(relay.transactions.map((tx) => tx.rcptTo[0]).sort(), [
      'relayed@gmail-one.test',
      'shared@outlook-one.test',
    ]);
    assert.equal(relay.transactions[0]!.clientHostname, 'relay-client.egress.test');
    // The relay source's connections count against its site `relay`.
    const { rows } = await t.db.query<{ source: string; site: string }>(
      'SELECT source, site FROM destination_sites ORDER BY source, site',
    );
    assert.deepEqual(rows, [
      { source: 'esp', site: 'relay' },
      { source: 'mta1', site: 'google' },
      { source: 'mta2', site: 'google' },
      { source: 'mta2', site: 'microsoft' },
    ]);
  });

  // GET /sources and /pools show the plan without the relay's credentials; each organization sees its own pool.
  const listed = await t.app.inject({ method: 'GET', url: '/sources', headers: bearer(org.fullKey) });
  assert.equal(listed.statusCode, 200);
  assert.doesNotMatch(listed.body, /right/);
  const sourcesSeen = listed.json().data as Array<Record<string, unknown>>;
  const pools = (await t.app.inject({ method: 'GET', url: '/pools', headers: bearer(org.fullKey) })).json()
    .data as Array<{ name: string; default: boolean; yours: boolean; sites: Record<string, string> }>;
  assert.deepEqual(
    pools.map((p) => [p.name, p.default, p.yours, p.sites]),
    [
      ['shared', true, true, { microsoft: 'relayed' }],
      ['dedicated', false, true, {}],
      ['relayed', false, false, {}],
    ],
  );
  const theirs = (await t.app.inject({ method: 'GET', url: '/pools', headers: bearer(third.fullKey) })).json()
    .data as Array<{ name: string; yours: boolean }>;
  // The third organization's mail goes through the shared pool (and so the relayed one, for Microsoft):
  // the dedicated pool of the first, and its source, are not shown to it.
  assert.deepEqual(
    theirs.map((p) => [p.name, p.yours]),
    [
      ['shared', true],
      ['relayed', false],
    ],
  );
  const theirSources = (await t.app.inject({ method: 'GET', url: '/sources', headers: bearer(third.fullKey) })).json()
    .data as Array<{ name: string }>;
  assert.deepEqual(
    theirSources.map((s) => s.name),
    ['mta1', 'esp'],
  );
  assert.deepEqual(
    sourcesSeen.map((s) => [s.name, s.kind, s.address, s.ehlo, s.relay, s.pools]),
    [
      ['mta1', 'address', MTA1, 'mta1.egress.test', null, ['shared']],
      ['mta2', 'address', MTA2, 'mta2.egress.test', null, ['dedicated']],
      ['esp', 'relay', null, 'relay-client.egress.test', `${relay.host}:${relay.port}`, ['relayed']],
    ],
  );
});

test('a source paused at a site is passed over; with every source paused the message waits in the hold', async () => {
  const policy = compileShapingPolicy({ source: sources });
  const until = new Date(Date.now() + 3_600_000);
  await pauseSite(t.db, policy, { source: 'mta1', site: 'google' }, until, new Date(), 'paused by the operator');
  await delivering(policy, async () => {
    for (let i = 0; i < 6; i++) await sendTo(org, `paused${i}@gmail-one.test`);
    await waitFor(() => provider.accepted.length >= 6, 20_000);
    assert.deepEqual(new Set(provider.accepted.map((accepted) => accepted.client)), new Set([MTA2]));

    await pauseSite(t.db, policy, { source: 'mta2', site: 'google' }, until, new Date(), 'paused by the operator');
    await new Promise((resolve) => setTimeout(resolve, 600)); // the worker reads a site's state every 0.5 s
    const id = await sendTo(org, 'waits@gmail-one.test');
    await waitFor(async () => (await events(org, id)).some((event) => event.type === 'delivery_delayed'), 10_000);
    const delayed = (await events(org, id)).find((event) => event.type === 'delivery_delayed')!;
    assert.equal(delayed.data?.reason, 'site_paused');
    assert.equal(provider.accepted.length, 6);
  });
});

test('the operator pauses a site for every source at once, or for one with --source', async () => {
  // The CLI opens the database itself: a PostgreSQL one (PGlite in memory is this process's own).
  if (!onPostgres) return;
  const { rows: names } = await t.db.query<{ name: string }>('SELECT current_database() AS name');
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${names[0]!.name}`;
  const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-egress-'));
  const file = path.join(dir, 'shaping.json');
  await writeFile(file, JSON.stringify({ source: sources }));
  try {
    const env = { DATABASE_URL: url.toString(), MAILROOM_SHAPING_FILE: file };
    const all = await runCli(['destinations', 'pause', 'google', '--for', '10m', '--json'], env);
    assert.equal(all.code, 0, all.stderr);
    assert.deepEqual(all.json?.sources, ['mta1', 'mta2']);
    const one = await runCli(['destinations', 'resume', 'google', '--source', 'mta2', '--json'], env);
    assert.deepEqual(one.json?.sources, ['mta2']);
    const { rows } = await t.db.query<{ source: string; paused: boolean }>(
      'SELECT source, paused_until IS NOT NULL AS paused FROM destination_sites ORDER BY source',
    );
    assert.deepEqual(rows, [
      { source: 'mta1', paused: true },
      { source: 'mta2', paused: false },
    ]);
    const wrong = await runCli(['destinations', 'pause', 'google', '--source', 'mta9'], env);
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /no source mta9 \(sources: mta1, mta2\)/);
    const listed = await runCli(['sources', 'list'], env);
    assert.match(listed.stdout, /^mta1 {2}127\.0\.0\.2 {2}pools: default$/m);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('declared sources need the mx transport: the smtp relay transport refuses them at start', () => {
  const policy = compileShapingPolicy({ source: sources });
  const config = { ...t.config, transport: 'smtp' as const, smtpUrl: relay.url };
  assert.throws(
    () => createTransport(config, t.db, { policy }),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, /MAILROOM_TRANSPORT.*declare the relay as a source/);
      return true;
    },
  );
});

test('a source address that is not this host’s stops the start, naming the source', () => {
  const policy = compileShapingPolicy({ source: { far: { address: '192.0.2.77' } } });
  assert.throws(
    () => createTransport(t.config, t.db, { policy }),
    /source\.far\.address: 192\.0\.2\.77 is not an address of this host/,
  );
});

test('local addresses: an interface’s own, or any of a loopback network', () => {
  const interfaces = {
    lo: [{ address: '127.0.0.1', netmask: '255.0.0.0', family: 'IPv4', mac: '', internal: true, cidr: '127.0.0.1/8' }],
    eth0: [
      {
        address: '198.51.100.7',
        netmask: '255.255.255.0',
        family: 'IPv4',
        mac: '',
        internal: false,
        cidr: '198.51.100.7/24',
      },
      {
        address: '2001:db8::7',
        netmask: 'ffff:ffff:ffff:ffff::',
        family: 'IPv6',
        mac: '',
        internal: false,
        cidr: '2001:db8::7/64',
        scopeid: 0,
      },
    ],
  } as unknown as ReturnType<typeof networkInterfaces>;
  assert.equal(isLocalAddress('198.51.100.7', interfaces), true);
  assert.equal(isLocalAddress('2001:DB8:0::7', interfaces), true);
  assert.equal(isLocalAddress('127.0.0.3', interfaces), true);
  // The same network, but not an address of the interface: binding it fails.
  assert.equal(isLocalAddress('198.51.100.8', interfaces), false);
  assert.equal(isLocalAddress('2001:db8::8', interfaces), false);
  assert.equal(isLocalAddress('not an address', interfaces), false);
});
