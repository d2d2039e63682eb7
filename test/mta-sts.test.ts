// MTA-STS (RFC 8461) and TLS-required domains on delivery, offline: a test certificate authority given
// to the process (MAILROOM_EXTRA_CA_FILE), an HTTPS server on loopback serving the recipient domains'
// policies (MAILROOM_MTA_STS_PORT), a loopback DNS server with their `_mta-sts` TXT records and MX
// hosts, and two SMTP servers on one port: 127.0.0.9 with a certificate the test CA issued for
// mx.good.sts.test, and 127.0.0.10 with smtp-server's own self-signed one. Then the cache's rules over
// an injected clock, and the policy file's syntax.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:https';
import { Resolver } from 'node:dns/promises';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { makeTestCa, type TestCa } from './helpers/test-ca.ts';
import { message, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';
import { freePort } from './helpers/server-process.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import {
  createMtaSts,
  mxMatches,
  parsePolicy,
  RECHECK_MS,
  stsRecordId,
  type MtaStsPolicy,
} from '../src/delivery/transports/mta-sts.ts';

const POLICY_HOST = '127.0.0.8';
const GOOD_MX = '127.0.0.9';
const SELF_SIGNED_MX = '127.0.0.10';

let ca: TestCa;
let dns: DnsServer;
let policyServer: Server;
let good: SmtpSink;
let selfSigned: SmtpSink;
let t: TestApp;
let org: TestOrganization;
let delivery: TestDelivery;
/** Policy files served, by domain; and how many times each was fetched. */
const policies = new Map<string, string>();
const fetches = new Map<string, number>();

const policy = (mode: string, ...mx: string[]) =>
  ['version: STSv1', `mode: ${mode}`, ...mx.map((host) => `mx: ${host}`), 'max_age: 86400', ''].join('\r\n');

/** A recipient domain: its MX host (and that host's address), and an MTA-STS policy if given. */
function domain(name: string, mx: { host: string; address: string }, served?: string) {
  dns.zone.set(name, { mx: [{ priority: 10, exchange: mx.host }] });
  dns.zone.set(mx.host, { a: [mx.address] });
  if (served !== undefined) {
    dns.zone.set(`_mta-sts.${name}`, { txt: [['v=STSv1; id=20261125T000000']] });
    dns.zone.set(`mta-sts.${name}`, { a: [POLICY_HOST] });
    policies.set(name, served);
  }
}

before(async () => {
  ca = await makeTestCa();
  dns = await startDnsServer();
  // One port for both MX servers: the mx transport connects to every MX host on MAILROOM_MX_PORT.
  const mxPort = await freePort();
  good = await startSmtpSink({ host: GOOD_MX, port: mxPort, tls: await ca.issue(['mx.good.sts.test']) });
  selfSigned = await startSmtpSink({ host: SELF_SIGNED_MX, port: mxPort });
  // The policy host's certificate covers the domains whose policy is fetched; nocert.sts.test's is not.
  const policyNames = ['good', 'badcert', 'unlisted', 'testing', 'starttls'].map((d) => `mta-sts.${d}.sts.test`);
  policyServer = createServer(await ca.issue(policyNames), (request, response) => {
    const host = (request.headers.host ?? '').replace(/:\d+$/, '').replace(/^mta-sts\./, '');
    fetches.set(host, (fetches.get(host) ?? 0) + 1);
    const body = request.url === '/.well-known/mta-sts.txt' ? policies.get(host) : undefined;
    if (body === undefined) return response.writeHead(404).end();
    response.writeHead(200, { 'content-type': 'text/plain' }).end(body);
  });
  const policyPort = await freePort();
  await new Promise<void>((resolve) => policyServer.listen(policyPort, POLICY_HOST, resolve));

  const goodMx = { host: 'mx.good.sts.test', address: GOOD_MX };
  domain('good.sts.test', goodMx, policy('enforce', '*.good.sts.test'));
  domain(
    'badcert.sts.test',
    { host: 'mx.badcert.sts.test', address: SELF_SIGNED_MX },
    policy('enforce', 'mx.badcert.sts.test'),
  );
  domain('unlisted.sts.test', goodMx, policy('enforce', 'mx.elsewhere.example'));
  domain(
    'testing.sts.test',
    { host: 'mx.testing.sts.test', address: SELF_SIGNED_MX },
    policy('testing', 'mx.testing.sts.test'),
  );
  domain(
    'nocert.sts.test',
    { host: 'mx.nocert.sts.test', address: SELF_SIGNED_MX },
    policy('enforce', 'mx.nocert.sts.test'),
  );
  domain('required.sts.test', { host: 'mx.required.sts.test', address: SELF_SIGNED_MX });
  domain('required-ok.sts.test', goodMx);
  domain('plain.sts.test', { host: 'mx.plain.sts.test', address: SELF_SIGNED_MX });

  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'mx',
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_MX_PORT: String(mxPort),
    MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_SMTP_TIMEOUT_MS: '5000',
    MAILROOM_MTA_STS_PORT: String(policyPort),
    MAILROOM_EXTRA_CA_FILE: ca.caFile,
    MAILROOM_TLS_REQUIRED_DOMAINS: 'required.sts.test,required-ok.sts.test',
  });
  org = await createTestOrganization(t.db, t.config, 'sts');
  delivery = await startTestDelivery(t);
});
after(async () => {
  await delivery.stop();
  await t.close();
  await Promise.all([good.close(), selfSigned.close(), dns.close(), ca.close()]);
  await new Promise((resolve) => policyServer.close(resolve));
});

type Event = { type: string; data?: Record<string, unknown> };
const sendTo = async (to: string) => {
  const res = await send(t.app, org.sendingKey, message(org, { to }));
  assert.equal(res.statusCode, 200, res.body);
  return res.json().id as string;
};
const events = async (id: string) =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) })).json()
    .data as Event[];
const firstOf = async (id: string, types: string[]) => {
  let found: Event | undefined;
  await waitFor(
    async () => (found = (await events(id)).find((event) => types.includes(event.type))) !== undefined,
    15_000,
  );
  return found!;
};
const received = (sink: SmtpSink, to: string) => sink.transactions.filter((tx) => tx.rcptTo.includes(to));

test('enforce: delivered over TLS to an MX host the policy names, with a certificate valid for it', async () => {
  const id = await sendTo('someone@good.sts.test');
  const delivered = await firstOf(id, ['delivered', 'delivery_delayed']);
  assert.equal(delivered.type, 'delivered', JSON.stringify(delivered));
  const [tx] = received(good, 'someone@good.sts.test');
  assert.equal(tx?.secure, true);
  assert.equal(fetches.get('good.sts.test'), 1);
});

test('enforce: an MX certificate the trusted CAs did not issue defers the recipient, and nothing goes in the clear', async () => {
  const id = await sendTo('someone@badcert.sts.test');
  const deferred = await firstOf(id, ['delivery_delayed', 'delivered']);
  assert.equal(deferred.type, 'delivery_delayed');
  assert.match(
    String(deferred.data?.response),
    /^4\.7\.5 Not delivered: the MTA-STS policy of badcert\.sts\.test \(enforce\) requires TLS with a certificate valid for the MX host: mx\.badcert\.sts\.test \[127\.0\.0\.10\]: .*certificate/i,
  );
  assert.deepEqual(received(selfSigned, 'someone@badcert.sts.test'), []);
});

test('enforce: an MX host the policy does not name is not connected to', async () => {
  const before = good.connections;
  const id = await sendTo('someone@unlisted.sts.test');
  const deferred = await firstOf(id, ['delivery_delayed', 'delivered']);
  assert.equal(deferred.type, 'delivery_delayed');
  assert.match(
    String(deferred.data?.response),
    /no MX host of unlisted\.sts\.test \(mx\.good\.sts\.test\) is one that the MTA-STS policy of unlisted\.sts\.test \(enforce\) names \(mx: mx\.elsewhere\.example\)/,
  );
  assert.equal(good.connections, before);
});

test('testing: delivered as usual, and the timeline says where TLS fell short of the policy', async () => {
  const id = await sendTo('someone@testing.sts.test');
  const delivered = await firstOf(id, ['delivered', 'delivery_delayed']);
  assert.equal(delivered.type, 'delivered');
  assert.match(
    String(delivered.data?.tls),
    /^MTA-STS policy of testing\.sts\.test in testing mode not met: mx\.testing\.sts\.test: .*(certificate|CERT)/i,
  );
  assert.equal(received(selfSigned, 'someone@testing.sts.test').length, 1);
});

test('a policy that cannot be fetched over valid HTTPS is no policy: delivered as usual', async () => {
  const id = await sendTo('someone@nocert.sts.test');
  assert.equal((await firstOf(id, ['delivered', 'delivery_delayed'])).type, 'delivered');
  assert.equal(fetches.get('nocert.sts.test'), undefined, 'the TLS handshake failed before any request');
});

test('the operator’s TLS-required domains: a valid certificate is delivered to, an invalid one deferred', async () => {
  const ok = await sendTo('someone@required-ok.sts.test');
  assert.equal((await firstOf(ok, ['delivered', 'delivery_delayed'])).type, 'delivered');
  assert.equal(received(good, 'someone@required-ok.sts.test')[0]?.secure, true);

  const refused = await sendTo('someone@required.sts.test');
  const deferred = await firstOf(refused, ['delivery_delayed', 'delivered']);
  assert.equal(deferred.type, 'delivery_delayed');
  assert.match(String(deferred.data?.response), /required\.sts\.test requires TLS \(the operator's setting\)/);
  assert.deepEqual(received(selfSigned, 'someone@required.sts.test'), []);
});

test('without a policy or a requirement, TLS stays opportunistic (a self-signed certificate is fine)', async () => {
  const id = await sendTo('someone@plain.sts.test');
  assert.equal((await firstOf(id, ['delivered', 'delivery_delayed'])).type, 'delivered');
  assert.equal(received(selfSigned, 'someone@plain.sts.test')[0]?.secure, true);
});

// The cache: a policy stands for its max_age while its id is unchanged, and while the TXT record or
// the fetch fails; it is kept in the database, so a new process knows it.
test('policies are cached for their max_age by id, survive a failed fetch or a vanished record, and a restart', async () => {
  const zone = dns.zone;
  zone.set('_mta-sts.cache.sts.test', { txt: [['v=STSv1; id=one']] });
  let served: string | Error = policy('enforce', 'mx.cache.sts.test').replace('86400', '3600');
  let fetched = 0;
  let now = new Date('2026-11-25T12:00:00Z');
  const later = (ms: number) => void (now = new Date(now.getTime() + ms));
  const resolver = new Resolver();
  resolver.setServers([dns.address]);
  const make = () =>
    createMtaSts(t.config, {
      resolver,
      db: t.db,
      now: () => now,
      fetchPolicy: async () => {
        fetched += 1;
        if (served instanceof Error) throw served;
        return served;
      },
    });
  const sts = make();
  const mode = async (instance = sts) => {
    const rule = await instance.ruleFor('cache.sts.test');
    return rule.kind === 'mta-sts' ? rule.policy.mode : rule.kind;
  };
  assert.equal(await mode(), 'enforce');
  assert.equal(await mode(), 'enforce');
  assert.equal(fetched, 1, 'the same id: the cached policy');

  // A new id: seen at the next look-up of the record (5 minutes on), and fetched.
  zone.set('_mta-sts.cache.sts.test', { txt: [['v=STSv1; id=two']] });
  served = policy('testing', 'mx.cache.sts.test').replace('86400', '3600');
  assert.equal(await mode(), 'enforce', 'the answer is kept for 5 minutes');
  later(RECHECK_MS);
  assert.equal(await mode(), 'testing');
  assert.equal(fetched, 2);

  // A newer id whose policy cannot be fetched: the cached one stands; so it does when the record goes.
  zone.set('_mta-sts.cache.sts.test', { txt: [['v=STSv1; id=three']] });
  served = new Error('connection refused');
  later(RECHECK_MS);
  assert.equal(await mode(), 'testing');
  assert.equal(fetched, 3);
  zone.delete('_mta-sts.cache.sts.test');
  later(RECHECK_MS);
  assert.equal(await mode(), 'testing');

  // Another process (no memory of it) finds it in the database.
  assert.equal(await mode(make()), 'testing');

  // Past its max_age without a record: no policy.
  now = new Date(now.getTime() + 3600_000 + 1000);
  assert.equal(await mode(), 'opportunistic');
});

test('the policy file and the TXT record, as RFC 8461 writes them', () => {
  const at = new Date();
  const parsed = parsePolicy(
    'version: STSv1\nmode: enforce\nmx: mail.example.com\nmx: *.example.net\nmax_age: 604800\n',
    'x',
    at,
  ) as MtaStsPolicy;
  assert.deepEqual(
    [parsed.mode, parsed.mx, parsed.maxAgeSeconds],
    ['enforce', ['mail.example.com', '*.example.net'], 604800],
  );
  assert.match(
    (parsePolicy('version: STSv2\nmode: enforce\nmx: a.example\nmax_age: 1', 'x', at) as { invalid: string }).invalid,
    /STSv1/,
  );
  assert.match(
    (parsePolicy('version: STSv1\nmode: strict\nmx: a.example\nmax_age: 1', 'x', at) as { invalid: string }).invalid,
    /mode/,
  );
  assert.match(
    (parsePolicy('version: STSv1\nmode: enforce\nmax_age: 1', 'x', at) as { invalid: string }).invalid,
    /names no mx/,
  );
  assert.match(
    (parsePolicy('version: STSv1\nmode: enforce\nmx: a.example\nmax_age: 31557601', 'x', at) as { invalid: string })
      .invalid,
    /max_age/,
  );
  assert.match((parsePolicy('<html>', 'x', at) as { invalid: string }).invalid, /key: value/);

  assert.equal(mxMatches('*.example.net', 'mx1.example.net'), true);
  assert.equal(mxMatches('*.example.net', 'a.mx1.example.net'), false, 'one label only');
  assert.equal(mxMatches('*.example.net', 'example.net'), false);
  assert.equal(mxMatches('mail.example.com', 'MAIL.example.com.'), true);
  assert.equal(mxMatches('mail.example.com', 'mail2.example.com'), false);

  assert.equal(stsRecordId([['v=STSv1; id=20160831085700Z;']]), '20160831085700Z');
  assert.equal(stsRecordId([['v=STSv1; ', 'id=abc']]), 'abc', 'a record split in strings is one');
  assert.equal(stsRecordId([['v=spf1 -all'], ['v=STSv1; id=abc']]), 'abc');
  assert.equal(stsRecordId([['v=STSv1; id=a'], ['v=STSv1; id=b']]), undefined, 'two records: none');
  assert.equal(stsRecordId([['v=STSv1; id=not-alphanumeric']]), undefined);
});

test('a policy is refreshed ahead of its expiry, and a process whose copy ran out reads the one another refreshed', async () => {
  dns.zone.set('_mta-sts.fleet.sts.test', { txt: [['v=STSv1; id=fleet1']] });
  let now = new Date('2026-11-25T12:00:00Z');
  let fetched = 0;
  let failing = false;
  const resolver = new Resolver();
  resolver.setServers([dns.address]);
  const make = () =>
    createMtaSts(t.config, {
      resolver,
      db: t.db,
      now: () => now,
      fetchPolicy: async () => {
        fetched += 1;
        if (failing) throw new Error('blocked');
        return policy('enforce', 'mx.fleet.sts.test').replace('86400', '3600');
      },
    });
  const [a, b] = [make(), make()];
  const mode = async (instance: typeof a) => {
    const rule = await instance.ruleFor('fleet.sts.test');
    return rule.kind === 'mta-sts' ? rule.policy.mode : rule.kind;
  };
  assert.equal(await mode(a), 'enforce');
  assert.equal(fetched, 1);
  // Past half its max_age: B (reading the database's copy) fetches it again, the id unchanged.
  now = new Date(now.getTime() + 3000_000);
  assert.equal(await mode(b), 'enforce');
  assert.equal(fetched, 2);
  // Past A's copy's expiry, with the record stripped and the fetch blocked: A finds B's fresher copy.
  now = new Date(now.getTime() + 700_000);
  failing = true;
  dns.zone.delete('_mta-sts.fleet.sts.test');
  assert.equal(await mode(a), 'enforce');
});
