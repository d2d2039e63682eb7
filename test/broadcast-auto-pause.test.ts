// The automatic pause of a broadcast, with every peer real: copies made by the fan-out (its first batch
// only, so the broadcast is still queued, as a large one is while its copies go out), delivered by the
// worker to a loopback SMTP sink that refuses some recipients for good (550 5.1.1), complaints coming
// back over SMTP to the inbound listener as RFC 5965 reports, and broadcast.paused delivered to a real
// HTTP receiver. Small thresholds through the configuration; the check's interval is shortened for the
// test through the process's automatic pause, made before the worker asks for it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { resumeBroadcast, sendBroadcast } from '../src/broadcasts/send-broadcast.ts';
import { BATCH, fanOut } from '../src/broadcasts/fan-out.ts';
import {
  autoPauseSettings,
  broadcastAutoPause,
  checkBroadcast,
  pauseReason,
  type BroadcastAutoPause,
} from '../src/broadcasts/auto-pause.ts';
import { startDelivery } from '../src/delivery/start-delivery.ts';
import { createTransport } from '../src/delivery/transports/index.ts';
import type { Transport } from '../src/delivery/transport.ts';
import type { Worker } from '../src/queue/worker.ts';
import { startWebhookDelivery } from '../src/webhooks/start-webhooks.ts';
import { startInboundServer, type InboundServer } from '../src/inbound/inbound-server.ts';
import { returnPathAddress } from '../src/delivery/return-path.ts';
import { loadConfig } from '../src/platform/config.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';
import { feedbackReport } from './helpers/delivery-reports.ts';

const RETURN_PATH_DOMAIN = 'bounces.auto-pause.test';
const log = { error: () => {}, warn: () => {}, info: () => {} };

interface Received {
  type: string;
  data: Record<string, unknown>;
}

let sink: SmtpSink;
let t: TestApp;
let org: TestOrganization;
let transport: Transport;
let delivery: Worker | undefined;
let webhooks: Awaited<ReturnType<typeof startWebhookDelivery>>;
let inbound: InboundServer;
let autoPause: BroadcastAutoPause;
let hook: Server;
const received: Received[] = [];
let label = 0;

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  t = await buildTestApp({
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_RETURN_PATH_DOMAIN: RETURN_PATH_DOMAIN,
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_BROADCAST_PAUSE_AFTER: '10',
    MAILROOM_BROADCAST_PAUSE_HARD_BOUNCE_RATE: '0.1',
    MAILROOM_BROADCAST_PAUSE_COMPLAINT_RATE: '0.01',
  });
  org = await createTestOrganization(t.db, t.config, 'autop');
  // The process's automatic pause, with a short interval between checks: the worker and the listener
  // below are given this one.
  autoPause = broadcastAutoPause(t.db, autoPauseSettings(t.config), { intervalMs: 100 });
  transport = createTransport(t.config, t.db);
  webhooks = await startWebhookDelivery(t.db, t.config, log);
  inbound = await startInboundServer({
    db: t.db,
    signer: t.app.signer,
    host: '127.0.0.1',
    port: 0,
    log,
    autoPause: autoPauseSettings(t.config),
  });
  hook = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => {
      received.push(JSON.parse(raw) as Received);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(hook.address() as { port: number }).port}/hook`;
  const res = await t.app.inject({
    method: 'POST',
    url: '/webhooks',
    headers: bearer(org.fullKey),
    payload: { endpoint, events: ['broadcast.paused'] },
  });
  assert.equal(res.statusCode, 201, res.body);
});
after(async () => {
  autoPause.close();
  await delivery?.stop();
  await inbound.close();
  await webhooks.close();
  await transport.close();
  await t.close();
  await sink.close();
  await new Promise<void>((resolve) => (hook.closeAllConnections(), hook.close(() => resolve())));
});

/**
 * A broadcast to `count` new contacts (c<i>@<tag>.example), sent, with the fan-out's first batch of
 * copies made and the rest of the audience still pending: the broadcast stays queued (no fan-out worker
 * runs in this file), as a large broadcast is while its first copies are delivered.
 */
async function broadcastUnderWay(
  count: number,
  address = (i: number, tag: string) => `c${i}@${tag}.example`,
): Promise<{ id: string; tag: string }> {
  label += 1;
  const tag = `ap${label}`;
  const { rows: segment } = await t.db.query<{ id: string }>(
    'INSERT INTO segments (organization_id, name) VALUES ($1, $2) RETURNING id',
    [org.id, tag],
  );
  await t.db.query(
    `WITH made AS (INSERT INTO contacts (organization_id, email) SELECT $1, unnest($2::text[]) RETURNING id)
     INSERT INTO contact_segments (contact_id, segment_id) SELECT id, $3 FROM made`,
    [org.id, Array.from({ length: count }, (_, i) => address(i + 1, tag)), segment[0]!.id],
  );
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO broadcasts (organization_id, name, segment_id, "from", subject, html, text)
     VALUES ($1, $2, $3, $4, 'News', '<p>Hi</p>', 'Hi') RETURNING id`,
    [org.id, `Newsletter ${tag}`, segment[0]!.id, `News <news@${org.domain}>`],
  );
  const id = rows[0]!.id;
  await sendBroadcast(t.db, org.id, id, undefined);
  let batches = 0;
  await fanOut({ db: t.db, config: t.config, signer: t.app.signer, stopping: () => batches++ >= 1 }, id);
  return { id, tag };
}

async function broadcastRow(id: string) {
  const { rows } = await t.db.query<{ status: string; pause_reason: string | null }>(
    'SELECT status, pause_reason FROM broadcasts WHERE id = $1',
    [id],
  );
  return rows[0]!;
}

/** The copies' recipients by status. */
async function outcomes(id: string): Promise<Record<string, number>> {
  const { rows } = await t.db.query<{ status: string; n: number }>(
    `SELECT r.status, count(*)::int AS n FROM emails e JOIN email_recipients r ON r.email_id = e.id
      WHERE e.broadcast_id = $1 GROUP BY r.status`,
    [id],
  );
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

async function startWorker(): Promise<void> {
  delivery = await startDelivery(t.db, t.config, transport, log);
}
async function stopWorker(): Promise<void> {
  await delivery?.stop();
  delivery = undefined;
}

const pausedEvents = (id: string) => received.filter((r) => r.type === 'broadcast.paused' && r.data.id === id);

test('the reason names the rate and the threshold; nothing is decided before `after` copies have an outcome', () => {
  const settings = { after: 1000, hardBounceRate: 0.05, complaintRate: 0.003 };
  assert.equal(
    pauseReason(settings, { copies: 1000, hard_bounces: 62, complaints: 0 }),
    'hard bounces 6.2% of 1,000 copies passed 5%',
  );
  assert.equal(
    pauseReason(settings, { copies: 2000, hard_bounces: 10, complaints: 7 }),
    'complaints 0.35% of 2,000 copies passed 0.3%',
  );
  assert.equal(pauseReason(settings, { copies: 999, hard_bounces: 999, complaints: 999 }), undefined);
  assert.equal(pauseReason(settings, { copies: 1000, hard_bounces: 50, complaints: 3 }), undefined, 'at, not past');
  assert.equal(pauseReason({ ...settings, after: 0 }, { copies: 5000, hard_bounces: 5000, complaints: 0 }), undefined);
});

test('the settings are checked at boot: a rate is a fraction from 0 to 1', () => {
  assert.throws(
    () => loadConfig({ MAILROOM_BROADCAST_PAUSE_HARD_BOUNCE_RATE: '5%' }),
    /MAILROOM_BROADCAST_PAUSE_HARD_BOUNCE_RATE: expected a fraction from 0 to 1/,
  );
  assert.throws(() => loadConfig({ MAILROOM_BROADCAST_PAUSE_COMPLAINT_RATE: '1.5' }), /expected a fraction/);
  assert.throws(() => loadConfig({ MAILROOM_BROADCAST_PAUSE_AFTER: '-1' }), /expected a whole number/);
  assert.deepEqual(autoPauseSettings(loadConfig({})), { after: 1000, hardBounceRate: 0.05, complaintRate: 0.003 });
});

test('hard bounces past the rate pause the broadcast: its other copies are held, broadcast.paused reaches the endpoint once', async () => {
  const { id, tag } = await broadcastUnderWay(BATCH + 20);
  // One contact in four is refused for good by the receiving server.
  for (let i = 1; i <= BATCH; i += 4) {
    sink.replyToRecipient(`c${i}@${tag}.example`, { code: 550, message: '5.1.1 No such user here' });
  }
  await startWorker();
  try {
    await waitFor(async () => (await broadcastRow(id)).status === 'paused', 30_000);
  } finally {
    await stopWorker();
  }
  const row = await broadcastRow(id);
  assert.match(row.pause_reason!, /^hard bounces \d+(\.\d+)?% of [\d,]+ copies passed 10%$/);

  // The copies not yet sent stay where they are, and the fan-out makes no more while it is paused.
  const settled = await outcomes(id);
  assert.ok((settled.pending ?? 0) > 0, `copies left unsent: ${JSON.stringify(settled)}`);
  assert.ok((settled.bounced ?? 0) > 0);
  await fanOut({ db: t.db, config: t.config, signer: t.app.signer }, id);
  const { rows: pending } = await t.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'pending'",
    [id],
  );
  assert.equal(pending[0]!.n, 20);

  await waitFor(() => pausedEvents(id).length === 1, 10_000);
  const event = pausedEvents(id)[0]!;
  assert.equal(event.data.name, `Newsletter ${tag}`);
  assert.equal(event.data.status, 'paused');
  assert.equal(event.data.pause_reason, row.pause_reason);
  const counts = event.data.counts as { copies: number; hard_bounces: number; complaints: number };
  assert.ok(counts.copies >= 10 && counts.hard_bounces / counts.copies > 0.1, JSON.stringify(counts));
  assert.equal(counts.complaints, 0);

  // Checked again (another process, a late outcome): the pause and its event are not repeated.
  assert.deepEqual(await checkBroadcast(t.db, autoPauseSettings(t.config), id), { kind: 'finished' });
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(pausedEvents(id).length, 1);
});

test('complaints reported to the inbound listener past their rate pause the broadcast; once resumed, it is not paused again', async () => {
  const { id } = await broadcastUnderWay(BATCH + 5);
  const { rows: copies } = await t.db.query<{ id: string; address: string }>(
    `SELECT e.id, r.address FROM emails e JOIN email_recipients r ON r.email_id = e.id WHERE e.broadcast_id = $1
      ORDER BY r.address`,
    [id],
  );
  await startWorker();
  try {
    await waitFor(async () => (await outcomes(id)).delivered === BATCH, 60_000);
  } finally {
    await stopWorker();
  }
  await autoPause.idle();
  assert.equal((await broadcastRow(id)).status, 'queued', 'every copy delivered: nothing to pause for');

  // 1% of 500 is 5: the sixth complaint passes the rate.
  for (const [i, copy] of copies.slice(0, 6).entries()) {
    const verp = returnPathAddress({ signer: t.app.signer, domain: RETURN_PATH_DOMAIN }, copy.id, copy.address);
    const response = await deliverReport(verp, arf(verp, copy.address));
    assert.match(response, /^250 /);
    await autoPause.idle();
    assert.equal((await broadcastRow(id)).status, i < 5 ? 'queued' : 'paused', `after complaint ${i + 1}`);
  }
  const row = await broadcastRow(id);
  assert.equal(row.pause_reason, `complaints 1.2% of 500 copies passed 1%`);
  await waitFor(() => pausedEvents(id).length === 1, 10_000);
  assert.deepEqual(pausedEvents(id)[0]!.data.counts, { copies: 500, hard_bounces: 0, complaints: 6 });

  // An operator resumes it, having seen why: later complaints do not pause it again.
  await resumeBroadcast(t.db, org.id, id);
  const copy = copies[6]!;
  const verp = returnPathAddress({ signer: t.app.signer, domain: RETURN_PATH_DOMAIN }, copy.id, copy.address);
  assert.match(await deliverReport(verp, arf(verp, copy.address)), /^250 /);
  await autoPause.idle();
  assert.equal((await broadcastRow(id)).status, 'queued');
  assert.equal(pausedEvents(id).length, 1);
});

/** Hands a report to the listener over SMTP from the null reverse path, as real reports come. */
async function deliverReport(to: string, raw: string): Promise<string> {
  const client = nodemailerTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
  try {
    return (await client.sendMail({ envelope: { from: '', to: [to] }, raw })).response;
  } finally {
    client.close();
  }
}

/** An RFC 5965 abuse report about the copy sent to `recipient`. */
const arf = (verp: string, recipient: string) =>
  feedbackReport(
    verp,
    ['Feedback-Type: abuse', 'User-Agent: ExampleFBL/1.0', 'Version: 1', `Original-Rcpt-To: ${recipient}`],
    { from: `news@${org.domain}`, to: recipient },
  );

test("copies to Resend's test addresses count nowhere: their simulated bounces and complaints pause nothing", async () => {
  // 10 real contacts, delivered, beside 20 bounced@ and 10 complained@ test addresses: counted, the test
  // copies would be 20 hard bounces and 10 complaints of 40 copies.
  const { id } = await broadcastUnderWay(40, (i, tag) =>
    i <= 10 ? `c${i}@${tag}.example` : i <= 30 ? `bounced+${tag}-${i}@resend.dev` : `complained+${tag}-${i}@resend.dev`,
  );
  await startWorker();
  try {
    await waitFor(async () => {
      const settled = await outcomes(id);
      return settled.delivered === 20 && settled.bounced === 20;
    }, 30_000);
  } finally {
    await stopWorker();
  }
  await autoPause.idle();
  assert.notEqual((await broadcastRow(id)).status, 'paused');
  const { rows } = await t.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM email_events ev JOIN emails e ON e.id = ev.email_id
      WHERE e.broadcast_id = $1 AND ev.type = 'complained'`,
    [id],
  );
  assert.equal(rows[0]!.n, 10, 'the timeline keeps the test complaints');
  const verdict = await checkBroadcast(t.db, autoPauseSettings(t.config), id);
  assert.deepEqual(verdict, { kind: 'healthy', counts: { copies: 10, hard_bounces: 0, complaints: 0 } });
  assert.equal(pausedEvents(id).length, 0);
});
