// Mailroom behind Debian's PgBouncer in transaction pooling mode (MAILROOM_DB_POOLER=transaction): a real
// server process whose every statement goes through PgBouncer sends, schedules, cancels, delivers, posts
// signed webhooks, receives and fans out a broadcast; once with a direct connection for LISTEN
// (MAILROOM_DB_LISTEN_URL), once finding work by polling alone. PgBouncer keeps fewer server connections
// than Mailroom's pool, so a statement or transaction often lands on a connection another one used: a
// named prepared statement or a session setting would not survive it. Without the setting, PgBouncer's
// refusal of the start-up parameters is one line naming it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTransport } from 'nodemailer';
import pg from 'pg';
import { loadConfig } from '../src/platform/config.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { createTestOrganization, type TestOrganization } from './helpers/app.ts';
import { runCli } from './helpers/cli.ts';
import { createPostgresDatabase, onPostgres } from './helpers/database.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { startPgBouncer, type PgBouncer } from './helpers/pgbouncer.ts';
import { freePort, startServerProcess, type ServerProcess } from './helpers/server-process.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

/** A loopback HTTP receiver of webhook deliveries, keeping each raw body with its headers. */
async function startWebhookReceiver() {
  const deliveries: Array<{ path: string; headers: IncomingHttpHeaders; body: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      deliveries.push({ path: req.url ?? '', headers: req.headers, body });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    deliveries,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Whether a delivery carries a Standard Webhooks signature made with `secret` over its raw body. */
function signedWith(secret: string, delivery: { headers: IncomingHttpHeaders; body: string }): boolean {
  const { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature } = delivery.headers;
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key)
    .update(`${String(id)}.${String(timestamp)}.${delivery.body}`)
    .digest('base64');
  return String(signature).split(' ').includes(`v1,${expected}`);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

// One database behind one PgBouncer for both runs; its schema and organization made through PgBouncer
// by the test's own pooled handle (migrations, advisory lock and all).
let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
let bouncer: PgBouncer;
let sink: SmtpSink;
let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
let dns: DnsServer;
let org: TestOrganization;

before(async () => {
  if (!onPostgres) return;
  database = await createPostgresDatabase();
  bouncer = await startPgBouncer(database.url);
  [sink, receiver, dns] = await Promise.all([
    startSmtpSink({ starttls: false }),
    startWebhookReceiver(),
    startDnsServer(), // every name NXDOMAIN, at once: the checks of received mail do not wait
  ]);
  const db = openPostgres(bouncer.url, 3, { pooler: 'transaction', statementTimeoutMs: 15_000, lockTimeoutMs: 5000 });
  try {
    await migrate(db, { log: () => {} });
    org = await createTestOrganization(
      db,
      loadConfig({ DATABASE_URL: bouncer.url, MAILROOM_DB_POOLER: 'transaction' }),
      'pooled',
    );
  } finally {
    await db.close();
  }
});

after(async () => {
  if (!onPostgres) return;
  // Whatever before() got to start, even if it failed half-way.
  await Promise.all([bouncer?.close(), sink?.close(), receiver?.close(), dns?.close()]);
  await database?.drop();
});

/** The whole lifecycle through PgBouncer; answers the send-to-delivery latencies measured. */
async function lifecycleThroughPgBouncer(withListenUrl: boolean): Promise<number[]> {
  const run = withListenUrl ? 'listen' : 'poll';
  const domain = org.domain;
  sink.reset();
  const direct = new pg.Client({ connectionString: database.url });
  await direct.connect();
  let server: ServerProcess | undefined;
  try {
    const inboundPort = await freePort();
    server = await startServerProcess({
      DATABASE_URL: bouncer.url,
      MAILROOM_DB_POOLER: 'transaction',
      ...(withListenUrl ? { MAILROOM_DB_LISTEN_URL: database.url } : {}),
      MAILROOM_DB_POOL_SIZE: '6',
      MAILROOM_TRANSPORT: 'smtp',
      MAILROOM_SMTP_URL: sink.url,
      MAILROOM_SMTP_TIMEOUT_MS: '5000',
      MAILROOM_DNS_SERVERS: dns.address,
      MAILROOM_DNS_TIMEOUT_MS: '1000',
      MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      MAILROOM_INBOUND_PORT: String(inboundPort),
    });
    const base = server.base;
    const api = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${base}${route}`, {
        method,
        headers: { authorization: `Bearer ${org.fullKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const json = (await res.json()) as Record<string, unknown>;
      assert.ok(res.status < 300, `${method} ${route}: ${res.status} ${JSON.stringify(json)}\n${server!.output()}`);
      return json;
    };
    const delivered = (subject: string) =>
      sink.transactions.filter((tx) => tx.raw.toString().includes(`Subject: ${run}-${subject}\r\n`)).length;

    // LISTEN goes past PgBouncer to PostgreSQL itself, or nowhere.
    const { rows } = await direct.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`,
    );
    if (withListenUrl) assert.ok(rows[0]!.n >= 1, 'a LISTEN connection to PostgreSQL itself');
    else assert.equal(rows[0]!.n, 0, 'no LISTEN without MAILROOM_DB_LISTEN_URL');

    const domains = (await api('GET', '/domains')) as { data: Array<{ id: string; name: string }> };
    const domainId = domains.data.find((d) => d.name === domain)!.id;
    await api('PATCH', `/domains/${domainId}`, { capabilities: { receiving: 'enabled' } });
    const hook = await api('POST', '/webhooks', {
      endpoint: `${receiver.url}/${run}`, // each run's endpoint a path of its own
      events: ['email.delivered', 'email.received'],
    });

    // Sends one at a time, each timed from its acceptance to its arrival at the relay.
    const latencies: number[] = [];
    let firstId = '';
    for (let n = 0; n < 5; n += 1) {
      const started = Date.now();
      const sent = await api('POST', '/emails', {
        from: `ops@${domain}`,
        to: 'a@example.com',
        subject: `${run}-now-${n}`,
        text: 'hi',
      });
      firstId ||= String(sent.id);
      await waitFor(() => delivered(`now-${n}`) === 1, 10_000, 2);
      latencies.push(Date.now() - started);
    }

    // A scheduled message goes at its time; another one, canceled, never does.
    const scheduled = await api('POST', '/emails', {
      from: `ops@${domain}`,
      to: 'b@example.com',
      subject: `${run}-scheduled`,
      text: 'later',
      scheduled_at: new Date(Date.now() + 1500).toISOString(),
    });
    const canceled = await api('POST', '/emails', {
      from: `ops@${domain}`,
      to: 'c@example.com',
      subject: `${run}-canceled`,
      text: 'never',
      scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    await api('POST', `/emails/${String(canceled.id)}/cancel`);
    assert.equal((await api('GET', `/emails/${String(canceled.id)}`)).last_event, 'canceled');
    await waitFor(() => delivered('scheduled') === 1, 10_000);
    await waitFor(async () => (await api('GET', `/emails/${String(scheduled.id)}`)).last_event === 'delivered', 5000);

    // Mail received at the MX listener is stored and announced.
    const mx = createTransport({ host: '127.0.0.1', port: inboundPort, secure: false, ignoreTLS: true });
    await mx.sendMail({
      from: 'someone@sender.example',
      to: `support@${domain}`,
      subject: `${run}-inbound`,
      text: 'hello',
    });
    mx.close();
    await waitFor(async () => {
      const list = (await api('GET', '/emails/receiving')) as { data: Array<{ subject: string }> };
      return list.data.some((message) => message.subject === `${run}-inbound`);
    }, 10_000);

    // A small broadcast fans out to its segment's contacts.
    const audience = await api('POST', '/audiences', { name: `Readers ${run}` });
    for (const email of [1, 2, 3].map((n) => `${run}-r${n}@example.com`))
      await api('POST', '/contacts', { email, audience_id: audience.id });
    await api('POST', '/broadcasts', {
      segment_id: audience.id,
      from: `news@${domain}`,
      subject: `${run}-broadcast`,
      html: '<p>News</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>',
      send: true,
    });
    await waitFor(() => delivered('broadcast') === 3, 15_000);

    // Signed webhooks for a delivery and for the received message.
    const ours = () => receiver.deliveries.filter((d) => d.path === `/hooks/${run}`);
    const events = () =>
      ours().map((d) => ({
        ...d,
        event: JSON.parse(d.body) as { type: string; data: { email_id?: string } },
      }));
    await waitFor(
      () =>
        events().some((d) => d.event.type === 'email.delivered' && d.event.data.email_id === firstId) &&
        events().some((d) => d.event.type === 'email.received'),
      10_000,
    );
    for (const delivery of ours()) assert.ok(signedWith(String(hook.signing_secret), delivery), delivery.body);

    await new Promise((resolve) => setTimeout(resolve, 300)); // a copy sent twice would have come by now
    assert.equal(delivered('canceled'), 0);
    assert.equal(sink.transactions.length, 5 + 1 + 3, 'each message delivered once');
    assert.doesNotMatch(server.output(), /prepared statement|"level":50/, 'no error logged');

    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, server.output());
    return latencies;
  } finally {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await direct.end();
  }
}

test('through PgBouncer with a direct connection for LISTEN: the whole lifecycle, woken at once', async (t) => {
  if (!onPostgres) return; // PgBouncer stands in front of PostgreSQL
  const latencies = await lifecycleThroughPgBouncer(true);
  t.diagnostic(`send to delivery, with LISTEN: ${latencies.join(', ')} ms`);
  assert.ok(median(latencies) < 1500, `median ${median(latencies)} ms`);
});

test('through PgBouncer without it: the whole lifecycle by polling, each message out within the poll interval', async (t) => {
  if (!onPostgres) return;
  const latencies = await lifecycleThroughPgBouncer(false);
  t.diagnostic(`send to delivery, polling only: ${latencies.join(', ')} ms`);
  // The delivery worker polls every 250 ms: a message waits for the next poll, then is delivered.
  assert.ok(median(latencies) < 1500, `median ${median(latencies)} ms`);
});

test('without MAILROOM_DB_POOLER, the refused start-up parameters are one line naming the setting', async () => {
  if (!onPostgres) return;
  const res = await runCli(['migrate'], { DATABASE_URL: bouncer.url });
  assert.equal(res.code, 1, res.stdout + res.stderr);
  const lines = res.stderr.trim().split('\n');
  assert.equal(lines.length, 1, res.stderr);
  assert.match(lines[0]!, /unsupported startup parameter: statement_timeout.*set MAILROOM_DB_POOLER=transaction/);
});

test('through PgBouncer the timeouts hold in each transaction, set with its BEGIN', async () => {
  if (!onPostgres) return;
  const db = openPostgres(bouncer.url, 2, {
    pooler: 'transaction',
    statementTimeoutMs: 300,
    lockTimeoutMs: 200,
    idleInTransactionTimeoutMs: 5000,
  });
  try {
    const settings = await db.transaction(async (tx) => {
      const { rows } = await tx.query<{ statement: string; lock: string; idle: string }>(
        `SELECT current_setting('statement_timeout') AS statement, current_setting('lock_timeout') AS lock,
                current_setting('idle_in_transaction_session_timeout') AS idle`,
      );
      return rows[0];
    });
    assert.deepEqual(settings, { statement: '300ms', lock: '200ms', idle: '5s' });
    await assert.rejects(
      db.transaction((tx) => tx.query('SELECT pg_sleep(2)')),
      (error: { code?: string }) => error.code === '57014', // canceled by statement_timeout
    );
    // A transaction's own settings come after them, and win.
    const own = await db.transaction(
      async (tx) => (await tx.query<{ s: string }>(`SELECT current_setting('statement_timeout') AS s`)).rows[0]!.s,
      { statement_timeout: '0' },
    );
    assert.equal(own, '0');
  } finally {
    await db.close();
  }
});
