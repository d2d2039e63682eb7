// Resend's domain options `tls` and `region`, end to end: the API takes and answers them back, and a
// domain with tls 'enforced' has its mail delivered (API → queue → worker → mx transport) only over TLS:
// to a loopback SMTP server that offers STARTTLS it is delivered encrypted, to one that does not it is
// deferred with the reason and never reaches DATA, and once retries run out it fails. An opportunistic
// domain's mail still goes in the clear to the server without STARTTLS.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { message, send } from './helpers/emails.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';
import { domainEventDataSql } from '../src/webhooks/event-payloads.ts';

let t: TestApp;
let org: TestOrganization;
let dns: DnsServer;
let tlsServer: SmtpSink; // 127.0.0.1:P, offers STARTTLS (smtp-server's self-signed certificate)
let plainServer: SmtpSink; // 127.0.0.5:P, no STARTTLS
let delivery: TestDelivery;

before(async () => {
  dns = await startDnsServer();
  tlsServer = await startSmtpSink();
  plainServer = await startSmtpSink({ host: '127.0.0.5', port: tlsServer.port, starttls: false });
  dns.zone.set('tls.example', { mx: [{ priority: 10, exchange: 'mx.tls.example' }] });
  dns.zone.set('mx.tls.example', { a: ['127.0.0.1'] });
  dns.zone.set('plain.example', { mx: [{ priority: 10, exchange: 'mx.plain.example' }] });
  dns.zone.set('mx.plain.example', { a: ['127.0.0.5'] });
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'mx',
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_DNS_TIMEOUT_MS: '1000',
    MAILROOM_MX_PORT: String(tlsServer.port),
    // The servers listen on loopback, which the mx transport refuses unless the operator allows it.
    MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_SMTP_TIMEOUT_MS: '2000',
    // A deferred recipient is tried again after 1 s, once; then it fails.
    MAILROOM_DELIVERY_RETRY_SCHEDULE: '1',
  });
  org = await createTestOrganization(t.db, t.config, 'tls');
  delivery = await startTestDelivery(t);
});

after(async () => {
  await delivery?.stop();
  await t?.close();
  await Promise.all([tlsServer, plainServer, dns].map((server) => server?.close()));
});

type Event = { type: string; recipient?: string; data?: Record<string, unknown> };
const timeline = async (id: string): Promise<Event[]> =>
  (await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) })).json().data;
const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
  t.app.inject({ method, url, headers: bearer(org.fullKey), ...(payload ? { payload } : {}) });

async function sendingDomainId(): Promise<string> {
  const list = (await call('GET', '/domains')).json().data as Array<{ id: string; name: string }>;
  return list.find((domain) => domain.name === org.domain)!.id;
}

describe('the API', () => {
  test('POST /domains takes every Resend region and both tls modes; GET and the list answer them back', async () => {
    for (const [region, tls] of [
      ['us-east-1', 'enforced'],
      ['eu-west-1', 'opportunistic'],
      ['sa-east-1', 'enforced'],
      ['ap-northeast-1', 'opportunistic'],
    ] as const) {
      const created = await call('POST', '/domains', { name: `${region}.regions.example`, region, tls });
      assert.equal(created.statusCode, 201, created.body);
      assert.deepEqual([created.json().region, created.json().tls], [region, tls]);
      const read = await call('GET', `/domains/${created.json().id}`);
      assert.deepEqual([read.json().region, read.json().tls], [region, tls]);
    }
    const listed = (await call('GET', '/domains')).json().data as Array<{ name: string; region: string; tls: string }>;
    const inList = listed.find((domain) => domain.name === 'eu-west-1.regions.example')!;
    assert.deepEqual([inList.region, inList.tls], ['eu-west-1', 'opportunistic']);
    // Without them: Resend's defaults.
    const plain = await call('POST', '/domains', { name: 'defaults.regions.example' });
    assert.deepEqual([plain.json().region, plain.json().tls], ['us-east-1', 'opportunistic']);
    // The domain.* webhook events carry the region given.
    const { rows } = await t.db.query<{ data: { region: string } }>(
      `SELECT ${domainEventDataSql('d')} AS data FROM domains d WHERE name = 'ap-northeast-1.regions.example'`,
    );
    assert.equal(rows[0]!.data.region, 'ap-northeast-1');
  });

  test('PATCH /domains/:id sets tls, and leaves it as it is when not given', async () => {
    const created = (await call('POST', '/domains', { name: 'patch.regions.example', region: 'eu-west-1' })).json();
    assert.equal((await call('PATCH', `/domains/${created.id}`, { tls: 'enforced' })).statusCode, 200);
    assert.equal((await call('GET', `/domains/${created.id}`)).json().tls, 'enforced');
    assert.equal((await call('PATCH', `/domains/${created.id}`, { open_tracking: true })).statusCode, 200);
    const read = (await call('GET', `/domains/${created.id}`)).json();
    assert.deepEqual([read.tls, read.open_tracking, read.region], ['enforced', true, 'eu-west-1']);
    assert.equal((await call('PATCH', `/domains/${created.id}`, { tls: 'opportunistic' })).statusCode, 200);
    assert.equal((await call('GET', `/domains/${created.id}`)).json().tls, 'opportunistic');
  });

  test('bad values are a 400 validation_error naming the field, and change nothing', async () => {
    const created = (await call('POST', '/domains', { name: 'refusals.regions.example', tls: 'enforced' })).json();
    const refusals: Array<['POST' | 'PATCH', string, object, string]> = [
      ['POST', '/domains', { name: 'bad-tls.regions.example', tls: 'required' }, 'tls'],
      ['POST', '/domains', { name: 'bad-region.regions.example', region: 'eu-central-1' }, 'region'],
      ['PATCH', `/domains/${created.id}`, { tls: 'none' }, 'tls'],
      ['PATCH', `/domains/${created.id}`, { tls: true }, 'tls'],
      // Resend's update takes no region: it is given when the domain is added.
      ['PATCH', `/domains/${created.id}`, { region: 'eu-west-1' }, 'region'],
    ];
    for (const [method, url, body, field] of refusals) {
      const refused = await call(method, url, body);
      assert.equal(refused.statusCode, 400, `${JSON.stringify(body)}: ${refused.body}`);
      assert.equal(refused.json().name, 'validation_error', refused.body);
      assert.equal(refused.json().field, field, refused.body);
    }
    const { rows } = await t.db.query(`SELECT 1 FROM domains WHERE name LIKE 'bad-%'`);
    assert.equal(rows.length, 0);
    const read = (await call('GET', `/domains/${created.id}`)).json();
    assert.deepEqual([read.tls, read.region], ['enforced', 'us-east-1']);
  });
});

describe('delivery', () => {
  test('tls enforced: delivered over STARTTLS; a server without it never gets the message, which fails after the retries', async () => {
    const id = await sendingDomainId();
    assert.equal((await call('PATCH', `/domains/${id}`, { tls: 'enforced' })).statusCode, 200);
    tlsServer.reset();
    plainServer.reset();
    const sent = await send(t.app, org.fullKey, message(org, { to: ['ann@tls.example', 'bob@plain.example'] }));
    assert.equal(sent.statusCode, 200, sent.body);
    const emailId = sent.json().id as string;

    const outcome = async (recipient: string) =>
      (await timeline(emailId)).filter((event) => event.recipient === recipient).map((event) => event.type);
    await waitFor(async () => (await outcome('bob@plain.example')).includes('failed'), 15_000);
    assert.deepEqual(await outcome('ann@tls.example'), ['delivered']);
    assert.deepEqual(await outcome('bob@plain.example'), ['delivery_delayed', 'failed']);

    assert.deepEqual(
      tlsServer.transactions.map((tx) => [tx.rcptTo, tx.secure]),
      [[['ann@tls.example'], true]],
    );
    assert.ok(plainServer.connections >= 2, 'connected to, at the first try and the retry');
    assert.deepEqual(plainServer.transactions, [], 'nothing reached DATA in the clear');

    const delayed = (await timeline(emailId)).find((event) => event.type === 'delivery_delayed')!;
    const domainPattern = org.domain.replaceAll('.', '\\.');
    assert.match(
      String(delayed.data!.response),
      new RegExp(
        `^4\\.7\\.5 Not delivered: the sending domain ${domainPattern} requires TLS \\(tls: enforced\\), and it could not be had: mx\\.plain\\.example \\[127\\.0\\.0\\.5\\]: Error upgrading connection with STARTTLS`,
      ),
    );
    const { rows } = await t.db.query<{ failure_reason: string }>(
      `SELECT failure_reason FROM email_recipients WHERE email_id = $1 AND address = 'bob@plain.example'`,
      [emailId],
    );
    assert.equal(rows[0]!.failure_reason, 'retries_exhausted');
  });

  test('tls opportunistic: the server without STARTTLS gets the message in the clear', async () => {
    const id = await sendingDomainId();
    assert.equal((await call('PATCH', `/domains/${id}`, { tls: 'opportunistic' })).statusCode, 200);
    plainServer.reset();
    const sent = await send(t.app, org.fullKey, message(org, { to: 'carol@plain.example' }));
    assert.equal(sent.statusCode, 200, sent.body);
    const emailId = sent.json().id as string;
    await waitFor(async () => (await timeline(emailId)).some((event) => event.type === 'delivered'), 10_000);
    assert.deepEqual(
      plainServer.transactions.map((tx) => [tx.rcptTo, tx.secure]),
      [[['carol@plain.example'], false]],
    );
  });
});
