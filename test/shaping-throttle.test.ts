// A relay that counts its sending rate per second, as Amazon SES does: beyond 4 messages in the current
// second it answers `454 Throttling failure: Maximum sending rate exceeded`. A burst sent through it
// must slow down to what it takes, not stop for minutes: the relay site's rate is lowered, the messages
// throttled wait a moment (no try spent) and go at the slower pace, and the rate is lifted after a quiet
// spell (the shaping clock is moved on for that). The back-off's own rules are checked as pure functions.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { SMTPServer } from 'smtp-server';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, sendBatch, setLimits, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';
import { freePort } from './helpers/server-process.ts';
import { createTransport } from '../src/delivery/transports/index.ts';
import { startDelivery } from '../src/delivery/start-delivery.ts';
import {
  RATE_QUIET_MS,
  initialState,
  mayStart,
  onRateThrottle,
  onSuccess,
  type AdaptiveLimits,
} from '../src/shaping/adaptive.ts';
import { classifyReply } from '../src/shaping/reply-classes.ts';

const RATE_PER_SECOND = 4;
const SES_RATE = 'Throttling failure: Maximum sending rate exceeded.';
const silent = { error: () => {}, warn: () => {} };

/** A relay with SES's per-second sending rate: what it took, and how often it said no. */
interface ThrottlingRelay {
  url: string;
  accepted: string[];
  throttled: number;
  close(): Promise<void>;
}

async function startThrottlingRelay(): Promise<ThrottlingRelay> {
  let second = 0;
  let inSecond = 0;
  const relay = { accepted: [] as string[], throttled: 0 };
  const server = new SMTPServer({
    authOptional: true,
    disableReverseLookup: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      stream.resume();
      stream.on('end', () => {
        const now = Math.floor(Date.now() / 1000);
        if (now !== second) [second, inSecond] = [now, 0];
        if (inSecond >= RATE_PER_SECOND) {
          relay.throttled += 1;
          return callback(Object.assign(new Error(SES_RATE), { responseCode: 454 }));
        }
        inSecond += 1;
        for (const rcpt of session.envelope.rcptTo) relay.accepted.push(rcpt.address);
        callback();
      });
    },
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return Object.assign(relay, {
    url: `smtp://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

let relay: ThrottlingRelay;
let t: TestApp;
let org: TestOrganization;
/** The shaping clock: real time plus what the test has moved it on. */
let skew = 0;
const clock = () => new Date(Date.now() + skew);

before(async () => {
  relay = await startThrottlingRelay();
  t = await buildTestApp({ MAILROOM_TRANSPORT: 'smtp', MAILROOM_SMTP_URL: relay.url });
  org = await createTestOrganization(t.db, t.config, 'throttle');
  await setLimits(t.db, org.id, { rateLimit: 1000 });
});
after(async () => {
  await t.close();
  await relay.close();
});

const relaySite = async () =>
  (
    await t.db.query<{ message_rate: number | null; connection_limit: number; throttle_replies: number }>(
      "SELECT message_rate, connection_limit, throttle_replies::int FROM destination_sites WHERE site = 'relay'",
    )
  ).rows[0];

test('a burst of 24 through a relay that throttles beyond 4 a second: all delivered, the rate lowered, then lifted', async () => {
  const transport = createTransport(t.config, t.db, { shaping: { now: clock } });
  let worker = await startDelivery(t.db, t.config, transport, silent);
  try {
    const burst = Array.from({ length: 24 }, (_, i) => message(org, { to: `reader${i}@example.org` }));
    const res = await sendBatch(t.app, org.sendingKey, burst);
    assert.equal(res.statusCode, 200, res.body);

    await waitFor(() => relay.accepted.length >= 24, 100_000, 100);
    assert.equal(new Set(relay.accepted).size, 24, 'each message delivered once');
    assert.ok(relay.throttled > 0, 'the relay did throttle the burst');
    await waitFor(async () => {
      const { rows } = await t.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM email_recipients WHERE status = 'delivered'",
      );
      return rows[0]!.n === 24;
    }, 10_000);
    // No try was spent on a throttle, and nothing failed.
    const { rows: recipients } = await t.db.query<{ status: string; attempts: number }>(
      'SELECT status, attempts FROM email_recipients',
    );
    assert.deepEqual(
      recipients.filter((r) => r.status !== 'delivered' || r.attempts !== 1),
      [],
    );

    // The relay site slowed down (a message rate where it had none), its connections untouched.
    const lowered = await relaySite();
    assert.ok(lowered?.message_rate !== null && lowered!.message_rate > 0, JSON.stringify(lowered));
    assert.equal(lowered!.connection_limit, 20);
    assert.ok(lowered!.throttle_replies > 0);

    // A quiet spell later (the shaping clock moved on), the next delivery lifts the rate.
    await worker.stop();
    skew = RATE_QUIET_MS + 60_000;
    worker = await startDelivery(t.db, t.config, transport, silent);
    const one = await send(t.app, org.sendingKey, message(org, { to: 'later@example.org' }));
    assert.equal(one.statusCode, 200, one.body);
    await waitFor(() => relay.accepted.includes('later@example.org'), 30_000);
  } finally {
    await worker.stop();
    // Closing the transport writes the deliveries it counted to the site's state.
    await transport.close();
  }
  assert.equal((await relaySite())?.message_rate, null);
});

test("SES's rate throttle lowers the rate; its daily quota holds the site; other throttles stay as they were", () => {
  assert.deepEqual(classifyReply(454, `454 ${SES_RATE}`), {
    class: 'throttled',
    rule: 'ses-sending-rate',
    rateLimit: true,
  });
  assert.deepEqual(classifyReply(454, '454 Throttling failure: Daily message quota exceeded.'), {
    class: 'throttled',
    rule: 'ses-daily-quota',
    hold: { scope: 'site', key: 'sending_quota' },
  });
  assert.equal(classifyReply(421, '421 4.7.0 Try again later, closing connection.').rateLimit, undefined);
});

test('back-off on a rate throttle: half the rate (from the pace sent at, where none is set), a second, then lifted', () => {
  const start = new Date('2026-01-05T10:00:00Z');
  const at = (ms: number) => new Date(start.getTime() + ms);
  const none: AdaptiveLimits = { connectionLimit: 20 };
  let state = initialState(none);

  // No rate configured: the one it was sent at (24 a second), halved; the connections stay.
  state = onRateThrottle(state, none, at(0), 24 * 60);
  assert.equal(state.messageRatePerMinute, 12 * 60);
  assert.equal(state.connectionLimit, 20);
  assert.equal(state.pauseReason, 'throttled');
  assert.equal(state.pausedUntil?.getTime(), at(1_000).getTime());
  assert.equal(mayStart(state, at(999)), false);
  // The other replies of the same burst, during that second, lower nothing more.
  state = onRateThrottle(state, none, at(500), 24 * 60);
  assert.equal(state.messageRatePerMinute, 12 * 60);
  // A throttle after it does: half again, from the rate in force.
  state = onRateThrottle(state, none, at(1_500), 24 * 60);
  assert.equal(state.messageRatePerMinute, 6 * 60);

  // Successes keep the rate it learned (and step it up by a tenth every 20), short of a quiet spell…
  for (let i = 0; i < 20; i++) state = onSuccess(state, none, at(60_000));
  assert.ok(Math.abs(state.messageRatePerMinute! - 6 * 60 * 1.1) < 1e-9, String(state.messageRatePerMinute));
  state = onSuccess(state, none, at(1_500 + RATE_QUIET_MS - 1));
  assert.notEqual(state.messageRatePerMinute, undefined);
  // …after which it is lifted: the site has no rate again.
  state = onSuccess(state, none, at(1_500 + RATE_QUIET_MS));
  assert.equal(state.messageRatePerMinute, undefined);

  // A configured rate is halved and climbs back to it, never above, and is never lifted.
  const limited: AdaptiveLimits = { connectionLimit: 5, maxMessageRate: { count: 14, perMs: 1000 } };
  let ses = onRateThrottle(initialState(limited), limited, at(0), 100 * 60);
  assert.equal(ses.messageRatePerMinute, 7 * 60);
  for (let i = 0; i < 200; i++) ses = onSuccess(ses, limited, at(RATE_QUIET_MS * 2));
  assert.equal(ses.messageRatePerMinute, 14 * 60);
});
