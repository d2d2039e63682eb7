// Resend's per-domain `custom_return_path` and `tracking_subdomain`, end to end with real peers on
// loopback: the records GET /domains/:id lists for them and their verification against a DNS server; a
// message delivered through the worker to an SMTP relay leaves with its VERP return path at the
// domain's return-path subdomain, and a bounce report sent there over SMTP to the inbound listener is
// recorded; its tracked links point at the tracking subdomain, and a request to one of them over HTTP,
// with that subdomain as Host, is recorded as a click. Also what is refused, and changing the subdomain.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { Resend } from 'resend';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { startInboundServer, type InboundServer } from '../src/inbound/inbound-server.ts';
import { returnPathAddress } from '../src/delivery/return-path.ts';
import { trustDomain, type DomainView } from '../src/domains/domains.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { startDnsServer, type DnsServer, type Zone } from './helpers/dns-server.ts';
import { send } from './helpers/emails.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { responseProblems, webhookProblems } from './helpers/resend-openapi.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { deliveryStatusReport, failedRecipient } from './helpers/delivery-reports.ts';
import { waitFor } from './helpers/wait.ts';

/** Where the inbound listener is reached (MAILROOM_HELO_NAME) and the public URL's host. */
const INBOUND_HOST = 'mx.mailroom.test';
const PUBLIC_HOST = 'mail.mailroom.test';
const SERVER_RETURN_PATH_DOMAIN = 'bounces.mailroom.test';

let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;
let dns: DnsServer;
const zone: Zone = new Map();
let delivery: TestDelivery;
let inbound: InboundServer;
let base: string;
let resend: Resend;
const quiet = { error: () => {}, warn: () => {}, info: () => {} };

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  dns = await startDnsServer(zone);
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_DNS_TIMEOUT_MS: '2000',
    MAILROOM_HELO_NAME: INBOUND_HOST,
    MAILROOM_PUBLIC_URL: `https://${PUBLIC_HOST}:8443/`,
    MAILROOM_RETURN_PATH_DOMAIN: SERVER_RETURN_PATH_DOMAIN,
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  org = await createTestOrganization(t.db, t.config, 'subdomains');
  await observeWebhookEvents(t.app, org);
  delivery = await startTestDelivery(t);
  inbound = await startInboundServer({ db: t.db, signer: t.app.signer, host: '127.0.0.1', port: 0, log: quiet });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  resend = new Resend(org.fullKey, { baseUrl: base });
});
after(async () => {
  await inbound?.close();
  await delivery?.stop();
  await t?.close();
  await sink?.close();
  await dns?.close();
});

let sequence = 0;
const uniqueName = (label: string) => `${label}-${++sequence}-${process.pid}.subdomains.example`;

async function api(method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) {
  return t.app.inject({ method, url, headers: bearer(org.fullKey), ...(payload && { payload }) });
}

async function getDomain(id: string): Promise<DomainView> {
  const res = await api('GET', `/domains/${id}`);
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(responseProblems('GET', `/domains/${id}`, 200, res.json()), [], "Resend's Domain shape");
  return res.json();
}

/** A domain added through Resend's SDK with both options (and tracking on), verified by the operator. */
/**
 * A domain with a return path (send.) and a tracking name (links.), trusted; with `published`, its MX and
 * CNAME are in DNS and checked, so delivery uses them (until then it uses the server-wide ones).
 */
async function brandedDomain(label: string, published = true): Promise<DomainView> {
  const { data, error } = await resend.domains.create({
    name: uniqueName(label),
    customReturnPath: 'send',
    trackingSubdomain: 'links',
    openTracking: true,
    clickTracking: true,
  });
  assert.equal(error, null, JSON.stringify(error));
  await trustDomain(t.db, t.config, org.id, data!.id);
  if (published) {
    const name = data!.name;
    zone.set(`send.${name}`, { mx: [{ priority: 10, exchange: INBOUND_HOST }], txt: [['v=spf1 mx -all']] });
    zone.set(`links.${name}`, { cname: PUBLIC_HOST });
    const checked = await api('POST', `/domains/${data!.id}/verify`);
    assert.equal(checked.statusCode, 200, checked.body);
  }
  return getDomain(data!.id);
}

type Event = { type: string; recipient?: string; data?: Record<string, unknown> };
const timeline = async (id: string): Promise<Event[]> => (await api('GET', `/emails/${id}/events`)).json().data;

/** Sends from the domain and waits until the relay has the copy; answers the id and the transaction. */
async function deliver(from: string, to: string, html: string) {
  const res = await send(t.app, org.fullKey, { from, to, subject: 'Hi', html });
  assert.equal(res.statusCode, 200, res.body);
  const id = res.json().id as string;
  await waitFor(async () => (await timeline(id)).some((e) => e.type === 'delivered'), 10_000);
  const transaction = sink.transactions.find((tx) => tx.rcptTo.includes(to));
  assert.ok(transaction, `the relay received the copy to ${to}`);
  return { id, transaction };
}

/** An HTTP request to the loopback API naming another host, as a proxy forwards it. */
function getWithHost(url: string, host: string): Promise<{ status: number; location?: string }> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: url, headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, location: res.headers.location }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('records', () => {
  test('a return path and a tracking subdomain add their MX, SPF and CNAME records, in Resend shapes', async () => {
    const domain = await brandedDomain('records', false);
    const name = domain.name;
    assert.equal(domain.tracking_subdomain, 'links');
    assert.deepEqual(
      domain.records.map(({ record, type, name, value, priority, status }) => ({
        record,
        type,
        name,
        value: record === 'DKIM' ? 'key' : value,
        priority,
        status,
      })),
      [
        {
          record: 'DKIM',
          type: 'TXT',
          name: `mailroom._domainkey.${name}`,
          value: 'key',
          priority: undefined,
          status: 'not_started',
        },
        { record: 'SPF', type: 'MX', name: `send.${name}`, value: INBOUND_HOST, priority: 10, status: 'not_started' },
        {
          record: 'SPF',
          type: 'TXT',
          name: `send.${name}`,
          value: 'v=spf1 a mx ~all',
          priority: undefined,
          status: 'not_started',
        },
        {
          record: 'Tracking',
          type: 'CNAME',
          name: `links.${name}`,
          value: PUBLIC_HOST,
          priority: undefined,
          status: 'not_started',
        },
      ],
    );
    assert.deepEqual(
      domain.additional_records.map((r) => [r.record, r.type, r.name]),
      [['DMARC', 'TXT', `_dmarc.${name}`]],
    );
    assert.ok(
      domain.records.every((r) => !r.required || r.record === 'DKIM'),
      'only DKIM decides verification',
    );

    // The SDK reads them as Resend's (its GET answers the same records).
    const { data } = await resend.domains.get(domain.id);
    assert.deepEqual(data?.records, domain.records);
    assert.equal(data?.tracking_subdomain, 'links');

    // domain.created (Resend's DomainEventData) names the SPF record where it is: at the return path.
    const [event] = await queuedEvents(t.db, org.id, 'domain.created', { id: domain.id });
    assert.deepEqual(webhookProblems(event as never), []);
    const spf = (event!.data.records as Array<{ record: string; name: string }>).find((r) => r.record === 'SPF');
    assert.equal(spf?.name, `send.${name}`);
  });

  test('without the options a domain keeps the server-wide records: SPF at the domain, no MX or CNAME', async () => {
    const res = await api('POST', '/domains', { name: uniqueName('plain') });
    assert.equal(res.statusCode, 201, res.body);
    const domain: DomainView = res.json();
    assert.deepEqual(
      domain.records.map((r) => [r.record, r.type, r.name]),
      [
        ['DKIM', 'TXT', `mailroom._domainkey.${domain.name}`],
        ['SPF', 'TXT', domain.name],
      ],
    );
    assert.equal('tracking_subdomain' in domain, false);
  });

  test('verification looks the MX, SPF and CNAME up; they are optional, DKIM alone verifies', async () => {
    const res = await api('POST', '/domains', {
      name: uniqueName('verify'),
      custom_return_path: 'bounce-here',
      tracking_subdomain: 'click',
    });
    assert.equal(res.statusCode, 201, res.body);
    const added: DomainView = res.json();
    const name = added.name;
    const dkim = added.records.find((r) => r.record === 'DKIM')!;
    zone.set(dkim.name, { txt: [[dkim.value.slice(0, 255), dkim.value.slice(255)]] });
    zone.set(`bounce-here.${name}`, { mx: [{ priority: 10, exchange: INBOUND_HOST }], txt: [['v=spf1 mx -all']] });
    zone.set(`click.${name}`, { cname: `${PUBLIC_HOST}` });

    const verified = await api('POST', `/domains/${added.id}/verify`);
    assert.equal(verified.statusCode, 200, verified.body);
    const checked: DomainView = verified.json();
    assert.equal(checked.status, 'verified');
    const statuses = (domain: DomainView) =>
      [...domain.records, ...domain.additional_records].map((r) => `${r.record} ${r.type} ${r.status}`);
    assert.deepEqual(statuses(checked), [
      'DKIM TXT verified',
      'SPF MX verified',
      'SPF TXT verified',
      'Tracking CNAME verified',
      'DMARC TXT failed',
    ]);

    // An MX elsewhere and a CNAME to another host are not Mailroom's: failed, the domain stays verified.
    zone.set(`bounce-here.${name}`, {
      mx: [{ priority: 10, exchange: 'mx.elsewhere.example' }],
      txt: [['v=spf1 mx -all']],
    });
    zone.set(`click.${name}`, { cname: 'links.elsewhere.example' });
    const again: DomainView = (await api('POST', `/domains/${added.id}/verify`)).json();
    assert.equal(again.status, 'verified');
    assert.deepEqual(statuses(again).slice(1, 4), ['SPF MX failed', 'SPF TXT verified', 'Tracking CNAME failed']);
  });
});

describe('delivery', () => {
  test("copies leave from the domain's return path, and a bounce sent there is recorded", async () => {
    const domain = await brandedDomain('bounce');
    const from = `hello@${domain.name}`;
    const gone = `gone-${process.pid}@example.com`;
    const { id, transaction } = await deliver(from, gone, '<p>Hello</p>');
    const expected = returnPathAddress({ signer: t.app.signer, domain: `send.${domain.name}` }, id, gone);
    assert.equal(transaction.mailFrom, expected);
    assert.match(
      transaction.mailFrom,
      new RegExp(`^bounce-[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{14}@send\\.${domain.name.replaceAll('.', '\\.')}$`),
    );

    // The report comes back over SMTP to that address at the inbound listener.
    const client = nodemailerTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
    try {
      const info = await client.sendMail({
        envelope: { from: '', to: [transaction.mailFrom] },
        raw: deliveryStatusReport(transaction.mailFrom, [failedRecipient(gone)], { from, to: gone }),
      });
      assert.match(info.response, /^250 /);
    } finally {
      client.close();
    }
    const bounced = (await timeline(id)).filter((e) => e.type === 'bounced');
    assert.deepEqual(
      bounced.map((e) => [e.recipient, (e.data?.bounce as { type?: string })?.type]),
      [[gone, 'hard']],
    );
  });

  test('until DNS answers for them, a domain sends with the server-wide return path and tracking links', async () => {
    const domain = await brandedDomain('unpublished', false);
    const reader = `early-${process.pid}@example.com`;
    const html = '<html><body><a href="https://shop.example/sale">Sale</a></body></html>';
    const { id, transaction } = await deliver(`news@${domain.name}`, reader, html);
    assert.equal(
      transaction.mailFrom,
      returnPathAddress({ signer: t.app.signer, domain: SERVER_RETURN_PATH_DOMAIN }, id, reader),
      'no MX at send. yet: bounces would have nowhere to go',
    );
    const received = String((await transaction.parse()).html);
    assert.ok(received.includes(`https://${PUBLIC_HOST}:8443/t/`), received);
    assert.ok(!received.includes(`links.${domain.name}`), 'no CNAME at links. yet: the links would be dead');
  });

  test("a domain without one keeps the server's return-path domain", async () => {
    const to = `plain-${process.pid}@example.com`;
    const { id, transaction } = await deliver(`hello@${org.domain}`, to, '<p>Hello</p>');
    assert.equal(
      transaction.mailFrom,
      returnPathAddress({ signer: t.app.signer, domain: SERVER_RETURN_PATH_DOMAIN }, id, to),
    );
  });

  test('tracked links and the open pixel use the tracking subdomain, which answers on its own Host', async () => {
    const domain = await brandedDomain('links');
    const reader = `reader-${process.pid}@example.com`;
    const html = '<html><body><a href="https://shop.example/sale">Sale</a></body></html>';
    const { id, transaction } = await deliver(`news@${domain.name}`, reader, html);
    const received = String((await transaction.parse()).html);
    const trackingBase = `https://links.${domain.name}:8443/t/`;
    const click = /href="([^"]+)"/.exec(received)?.[1];
    const pixel = /<img src="([^"]+)"/.exec(received)?.[1];
    assert.ok(click?.startsWith(`${trackingBase}c/`), `click link at the tracking subdomain: ${click}`);
    assert.ok(pixel?.startsWith(`${trackingBase}o/`), `open pixel at the tracking subdomain: ${pixel}`);

    // The proxy for links.<domain> forwards to Mailroom with the subdomain as Host.
    const link = new URL(click!);
    const answer = await getWithHost(link.pathname, link.host);
    assert.deepEqual(answer, { status: 302, location: 'https://shop.example/sale' });
    await waitFor(async () => (await timeline(id)).some((e) => e.type === 'clicked'));
    const opened = await getWithHost(new URL(pixel!).pathname, link.host);
    assert.equal(opened.status, 200);
    await waitFor(async () => (await timeline(id)).some((e) => e.type === 'opened'));
  });
});

describe('changes and refusals', () => {
  test('PATCH sets, changes and removes the tracking subdomain; its CNAME follows', async () => {
    const domain = await brandedDomain('patch');
    await t.db.query(`UPDATE domains SET record_status = '{"Tracking":"verified","DKIM":"verified"}' WHERE id = $1`, [
      domain.id,
    ]);

    const { error } = await resend.domains.update({ id: domain.id, trackingSubdomain: 'track' });
    assert.equal(error, null, JSON.stringify(error));
    const changed = await getDomain(domain.id);
    assert.equal(changed.tracking_subdomain, 'track');
    const tracking = changed.records.find((r) => r.record === 'Tracking')!;
    assert.deepEqual([tracking.name, tracking.status], [`track.${domain.name}`, 'not_started']);
    assert.equal(changed.records.find((r) => r.record === 'DKIM')!.status, 'verified', 'other statuses kept');

    const removed = await api('PATCH', `/domains/${domain.id}`, { tracking_subdomain: null });
    assert.equal(removed.statusCode, 200, removed.body);
    const plain = await getDomain(domain.id);
    assert.equal('tracking_subdomain' in plain, false);
    assert.equal(
      plain.records.some((r) => r.record === 'Tracking'),
      false,
    );
    // The return path never changes.
    assert.equal(plain.records.find((r) => r.type === 'MX')!.name, `send.${domain.name}`);
  });

  test('bad labels are 400 validation_error naming the field; nothing is added or changed', async () => {
    const domain = await brandedDomain('refusals');
    const refusedOnAdd: Array<[object, string]> = [
      [{ custom_return_path: '' }, 'custom_return_path'],
      [{ custom_return_path: 'Send' }, 'custom_return_path'],
      [{ custom_return_path: 'send.mail' }, 'custom_return_path'],
      [{ custom_return_path: 'send_' }, 'custom_return_path'],
      [{ custom_return_path: `${'a'.repeat(64)}` }, 'custom_return_path'],
      [{ tracking_subdomain: 'links-' }, 'tracking_subdomain'],
      [{ tracking_subdomain: 'links.example.com' }, 'tracking_subdomain'],
      [{ custom_return_path: 'same', tracking_subdomain: 'same' }, 'tracking_subdomain'],
    ];
    for (const [options, field] of refusedOnAdd) {
      const res = await api('POST', '/domains', { name: uniqueName('refused'), ...options });
      assert.equal(res.statusCode, 400, `${JSON.stringify(options)}: ${res.body}`);
      assert.deepEqual(
        [res.json().statusCode, res.json().name, res.json().field],
        [400, 'validation_error', field],
        JSON.stringify(options),
      );
    }
    const { rows } = await t.db.query(`SELECT 1 FROM domains WHERE name LIKE 'refused-%'`);
    assert.equal(rows.length, 0);

    const refusedOnPatch: Array<[object, string | undefined]> = [
      [{ tracking_subdomain: 'Links' }, 'tracking_subdomain'],
      [{ tracking_subdomain: 'send' }, 'tracking_subdomain'], // the return path's name
      [{ custom_return_path: 'other' }, undefined], // set only when the domain is added, as in Resend
    ];
    for (const [options, field] of refusedOnPatch) {
      const res = await api('PATCH', `/domains/${domain.id}`, options);
      assert.equal(res.statusCode, 400, `${JSON.stringify(options)}: ${res.body}`);
      assert.equal(res.json().name, 'validation_error');
      if (field) assert.equal(res.json().field, field);
    }
    assert.equal((await getDomain(domain.id)).tracking_subdomain, 'links', 'unchanged');
  });
});
