// GET /emails/metrics through the unmodified Resend SDK against a listening app: outcomes produced by the
// real delivery path (a loopback SMTP relay that refuses some recipients, a complaint sent back over SMTP
// to the inbound listener, the suppression list, a tracking pixel fetched over HTTP), counted in total,
// per sending domain, per message and per period in several time zones; every answer checked against
// Resend's OpenAPI schema; bad parameters refused with 400. Resend's test addresses sit beside the real
// recipients and count nowhere: not in the metrics, the overview or the doctor's complaint rate, though
// the email list and the timeline show them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { freePort } from './helpers/server-process.ts';
import { waitFor } from './helpers/wait.ts';
import { responseProblems } from './helpers/resend-openapi.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { feedbackReport } from './helpers/delivery-reports.ts';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { startInboundServer, type InboundServer } from '../src/inbound/inbound-server.ts';
import { addDomain, trustDomain } from '../src/domains/domains.ts';
import { metricsRequest } from '../src/emails/metrics-request.ts';
import { readEmailMetrics } from '../src/emails/metrics.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let sink: SmtpSink;
let inbound: InboundServer;
let dns: DnsServer;
let delivery: TestDelivery;
let resend: Resend;
let base: string;
let mainDomainId: string;
let secondDomain: { id: string; name: string };
/** Delivered today: the outcomes of the default range. */
let today: string;
/** Moved to 2025-03-01T23:30Z (a Saturday) and 2025-03-03T00:30Z (a Monday): the period tests. */
let saturday: string;
let monday: string;

type MetricsAnswer = NonNullable<Awaited<ReturnType<Resend['emails']['metrics']>>['data']>;

/** The SDK's call, with its answer checked against Resend's schema for it. */
async function metrics(options: Parameters<Resend['emails']['metrics']>[0] = {}): Promise<MetricsAnswer> {
  const { data, error } = await resend.emails.metrics(options);
  assert.equal(error, null, JSON.stringify(error));
  assert.deepEqual(responseProblems('GET', '/emails/metrics', 200, data), []);
  return data!;
}

async function refused(options: Parameters<Resend['emails']['metrics']>[0], field: string, message: RegExp) {
  const { data, error } = await resend.emails.metrics(options);
  assert.equal(data, null, `refused: ${JSON.stringify(options)}`);
  assert.equal(error?.statusCode, 400, JSON.stringify(error));
  assert.equal(error?.name, 'validation_error');
  assert.match(error!.message, message);
  return { error, field };
}

async function sendAndWait(client: Resend, from: string, to: string[], html = '<p>Hello</p>'): Promise<string> {
  const { data, error } = await client.emails.send({ from, to, subject: 'Metrics', html, text: 'Hello' });
  assert.equal(error, null, JSON.stringify(error));
  const id = data!.id;
  await waitFor(async () => {
    const { rows } = await t.db.query<{ status: string }>('SELECT status FROM emails WHERE id = $1', [id]);
    return rows[0]?.status === 'sent';
  }, 10_000);
  return id;
}

/** Every timeline entry of a message, moved to one instant. */
async function moveTimeline(emailId: string, at: string): Promise<void> {
  await t.db.query('UPDATE email_events SET created_at = $2 WHERE email_id = $1', [emailId, at]);
}

/** A spam complaint (RFC 5965) about the copy sent to `recipient`, sent to its return path on the inbound listener. */
async function complain(emailId: string, recipient: string): Promise<void> {
  const copy = sink.transactions.find((tx) => tx.rcptTo.includes(recipient))!;
  const report = feedbackReport(copy.mailFrom, ['Feedback-Type: abuse', 'Version: 1'], {
    from: `hello@${org.domain}`,
    to: recipient,
  });
  const client = nodemailerTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
  try {
    await client.sendMail({ envelope: { from: '', to: [copy.mailFrom] }, raw: report });
  } finally {
    client.close();
  }
  await waitFor(async () => {
    const { rowCount } = await t.db.query(
      `SELECT 1 FROM email_events WHERE email_id = $1 AND recipient = $2 AND type = 'complained'`,
      [emailId, recipient],
    );
    return rowCount === 1;
  }, 10_000);
}

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  // An empty zone: the doctor's DNS look-ups find nothing, at once, without leaving the machine.
  dns = await startDnsServer();
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_PUBLIC_URL: base,
    MAILROOM_RETURN_PATH_DOMAIN: 'bounces.metrics.test',
    MAILROOM_DNS_SERVERS: dns.address,
  });
  await t.app.listen({ port, host: '127.0.0.1' });
  inbound = await startInboundServer({
    db: t.db,
    signer: t.app.signer,
    host: '127.0.0.1',
    port: 0,
    log: { error: () => {}, warn: () => {}, info: () => {} },
  });
  org = await createTestOrganization(t.db, t.config, 'metrics');
  other = await createTestOrganization(t.db, t.config, 'elsewhere');
  delivery = await startTestDelivery(t);
  resend = new Resend(org.fullKey, { baseUrl: base });

  const { rows } = await t.db.query<{ id: string }>('SELECT id FROM domains WHERE name = $1', [org.domain]);
  mainDomainId = rows[0]!.id;
  const added = await addDomain(t.db, t.config, org.id, `news.${org.domain}`);
  await trustDomain(t.db, t.config, org.id, added.id);
  secondDomain = { id: added.id, name: added.name };

  const tracking = await t.app.inject({
    method: 'PATCH',
    url: '/organization',
    headers: bearer(org.fullKey),
    payload: { open_tracking: true, click_tracking: true },
  });
  assert.equal(tracking.statusCode, 200, tracking.body);

  // Today, from the main domain: every kind of outcome once, and Resend's test addresses beside them,
  // whose simulated outcomes count nowhere.
  sink.replyToRecipient('blocked@example.com', { code: 550, message: '5.7.1 Message rejected as spam' });
  sink.replyToRecipient('nobody@example.com', { code: 550, message: '5.1.1 No such user' });
  sink.replyToRecipient('gone@example.com', { code: 550, message: '5.1.1 No such user' });
  const suppressed = await t.app.inject({
    method: 'POST',
    url: '/suppressions',
    headers: bearer(org.fullKey),
    payload: { email: 'kept-out@example.com' },
  });
  assert.ok(suppressed.statusCode < 300, suppressed.body);
  const links = '<p><a href="https://shop.example.com/a">A</a> <a href="https://shop.example.com/b">B</a></p>';
  today = await sendAndWait(
    resend,
    `Acme <hello@${org.domain}>`,
    [
      'delivered@resend.dev',
      'bounced@resend.dev',
      'complained@resend.dev',
      'alice@example.com',
      'blocked@example.com',
      'kept-out@example.com',
      'dave@example.com',
      'nobody@example.com',
      'erin@example.com',
    ],
    links,
  );
  await complain(today, 'erin@example.com');
  // Alice opens it (her copy's pixel, fetched over HTTP) and clicks both links, one of them twice.
  const copy = sink.transactions.find((tx) => tx.rcptTo.includes('alice@example.com'))!;
  const html = String((await copy.parse()).html);
  const pixel = /<img src="([^"]+\/t\/o\/[^"]+)"/.exec(html)?.[1];
  const tracked = [...html.matchAll(/<a href="([^"]+\/t\/c\/[^"]+)"/g)].map((match) => match[1]!);
  assert.ok(pixel && tracked.length === 2, html);
  assert.equal((await fetch(pixel)).status, 200);
  for (const link of [...tracked, tracked[0]!]) assert.equal((await fetch(link, { redirect: 'manual' })).status, 302);

  // Another organization's mail never counts here.
  await sendAndWait(new Resend(other.fullKey, { baseUrl: base }), `x@${other.domain}`, [
    'xavier@example.com',
    'gone@example.com',
    'complained@resend.dev',
    'bounced+other@resend.dev',
  ]);

  // Two messages moved to known instants of March 2025.
  saturday = await sendAndWait(resend, `news@${secondDomain.name}`, [
    'delivered+two@resend.dev',
    'bob@example.com',
    'dan@example.com',
  ]);
  monday = await sendAndWait(resend, `hello@${org.domain}`, ['carol@example.com', 'gone@example.com']);
  await moveTimeline(saturday, '2025-03-01T23:30:00Z');
  await moveTimeline(monday, '2025-03-03T00:30:00Z');
});
after(async () => {
  await delivery?.stop();
  await inbound?.close();
  await t?.close();
  await sink?.close();
  await dns?.close();
});

describe('totals', () => {
  test('with no parameters: every metric of the last 6 days, counted per recipient, with their rates', async () => {
    const answer = await metrics();
    assert.equal(answer.object, 'metrics');
    assert.deepEqual(answer.dimensions, []);
    assert.equal(answer.granularity, 'daily');
    assert.equal('data' in answer, false, 'no data without dimensions');
    const end = Date.parse(answer.end_date);
    assert.ok(Math.abs(Date.now() - end) < 60_000, 'ends now');
    assert.equal(Date.parse(answer.start_date), end - 6 * 86_400_000, 'starts 6 days before');
    // Not recorded per message: left out rather than guessed.
    for (const missing of ['received', 'unsubscribed', 'unsubscribe_rate'] as const) {
      assert.equal(answer.metrics.includes(missing), false);
      assert.equal(missing in answer.totals, false);
    }
    assert.deepEqual(answer.totals, {
      delivered: 3, // alice, dave, erin (delivered, then the complaint); not delivered@ or complained@
      complained: 1,
      suppressed: 1, // kept-out@, never sent to
      bounced: 1,
      bounced_transient: 0,
      bounced_permanent: 1,
      bounced_undetermined: 0,
      opened: 1,
      clicked: 2, // two links; the second click of the first is not a new click
      delivery_delayed: 0,
      failed: 1, // blocked@, refused for a reason that is not the recipient's
      sent: 5, // tried: 3 delivered, 1 bounced (nobody@, not bounced@), 1 refused
      unique_opened: 1,
      unique_clicked: 1, // one recipient clicked
      delivery_rate: 60,
      open_rate: 33.3333,
      click_rate: 33.3333,
      bounce_rate: 20,
      complaint_rate: 33.3333,
    });
    assert.deepEqual(Object.keys(answer.totals), answer.metrics, 'the metrics, in the order listed');
  });

  test('only the metrics asked for, in the order asked; the other organization sees only its own', async () => {
    const answer = await metrics({ metrics: ['complaint_rate', 'sent', 'received', 'delivered'] });
    assert.deepEqual(answer.metrics, ['complaint_rate', 'sent', 'delivered']);
    assert.deepEqual(answer.totals, { complaint_rate: 33.3333, sent: 5, delivered: 3 });
    const unrecorded = await metrics({ metrics: ['received'], dimensions: ['domain'] });
    assert.deepEqual([unrecorded.metrics, unrecorded.totals], [[], {}]);
    assert.deepEqual(unrecorded.data, [{ domain_id: mainDomainId, domain_name: org.domain }]);

    const theirs = new Resend(other.fullKey, { baseUrl: base });
    const { data } = await theirs.emails.metrics({ metrics: ['sent', 'delivered', 'bounced'] });
    assert.deepEqual(data!.totals, { sent: 2, delivered: 1, bounced: 1 });
    // Another organization's domain filters out everything, it does not reveal anything.
    const { rows } = await t.db.query<{ id: string }>('SELECT id FROM domains WHERE name = $1', [other.domain]);
    assert.deepEqual((await metrics({ domainId: [rows[0]!.id], metrics: ['sent'] })).totals, { sent: 0 });
  });

  test('/emails/metrics is not read as the message with id "metrics"; a sending key may not read it', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/emails/metrics', headers: bearer(org.fullKey) });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().object, 'metrics');
    const sender = new Resend(org.sendingKey, { baseUrl: base });
    const { error } = await sender.emails.metrics();
    assert.equal(error?.name, 'restricted_api_key');
  });

  test('the default range ends at the injected clock; an end in the future is taken as now', async () => {
    const now = new Date('2025-03-04T12:00:00Z');
    const request = metricsRequest({ metrics: 'sent,delivered' }, now);
    assert.equal(request.end.toISOString(), '2025-03-04T12:00:00.000Z');
    assert.equal(request.start.toISOString(), '2025-02-26T12:00:00.000Z');
    const answer = await readEmailMetrics(t.db, org.id, request);
    assert.deepEqual(answer.totals, { sent: 4, delivered: 3 }); // the two March messages
    const future = metricsRequest({ start_date: '2025-03-01', end_date: '2031-01-01' }, now);
    assert.equal(future.end.toISOString(), now.toISOString());
  });
});

describe("Resend's test addresses", () => {
  const KINDS = ['delivered', 'bounced', 'complained', 'failed', 'opened', 'clicked'] as const;
  async function overviewTotals(token: string): Promise<Record<string, number>> {
    const res = await t.app.inject({ method: 'GET', url: '/overview', headers: bearer(token) });
    assert.equal(res.statusCode, 200, res.body);
    const daily = res.json().daily as Array<Record<string, number>>;
    return Object.fromEntries(KINDS.map((kind) => [kind, daily.reduce((sum, day) => sum + day[kind]!, 0)]));
  }
  async function complaintFinding(token: string, domainId: string) {
    const res = await t.app.inject({ method: 'POST', url: `/domains/${domainId}/check`, headers: bearer(token) });
    assert.equal(res.statusCode, 200, res.body);
    return (res.json().findings as Array<{ check: string; status: string; summary: string }>).find(
      (finding) => finding.check === 'complaint_rate',
    )!;
  }

  test('the overview counts the real outcomes only (counted when recorded: the March messages too)', async () => {
    assert.deepEqual(await overviewTotals(org.fullKey), {
      delivered: 6, // alice, dave, erin today; bob and dan on Saturday; carol on Monday
      bounced: 2, // nobody@, gone@
      complained: 1, // erin
      failed: 2, // blocked@ (refused), kept-out@ (suppressed)
      opened: 1,
      clicked: 2, // alice, once per link
    });
    assert.deepEqual(await overviewTotals(other.fullKey), {
      delivered: 1,
      bounced: 1,
      complained: 0,
      failed: 0,
      opened: 0,
      clicked: 0,
    });
  });

  test("the doctor's complaint rate counts real complaints only: a complaint of complained@ passes", async () => {
    const { rows } = await t.db.query<{ id: string }>('SELECT id FROM domains WHERE name = $1', [other.domain]);
    const theirs = await complaintFinding(other.fullKey, rows[0]!.id);
    assert.equal(theirs.status, 'pass', theirs.summary);
    assert.equal(theirs.summary, 'complaint rate 0.00% (0 complaints of 1 delivered, 30 days)');
    const ours = await complaintFinding(org.fullKey, mainDomainId);
    assert.equal(ours.status, 'fail');
    assert.match(ours.summary, /^complaint rate 16\.67% \(1 complaints of 6 delivered, 30 days\)/);
  });

  test('the email list and the timeline still show them, with their outcomes', async () => {
    const list = await t.app.inject({ method: 'GET', url: '/emails', headers: bearer(org.fullKey) });
    assert.equal(list.statusCode, 200, list.body);
    const listed = (list.json().data as Array<{ id: string; to: string[] }>).find((email) => email.id === today);
    assert.ok(listed?.to.includes('complained@resend.dev'), list.body);

    const res = await t.app.inject({ method: 'GET', url: `/emails/${today}/events`, headers: bearer(org.fullKey) });
    assert.equal(res.statusCode, 200, res.body);
    const events = res.json().data as Array<{ type: string; recipient?: string }>;
    const of = (recipient: string) => events.filter((e) => e.recipient === recipient).map((e) => e.type);
    assert.deepEqual(of('delivered@resend.dev'), ['delivered']);
    assert.deepEqual(of('bounced@resend.dev'), ['bounced']);
    assert.deepEqual(of('complained@resend.dev'), ['delivered', 'complained']);
    assert.deepEqual(of('erin@example.com'), ['delivered', 'complained']);
  });
});

describe('breakdowns', () => {
  const march = { startDate: '2025-03-01', endDate: '2025-03-04' } as const;

  test('by domain: one row per sending domain with mail in the range, by name; domain_id filters', async () => {
    const answer = await metrics({ ...march, dimensions: ['domain'], metrics: ['sent', 'delivered', 'bounce_rate'] });
    assert.deepEqual(answer.data, [
      { domain_id: mainDomainId, domain_name: org.domain, sent: 2, delivered: 1, bounce_rate: 50 },
      { domain_id: secondDomain.id, domain_name: secondDomain.name, sent: 2, delivered: 2, bounce_rate: 0 },
    ]);
    assert.deepEqual(answer.totals, { sent: 4, delivered: 3, bounce_rate: 25 });

    const only = await metrics({ ...march, domainId: [secondDomain.id], metrics: ['sent', 'delivered'] });
    assert.deepEqual(only.totals, { sent: 2, delivered: 2 });
  });

  test('by message, and filtered to messages (comma-separated or repeated)', async () => {
    const answer = await metrics({ ...march, dimensions: ['email'], emailId: [monday], metrics: ['sent', 'bounced'] });
    assert.deepEqual(answer.data, [{ email_id: monday, sent: 2, bounced: 1 }]);
    const recent = await metrics({ dimensions: ['email'], metrics: ['sent', 'delivered'] });
    assert.deepEqual(recent.data, [{ email_id: today, sent: 5, delivered: 3 }]);

    const query = `start_date=2025-03-01&end_date=2025-03-04&metrics=sent&metrics=delivered,bounced&email_id=${saturday}&email_id=${monday}`;
    const res = await t.app.inject({ method: 'GET', url: `/emails/metrics?${query}`, headers: bearer(org.fullKey) });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json().totals, { sent: 4, delivered: 3, bounced: 1 });
  });

  test('daily in UTC: every day of the range, empty ones too', async () => {
    const answer = await metrics({ ...march, dimensions: ['period'], metrics: ['sent', 'delivered', 'bounced'] });
    assert.deepEqual(answer.start_date, '2025-03-01T00:00:00.000Z');
    assert.deepEqual(answer.end_date, '2025-03-04T00:00:00.000Z');
    assert.deepEqual(answer.data, [
      { period: '2025-03-01T00:00:00.000Z', sent: 2, delivered: 2, bounced: 0 },
      { period: '2025-03-02T00:00:00.000Z', sent: 0, delivered: 0, bounced: 0 },
      { period: '2025-03-03T00:00:00.000Z', sent: 2, delivered: 1, bounced: 1 },
    ]);
  });

  test('daily in New York: dates and days are New York’s', async () => {
    const answer = await metrics({
      ...march,
      timezone: 'America/New_York',
      dimensions: ['period'],
      metrics: ['sent'],
    });
    assert.equal(answer.start_date, '2025-03-01T05:00:00.000Z');
    // 23:30Z on the 1st is 18:30 that day in New York; 00:30Z on the 3rd is 19:30 on the 2nd.
    assert.deepEqual(answer.data, [
      { period: '2025-03-01T05:00:00.000Z', sent: 2 },
      { period: '2025-03-02T05:00:00.000Z', sent: 2 },
      { period: '2025-03-03T05:00:00.000Z', sent: 0 },
    ]);
  });

  test('weekly weeks start on Monday; monthly holds the month; by period and domain together', async () => {
    const weekly = await metrics({ ...march, dimensions: ['period'], granularity: 'weekly', metrics: ['sent'] });
    assert.deepEqual(weekly.data, [
      { period: '2025-02-24T00:00:00.000Z', sent: 2 },
      { period: '2025-03-03T00:00:00.000Z', sent: 2 },
    ]);
    const monthly = await metrics({ ...march, dimensions: ['period'], granularity: 'monthly', metrics: ['sent'] });
    assert.deepEqual(monthly.data, [{ period: '2025-03-01T00:00:00.000Z', sent: 4 }]);

    const both = await metrics({
      ...march,
      dimensions: ['period', 'domain'],
      granularity: 'weekly',
      metrics: ['sent'],
    });
    assert.deepEqual(both.data, [
      { period: '2025-02-24T00:00:00.000Z', domain_id: mainDomainId, domain_name: org.domain, sent: 0 },
      { period: '2025-02-24T00:00:00.000Z', domain_id: secondDomain.id, domain_name: secondDomain.name, sent: 2 },
      { period: '2025-03-03T00:00:00.000Z', domain_id: mainDomainId, domain_name: org.domain, sent: 2 },
      { period: '2025-03-03T00:00:00.000Z', domain_id: secondDomain.id, domain_name: secondDomain.name, sent: 0 },
    ]);
  });

  test('hourly, also in a time zone half an hour off UTC; a date-time range is exact', async () => {
    const utc = await metrics({
      startDate: '2025-03-01T23:00:00Z',
      endDate: '2025-03-02T01:00:00Z',
      dimensions: ['period'],
      granularity: 'hourly',
      metrics: ['delivered'],
    });
    assert.deepEqual(utc.data, [
      { period: '2025-03-01T23:00:00.000Z', delivered: 2 },
      { period: '2025-03-02T00:00:00.000Z', delivered: 0 },
    ]);
    // Kolkata is UTC+05:30: its hours start at half past UTC's.
    const kolkata = await metrics({
      startDate: '2025-03-02T04:00:00',
      endDate: '2025-03-02T06:00:00',
      timezone: 'Asia/Kolkata',
      dimensions: ['period'],
      granularity: 'hourly',
      metrics: ['delivered'],
    });
    assert.deepEqual(kolkata.data, [
      { period: '2025-03-01T22:30:00.000Z', delivered: 0 },
      { period: '2025-03-01T23:30:00.000Z', delivered: 2 },
    ]);
    // The range is to the instant: from 23:31Z the Saturday message is out of it.
    const after = await metrics({
      startDate: '2025-03-01T23:31:00Z',
      endDate: '2025-03-02T00:00:00Z',
      metrics: ['sent'],
    });
    assert.deepEqual(after.totals, { sent: 0 });
  });
});

describe('refusals', () => {
  test('each bad parameter is a 400 validation_error that says what is wrong', async () => {
    await refused({ metrics: ['sent', 'nope' as 'sent'] }, 'metrics', /`nope` is not one of the metrics/);
    await refused({ dimensions: ['week' as 'period'] }, 'dimensions', /`week` is not one of the dimensions/);
    await refused({ broadcastId: ['not-a-broadcast'] }, 'broadcast_id', /`not-a-broadcast` is not an id/);
    await refused({ startDate: '2025-03-04', endDate: '2025-03-01' }, 'start_date', /is after end_date/);
    await refused({ startDate: 'soon' }, 'start_date', /not an ISO 8601 date/);
    await refused({ endDate: '2025-02-30' }, 'end_date', /not an ISO 8601 date/);
    await refused({ timezone: 'Mars/Olympus_Mons' }, 'timezone', /not an IANA time zone/);
    await refused(
      { startDate: '2023-01-01', endDate: '2025-01-01', granularity: 'hourly', dimensions: ['period'] },
      'start_date',
      /more than 10000 hourly periods/,
    );
    await refused({ domainId: ['example.test'] }, 'domain_id', /not an id/);
    await refused({ granularity: 'yearly' as 'daily' }, 'granularity', /granularity/);
    const tooMany = Array.from({ length: 101 }, () => crypto.randomUUID());
    await refused({ emailId: tooMany }, 'email_id', /At most 100 ids/);
  });

  test('an answer is bounded in rows as well as periods: a breakdown past the bound is refused, not built', async () => {
    const now = new Date('2025-03-04T12:00:00Z');
    // March's two messages, hourly over three days: 72 periods for each message.
    const request = metricsRequest(
      {
        start_date: '2025-03-01',
        end_date: '2025-03-04',
        granularity: 'hourly',
        dimensions: 'period,email',
        metrics: 'sent',
      },
      now,
    );
    const whole = await readEmailMetrics(t.db, org.id, request, 144);
    assert.equal(whole.data!.length, 144);
    await assert.rejects(readEmailMetrics(t.db, org.id, request, 143), (error: Error & { field?: string }) => {
      assert.equal(error.field, 'dimensions');
      assert.match(error.message, /more than 143 rows \(72 periods for each of 2 groups\)/);
      return true;
    });
    // Through the API, at the real bound: 9,528 hourly periods (397 days) for each of the two March messages.
    await refused(
      { startDate: '2024-02-01', endDate: '2025-03-04', granularity: 'hourly', dimensions: ['period', 'email'] },
      'dimensions',
      /more than 10000 rows \(9528 periods for each of 2 groups\)/,
    );
    // Without periods the rows are the messages themselves: the database stops at one past the bound.
    const byMessage = metricsRequest({ start_date: '2025-03-01', end_date: '2025-03-04', dimensions: 'email' }, now);
    assert.equal((await readEmailMetrics(t.db, org.id, byMessage, 2)).data!.length, 2);
    await assert.rejects(readEmailMetrics(t.db, org.id, byMessage, 1), /more than 1 rows: shorten the range/);
  });

  test('the field at fault is named in the envelope', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/emails/metrics?start_date=2025-03-04&end_date=2025-03-01',
      headers: bearer(org.fullKey),
    });
    assert.equal(res.statusCode, 400);
    assert.deepEqual(Object.keys(res.json()).sort(), ['field', 'message', 'name', 'statusCode']);
    assert.equal(res.json().field, 'start_date');
  });
});
