// The deliverability doctor, offline: a loopback DNS server holds a zone where every check passes
// (good.doctor.test, sent from 127.0.0.2 = mta1.doctor.test) and zones where each check fails, a DNS
// blocklist zone, and the return-path domain's MX pointing at a real inbound listener on loopback (or
// at another SMTP server). Each check is seen passing and failing with its fix; then the API, the CLI's
// own function, the daily round, and the domain.health_changed event when a finding changes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startDnsServer, type DnsServer, type ZoneEntry } from './helpers/dns-server.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { freePort } from './helpers/server-process.ts';
import { startInboundServer, type InboundServer } from '../src/inbound/inbound-server.ts';
import { addDomain, trustDomain, verifyDomain } from '../src/domains/domains.ts';
import { recordHosts } from '../src/domains/domain-records.ts';
import { compileShapingPolicy } from '../src/shaping/shaping-file.ts';
import { checkDomain, checkDueDomains, type DoctorContext, type Finding } from '../src/doctor/doctor.ts';
import { evaluateSpf } from '../src/doctor/spf.ts';
import { runCli } from './helpers/cli.ts';
import { waitFor } from './helpers/wait.ts';
import { startDoctor } from '../src/doctor/start-doctor.ts';
import { onPostgres } from './helpers/database.ts';

const RP = 'rp.doctor.test';
const LISTENER = '127.0.0.11';
const OTHER_SMTP = '127.0.0.12';
const quiet = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} } as never;

let dns: DnsServer;
let t: TestApp;
let org: TestOrganization;
let inbound: InboundServer;
let otherSmtp: SmtpSink;
let mxPort: number;
let resolver: Resolver;
const ids: Record<string, string> = {};
const keys: Record<string, string> = {};

/** TXT values longer than 255 octets are published in chunks, as DNS requires. */
const txt = (...values: string[]): ZoneEntry => ({ txt: values.map((v) => v.match(/.{1,255}/g)!) });

before(async () => {
  dns = await startDnsServer();
  resolver = new Resolver();
  resolver.setServers([dns.address]);
  mxPort = await freePort();
  t = await buildTestApp({
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_RETURN_PATH_DOMAIN: RP,
    MAILROOM_MX_PORT: String(mxPort),
    MAILROOM_DNSBL_ZONES: 'bl.doctor.test',
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  org = await createTestOrganization(t.db, t.config, 'doctor');
  for (const name of ['good.doctor.test', 'bad.doctor.test']) {
    const added = await addDomain(t.db, t.config, org.id, name);
    await trustDomain(t.db, t.config, org.id, added.id);
    ids[name] = added.id;
    const { rows } = await t.db.query<{ dkim_public_key: string }>(
      'SELECT dkim_public_key FROM domains WHERE id = $1',
      [added.id],
    );
    keys[name] = rows[0]!.dkim_public_key;
  }
  inbound = await startInboundServer({ db: t.db, signer: t.app.signer, host: LISTENER, port: mxPort, log: quiet });
  otherSmtp = await startSmtpSink({ host: OTHER_SMTP, port: mxPort, starttls: false });

  const z = dns.zone;
  // Everything right: SPF (with an include), DKIM, DMARC with Mailroom's rua, PTR confirmed forward.
  z.set('good.doctor.test', txt('v=spf1 include:_spf.good.doctor.test ip4:127.0.0.2 -all'));
  z.set('_spf.good.doctor.test', txt('v=spf1 ip4:10.0.0.0/8 -all'));
  z.set('mailroom._domainkey.good.doctor.test', txt(`v=DKIM1; k=rsa; p=${keys['good.doctor.test']}`));
  z.set('_dmarc.good.doctor.test', txt(`v=DMARC1; p=none; rua=mailto:dmarc@${RP}`));
  z.set(RP, { ...txt('v=spf1 ip4:127.0.0.2 -all'), mx: [{ priority: 10, exchange: 'in.doctor.test' }] });
  z.set('in.doctor.test', { a: [LISTENER] });
  z.set('2.0.0.127.in-addr.arpa', { ptr: ['mta1.doctor.test'] });
  z.set('mta1.doctor.test', { a: ['127.0.0.2'] });
  // Everything wrong for bad.doctor.test: an SPF record that takes 11 look-ups, another key, no DMARC.
  z.set('bad.doctor.test', txt('v=spf1 include:l1.bad.doctor.test -all'));
  for (let i = 1; i <= 11; i++) z.set(`l${i}.bad.doctor.test`, txt(`v=spf1 include:l${i + 1}.bad.doctor.test -all`));
  z.set('l12.bad.doctor.test', txt('v=spf1 -all'));
  z.set('mailroom._domainkey.bad.doctor.test', txt(`v=DKIM1; k=rsa; p=${keys['good.doctor.test']}`));
  // 127.0.0.3: a PTR that does not resolve back; 127.0.0.4: a PTR that does, under another name than its EHLO.
  z.set('3.0.0.127.in-addr.arpa', { ptr: ['liar.doctor.test'] });
  z.set('liar.doctor.test', { a: ['192.0.2.200'] });
  z.set('4.0.0.127.in-addr.arpa', { ptr: ['generic-4.isp.test'] });
  z.set('generic-4.isp.test', { a: ['127.0.0.4'] });
  // The blocklist lists 127.0.0.3.
  z.set('3.0.0.127.bl.doctor.test', { a: ['127.0.0.2'] });
});
after(async () => {
  await inbound.close();
  await otherSmtp.close();
  await t.close();
  await dns.close();
});

const context = (sources: Record<string, unknown>, returnPath = true): DoctorContext => ({
  db: t.db,
  // Without a return-path domain, the envelope (and so SPF's) domain is the sending domain itself.
  config: returnPath ? t.config : { ...t.config, returnPathDomain: undefined },
  egress: compileShapingPolicy({ source: sources }).egress,
  resolver,
});
const mta1 = { mta1: { address: '127.0.0.2', ehlo: 'mta1.doctor.test' } };
const byCheck = (findings: Finding[], check: string) => findings.filter((f) => f.check === check);
const one = (findings: Finding[], check: string) => {
  const found = byCheck(findings, check);
  assert.equal(found.length, 1, `${check}: ${JSON.stringify(found)}`);
  return found[0]!;
};

test('a domain and source that pass every check', async () => {
  const health = await checkDomain(context(mta1), org.id, ids['good.doctor.test']!);
  const failing = health.findings.filter((f) => f.status !== 'pass');
  assert.deepEqual(failing, [], JSON.stringify(failing, null, 2));
  assert.equal(health.status, 'pass');
  assert.deepEqual(
    [...new Set(health.findings.map((f) => f.check))],
    ['dkim', 'dmarc', 'ptr', 'blocklist', 'spf', 'return_path_mx', 'complaint_rate', 'unsubscribe', 'authentication'],
  );
  // SPF of the envelope domain: the return-path domain, which every copy's MAIL FROM is at.
  const spf = byCheck(health.findings, 'spf');
  assert.deepEqual(
    spf.map((f) => [f.subject, f.status]),
    [[`SPF of ${RP} for source mta1 (127.0.0.2)`, 'pass']],
  );
  // Without a return-path domain it is the sending domain's, here through its include.
  const own = byCheck((await checkDomain(context(mta1, false), org.id, ids['good.doctor.test']!)).findings, 'spf');
  assert.deepEqual(
    own.map((f) => [f.subject, f.summary]),
    [
      [
        'SPF of good.doctor.test for source mta1 (127.0.0.2)',
        'pass (good.doctor.test: ip4:127.0.0.2; 1 of 10 look-ups)',
      ],
    ],
  );
  assert.match(one(health.findings, 'ptr').summary, /127\.0\.0\.2 ⇄ mta1\.doctor\.test/);
});

test('each check failing says the fix to make', async () => {
  const sources = {
    liar: { address: '127.0.0.3', ehlo: 'liar.doctor.test' },
    generic: { address: '127.0.0.4', ehlo: 'mta4.doctor.test' },
    bare: { address: '127.0.0.5' },
  };
  const health = await checkDomain(context(sources), org.id, ids['bad.doctor.test']!);
  assert.equal(health.status, 'fail');
  const dkim = one(health.findings, 'dkim');
  assert.equal(dkim.status, 'fail');
  assert.match(dkim.summary, /is not the one Mailroom signs with/);
  assert.ok(dkim.fix!.includes(keys['bad.doctor.test']!), 'the fix gives the key to publish');
  const dmarc = one(health.findings, 'dmarc');
  assert.equal(dmarc.status, 'fail');
  assert.equal(dmarc.fix, `Publish TXT _dmarc.bad.doctor.test "v=DMARC1; p=none; rua=mailto:dmarc@${RP}".`);

  const ptr = byCheck(health.findings, 'ptr');
  assert.deepEqual(
    ptr.map((f) => [f.subject, f.status]),
    [
      ['source liar (127.0.0.3)', 'fail'],
      ['source generic (127.0.0.4)', 'warn'],
      ['source bare (127.0.0.5)', 'fail'],
    ],
  );
  assert.match(ptr[0]!.summary, /does not resolve back/);
  assert.match(ptr[1]!.fix!, /Set the source's ehlo to generic-4\.isp\.test, or the PTR to mta4\.doctor\.test/);
  assert.match(ptr[2]!.summary, /has no PTR record/);

  const listed = byCheck(health.findings, 'blocklist').filter((f) => f.status === 'fail');
  assert.deepEqual(
    listed.map((f) => f.subject),
    ['source liar (127.0.0.3) on bl.doctor.test'],
  );
  assert.match(listed[0]!.summary, /listed on bl\.doctor\.test \(127\.0\.0\.2\)/);

  const ownSpf = byCheck((await checkDomain(context(sources, false), org.id, ids['bad.doctor.test']!)).findings, 'spf');
  const spf = ownSpf.find((f) => f.subject === 'SPF of bad.doctor.test for source liar (127.0.0.3)')!;
  assert.equal(spf.status, 'fail');
  assert.match(spf.summary, /^permerror: more than 10 DNS look-ups/);
  assert.match(spf.fix!, /replace includes by the ip4:\/ip6: they stand for/);
  const rpSpf = byCheck(health.findings, 'spf').find((f) => f.subject === `SPF of ${RP} for source liar (127.0.0.3)`)!;
  assert.equal(rpSpf.fix, `Add ip4:127.0.0.3 to the SPF record of ${RP}.`);
  assert.equal(one(health.findings, 'authentication').status, 'fail');
});

test('DKIM missing, DMARC without Mailroom’s rua, SPF missing', async () => {
  dns.zone.set('mailroom._domainkey.bad.doctor.test', txt('v=spf1 -all'));
  dns.zone.set('_dmarc.bad.doctor.test', txt('v=DMARC1; p=reject; rua=mailto:reports@elsewhere.example'));
  dns.zone.set('bad.doctor.test', {});
  try {
    const health = await checkDomain(context(mta1), org.id, ids['bad.doctor.test']!);
    assert.match(one(health.findings, 'dkim').summary, /^no DKIM key at mailroom\._domainkey\.bad\.doctor\.test/);
    const dmarc = one(health.findings, 'dmarc');
    assert.equal(dmarc.status, 'warn');
    assert.match(
      dmarc.fix!,
      new RegExp(`^Add rua=mailto:dmarc@${RP.replace(/\./g, '\\.')} to _dmarc\\.bad\\.doctor\\.test`),
    );
    const own = await checkDomain(context(mta1, false), org.id, ids['bad.doctor.test']!);
    const spf = byCheck(own.findings, 'spf').find((f) => f.subject.startsWith('SPF of bad.doctor.test'))!;
    assert.equal(spf.fix, 'Publish TXT bad.doctor.test "v=spf1 ip4:127.0.0.2 -all".');
  } finally {
    dns.zone.set('mailroom._domainkey.bad.doctor.test', txt(`v=DKIM1; k=rsa; p=${keys['good.doctor.test']}`));
    dns.zone.delete('_dmarc.bad.doctor.test');
    dns.zone.set('bad.doctor.test', txt('v=spf1 include:l1.bad.doctor.test -all'));
  }
});

test('the return path’s MX must reach the inbound listener', async () => {
  dns.zone.set('in.doctor.test', { a: [OTHER_SMTP] });
  try {
    const health = await checkDomain(context(mta1), org.id, ids['good.doctor.test']!);
    const mx = one(health.findings, 'return_path_mx');
    assert.equal(mx.status, 'fail');
    assert.match(mx.summary, /in\.doctor\.test \[127\.0\.0\.12\] answered "220 /);
    assert.match(mx.fix!, /Point the MX of rp\.doctor\.test at the host running the listener/);
  } finally {
    dns.zone.set('in.doctor.test', { a: [LISTENER] });
  }
});

test('a domain with its own return path is checked there: SPF and the MX of send.<domain>', async () => {
  const name = 'own.doctor.test';
  const added = await addDomain(t.db, t.config, org.id, name, { custom_return_path: 'send' });
  await trustDomain(t.db, t.config, org.id, added.id);
  dns.zone.set(`send.${name}`, {
    ...txt('v=spf1 ip4:127.0.0.2 -all'),
    mx: [{ priority: 10, exchange: 'in.doctor.test' }],
  });
  const health = await checkDomain(context(mta1), org.id, added.id);
  assert.deepEqual(
    byCheck(health.findings, 'spf').map((f) => [f.subject, f.status]),
    [[`SPF of send.${name} for source mta1 (127.0.0.2)`, 'pass']],
  );
  const mx = one(health.findings, 'return_path_mx');
  assert.deepEqual([mx.subject, mx.status], [`send.${name}`, 'pass']);
  // Even without the server's return-path domain: the domain's own is where its copies' MAIL FROM is.
  const alone = await checkDomain(context(mta1, false), org.id, added.id);
  assert.equal(one(alone.findings, 'return_path_mx').subject, `send.${name}`);
});

test('a receiving domain’s own MX must reach the inbound listener; a domain that does not receive is not asked', async () => {
  const name = 'inbox.doctor.test';
  const added = await addDomain(t.db, t.config, org.id, name, { capabilities: { receiving: 'enabled' } });
  await trustDomain(t.db, t.config, org.id, added.id);
  dns.zone.set(name, { mx: [{ priority: 10, exchange: 'in.doctor.test' }] });
  const reached = one((await checkDomain(context(mta1), org.id, added.id)).findings, 'receiving_mx');
  assert.deepEqual([reached.subject, reached.status], [name, 'pass']);

  // A mailbox provider's MX first: the mail goes there, not here.
  dns.zone.set(name, {
    mx: [
      { priority: 5, exchange: 'elsewhere.doctor.test' },
      { priority: 10, exchange: 'in.doctor.test' },
    ],
  });
  dns.zone.set('elsewhere.doctor.test', { a: [OTHER_SMTP] });
  const missed = one((await checkDomain(context(mta1), org.id, added.id)).findings, 'receiving_mx');
  assert.equal(missed.status, 'fail');
  assert.match(missed.summary, /receiving is enabled, but the MX of inbox\.doctor\.test does not reach/);
  assert.match(missed.fix!, /^Point the MX of inbox\.doctor\.test .* or disable receiving\.$/);

  const good = await checkDomain(context(mta1), org.id, ids['good.doctor.test']!);
  assert.deepEqual(byCheck(good.findings, 'receiving_mx'), []);

  // Verification checks the Receiving record too: the listener's host among the name's exchanges.
  const receivingStatus = async () =>
    (await verifyDomain(t.db, t.config, org.id, added.id)).records.find((record) => record.record === 'Receiving')!
      .status;
  assert.equal(await receivingStatus(), 'failed', 'in.doctor.test is not the host the records name');
  const inbound = recordHosts(t.config).inbound;
  dns.zone.set(name, { mx: [{ priority: 10, exchange: inbound }] });
  assert.equal(await receivingStatus(), 'verified');
});

test('complaint rate against 0.1% and 0.3%, and one-click unsubscribe for a bulk sender', async () => {
  const counts = async (delivered: number, complained: number) => {
    await t.db.query('DELETE FROM email_event_counts WHERE organization_id = $1', [org.id]);
    await t.db.query(
      `INSERT INTO email_event_counts (organization_id, hour, type, shard, count)
       VALUES ($1, date_trunc('hour', now()), 'delivered', 0, $2), ($1, date_trunc('hour', now()), 'complained', 0, $3)`,
      [org.id, delivered, complained],
    );
  };
  const rate = async () =>
    one((await checkDomain(context(mta1), org.id, ids['good.doctor.test']!)).findings, 'complaint_rate');
  await counts(10_000, 5);
  assert.equal((await rate()).status, 'pass');
  await counts(10_000, 15);
  const warned = await rate();
  assert.equal(warned.status, 'warn');
  assert.match(warned.summary, /^complaint rate 0\.15% \(15 complaints of 10000 delivered, 30 days\)/);
  await counts(10_000, 30);
  assert.equal((await rate()).status, 'fail');
  await t.db.query('DELETE FROM email_event_counts WHERE organization_id = $1', [org.id]);

  // 5,000 messages in a day from the domain without a topic: a bulk sender without one-click unsubscribe.
  await t.db.query(
    `INSERT INTO emails (id, organization_id, "from", "to", subject, message_id, status, recipient_count)
     SELECT gen_random_uuid(), $1, 'News <news@good.doctor.test>', '["a@example.com"]', 'News', '<' || g || '@good.doctor.test>', 'sent', 1
       FROM generate_series(1, 5000) AS g`,
    [org.id],
  );
  try {
    const unsubscribe = one(
      (await checkDomain(context(mta1), org.id, ids['good.doctor.test']!)).findings,
      'unsubscribe',
    );
    assert.equal(unsubscribe.status, 'warn');
    assert.match(unsubscribe.summary, /^5000 of 5000 messages from good\.doctor\.test in 30 days carried no topic/);
  } finally {
    await t.db.query(`DELETE FROM emails WHERE organization_id = $1 AND subject = 'News'`, [org.id]);
  }
});

test('SPF evaluation: redirect, a, mx, softfail, void look-ups, two records', async () => {
  const z = dns.zone;
  z.set('r.spf.test', txt('v=spf1 redirect=target.spf.test'));
  z.set('target.spf.test', txt('v=spf1 a mx ~all'));
  z.set('target.spf.test', {
    ...txt('v=spf1 a mx ~all'),
    a: ['192.0.2.1'],
    mx: [{ priority: 1, exchange: 'mx.spf.test' }],
  });
  z.set('mx.spf.test', { a: ['192.0.2.2'] });
  z.set('two.spf.test', txt('v=spf1 -all', 'v=spf1 +all'));
  z.set('void.spf.test', txt('v=spf1 a:n1.spf.test a:n2.spf.test a:n3.spf.test -all'));
  assert.equal((await evaluateSpf(resolver, '192.0.2.1', 'r.spf.test')).result, 'pass');
  assert.equal((await evaluateSpf(resolver, '192.0.2.2', 'r.spf.test')).result, 'pass');
  const soft = await evaluateSpf(resolver, '192.0.2.3', 'r.spf.test');
  assert.deepEqual([soft.result, soft.lookups], ['softfail', 3]);
  assert.equal((await evaluateSpf(resolver, '192.0.2.1', 'two.spf.test')).result, 'permerror');
  assert.match((await evaluateSpf(resolver, '192.0.2.1', 'void.spf.test')).reason, /more than 2 void look-ups/);
  assert.equal((await evaluateSpf(resolver, '192.0.2.1', 'nothing.spf.test')).result, 'none');
  // A prefix length out of range is a syntax error, answered at once.
  z.set('cidr.spf.test', txt('v=spf1 ip4:192.0.2.1/99999999999999999999 -all'));
  assert.match((await evaluateSpf(resolver, '192.0.2.1', 'cidr.spf.test')).reason, /prefix length out of range/);
  z.set('cidr6.spf.test', txt('v=spf1 a/24//129 -all'));
  assert.equal((await evaluateSpf(resolver, '192.0.2.1', 'cidr6.spf.test')).result, 'permerror');
  z.set('badip.spf.test', txt('v=spf1 ip4:2001:db8::1 -all'));
  assert.match((await evaluateSpf(resolver, '192.0.2.1', 'badip.spf.test')).reason, /not an IPv4 address/);
  // Macros are not expanded: the term is passed over.
  z.set('macro.spf.test', txt('v=spf1 exists:%{i}._spf.macro.spf.test ip4:192.0.2.1 -all'));
  assert.equal((await evaluateSpf(resolver, '192.0.2.1', 'macro.spf.test')).result, 'pass');
});

test('POST /domains/:id/check, GET /domains/:id/health, the daily round, and domain.health_changed when a finding changes', async () => {
  await observeWebhookEvents(t.app, org);
  const id = ids['good.doctor.test']!;
  const before = await t.app.inject({
    method: 'GET',
    url: `/domains/${ids['bad.doctor.test']}/health`,
    headers: bearer(org.fullKey),
  });
  assert.equal(before.statusCode, 200);
  const checked = await t.app.inject({ method: 'POST', url: `/domains/${id}/check`, headers: bearer(org.fullKey) });
  assert.equal(checked.statusCode, 200, checked.body);
  const health = checked.json();
  assert.equal(health.object, 'domain_health');
  assert.equal(health.domain, 'good.doctor.test');
  // The app declares no sources: the one source's address is unknown, which the doctor says.
  const ptr = health.findings.find((f: Finding) => f.check === 'ptr');
  assert.deepEqual([ptr.status, ptr.subject], ['warn', 'source default']);
  const read = await t.app.inject({ method: 'GET', url: `/domains/${id}/health`, headers: bearer(org.fullKey) });
  assert.deepEqual(read.json().findings, health.findings);

  // DMARC goes away: the finding changes, and the event says how.
  const events = async () => queuedEvents(t.db, org.id, 'domain.health_changed');
  const seen = (await events()).length;
  dns.zone.delete('_dmarc.good.doctor.test');
  try {
    await t.app.inject({ method: 'POST', url: `/domains/${id}/check`, headers: bearer(org.fullKey) });
    const after = await events();
    assert.equal(after.length, seen + 1);
    const event = after.at(-1)!;
    assert.equal(event.data.id, id);
    assert.equal(event.data.status, 'fail');
    assert.deepEqual(
      (event.data.changes as Array<Record<string, unknown>>).map((c) => [c.check, c.from, c.to]),
      [
        ['dmarc', 'pass', 'fail'],
        ['authentication', 'pass', 'fail'],
      ],
    );
    // The same findings again: no event.
    await t.app.inject({ method: 'POST', url: `/domains/${id}/check`, headers: bearer(org.fullKey) });
    assert.equal((await events()).length, seen + 1);
  } finally {
    dns.zone.set('_dmarc.good.doctor.test', txt(`v=DMARC1; p=none; rua=mailto:dmarc@${RP}`));
  }

  // Another organization cannot check or read it.
  const stranger = await createTestOrganization(t.db, t.config, 'doctor-stranger');
  assert.equal(
    (await t.app.inject({ method: 'POST', url: `/domains/${id}/check`, headers: bearer(stranger.fullKey) })).statusCode,
    404,
  );
  assert.equal(
    (await t.app.inject({ method: 'GET', url: `/domains/${id}/health`, headers: bearer(stranger.fullKey) })).statusCode,
    404,
  );

  // The daily round: every verified domain not checked for a day, then none until a day has passed.
  let now = new Date(Date.now() + 2 * 86_400_000);
  const round = { ...context(mta1), now: () => now };
  const due = await checkDueDomains(round, 86_400_000, 100);
  assert.ok(due >= 3, `the verified domains were due (${due})`);
  assert.equal(await checkDueDomains(round, 86_400_000, 100), 0);
  now = new Date(now.getTime() + 86_400_000 + 1000);
  assert.ok((await checkDueDomains(round, 86_400_000, 100)) >= 3);
});

test('mailroom domain check prints the findings with their fixes', async () => {
  // The CLI opens the database itself: a PostgreSQL one (PGlite in memory is this process's own).
  if (!onPostgres) return;
  const { rows } = await t.db.query<{ name: string }>('SELECT current_database() AS name');
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${rows[0]!.name}`;
  const env = {
    DATABASE_URL: url.toString(),
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_RETURN_PATH_DOMAIN: RP,
    MAILROOM_MX_PORT: String(mxPort),
    MAILROOM_DNSBL_ZONES: 'bl.doctor.test',
  };
  const printed = await runCli(['domain', 'check', '--org', org.id, 'bad.doctor.test'], env);
  assert.equal(printed.code, 0, printed.stderr);
  assert.match(printed.stdout, /^domain bad\.doctor\.test: fail$/m);
  assert.match(printed.stdout, /^fail {2}dmarc · bad\.doctor\.test: no DMARC record/m);
  assert.match(printed.stdout, /^ {6}fix: Publish TXT _dmarc\.bad\.doctor\.test/m);
  const json = await runCli(['domain', 'check', '--org', org.id, 'good.doctor.test', '--json'], env);
  assert.equal(json.json?.object, 'domain_health');
  const missing = await runCli(['domain', 'check', '--org', org.id, 'nope.doctor.test'], env);
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /not one of this organization's/);
});

test('the real timer: the first round runs after its delay and checks the due domains', async () => {
  await t.db.query('DELETE FROM domain_health');
  const rounds = startDoctor(context(mta1), quiet, { firstDelayMs: 10, roundMs: 3_600_000 });
  try {
    await waitFor(async () => {
      const { rows } = await t.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM domain_health WHERE domain_id = $1 AND findings <> '[]'`,
        [ids['good.doctor.test']],
      );
      return rows[0]!.n === 1;
    }, 15_000);
  } finally {
    await rounds.stop();
  }
});
