// Adaptive back-off, driven by hand with an injected clock: holds pause and double, throttles halve,
// successes climb back one step at a time, and the limits are never crossed either way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_HOLDS,
  HOLD_REPEAT_WINDOW_MS,
  RATE_QUIET_MS,
  SUCCESSES_PER_STEP,
  initialState,
  isHeld,
  mayStart,
  onHold,
  onSuccess,
  onThrottle,
  resumesAt,
  type AdaptiveLimits,
  type AdaptiveState,
} from '../src/shaping/adaptive.ts';
import { classifyReply, type ReplyHold } from '../src/shaping/reply-classes.ts';
import { compileShapingPolicy } from '../src/shaping/shaping-file.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const GMAIL_4_7_28 =
  '421-4.7.28 [203.0.113.42] Our system has detected an unusual rate of\n421-4.7.28 unsolicited mail originating from your IP address. To protect our\n421 4.7.28 users from spam, mail sent from your IP address has been temporarily rate limited. - gsmtp';
const YAHOO_TSS04 =
  '421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or user complaints - 4.16.55.1; see https://postmaster.yahooinc.com/error-codes';

/** A clock the test moves by hand. */
function clock(start = Date.UTC(2025, 0, 6, 9, 0, 0)) {
  let now = start;
  return {
    now: () => new Date(now),
    advance: (ms: number) => {
      now += ms;
    },
    at: (ms: number) => new Date(start + ms),
  };
}

function holdOf(code: number, text: string): ReplyHold {
  const reply = classifyReply(code, text);
  assert.ok(reply.hold, `${reply.rule} carries a hold`);
  return reply.hold;
}

function succeed(state: AdaptiveState, limits: AdaptiveLimits, times: number, now: Date): AdaptiveState {
  for (let i = 0; i < times; i++) state = onSuccess(state, limits, now);
  return state;
}

test('a Gmail 4.7.28 pauses the site 10 minutes, restarts at one connection and climbs back one at a time to 5', () => {
  const google: AdaptiveLimits = { connectionLimit: 5 };
  const time = clock();
  let state = initialState(google);
  assert.equal(state.connectionLimit, 5);
  assert.ok(mayStart(state, time.now()));

  state = onHold(state, holdOf(421, GMAIL_4_7_28), time.now());
  assert.equal(state.pauseReason, 'site_paused');
  assert.equal(state.connectionLimit, 1);
  assert.equal(state.lastHoldMs, 10 * MINUTE);
  assert.ok(isHeld(state, time.now()));

  // The other four deliveries under way answer the same: one episode, not four repeats.
  time.advance(1_000);
  for (let i = 0; i < 4; i++) state = onHold(state, holdOf(421, GMAIL_4_7_28), time.now());
  assert.equal(state.holdCount, 1);
  assert.equal(state.lastHoldMs, 10 * MINUTE);
  assert.deepEqual(state.pausedUntil, time.at(1_000 + 10 * MINUTE));

  // Paused for at least the 10 minutes; deliveries that finish meanwhile neither lift it nor count.
  state = succeed(state, google, 3 * SUCCESSES_PER_STEP, time.now());
  assert.equal(state.connectionLimit, 1);
  assert.equal(state.successes, 0);
  time.advance(10 * MINUTE - 1_000);
  assert.equal(mayStart(state, time.now()), false);
  assert.deepEqual(resumesAt(state, time.now()), time.at(1_000 + 10 * MINUTE));
  time.advance(1_000);
  assert.equal(mayStart(state, time.now()), true);
  assert.equal(resumesAt(state, time.now()), undefined);

  // One connection back per SUCCESSES_PER_STEP successes, from 1 to 5, never above.
  const seen: number[] = [];
  for (let i = 0; i < 6 * SUCCESSES_PER_STEP; i++) {
    state = onSuccess(state, google, time.now());
    if (seen.at(-1) !== state.connectionLimit) seen.push(state.connectionLimit);
  }
  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
  assert.equal(state.connectionLimit, 5);
});

test('a hold that comes back within the hour after the last one ended doubles, up to 4 hours; a quiet spell resets it', () => {
  const time = clock();
  const hold = holdOf(421, GMAIL_4_7_28);
  let state = initialState({ connectionLimit: 5 });
  const pauses: number[] = [];
  for (let i = 0; i < 7; i++) {
    state = onHold(state, hold, time.now());
    pauses.push(state.lastHoldMs!);
    assert.deepEqual(state.pausedUntil, new Date(time.now().getTime() + state.lastHoldMs!));
    // Resume, and meet the rate limit again five minutes later.
    time.advance(state.lastHoldMs! + 5 * MINUTE);
  }
  assert.deepEqual(
    pauses.map((ms) => ms / MINUTE),
    [10, 20, 40, 80, 160, 240, 240],
  );
  assert.equal(state.holdCount, 7);

  // More than the window after the last pause ended: a first hold again.
  time.advance(HOLD_REPEAT_WINDOW_MS);
  state = onHold(state, hold, time.now());
  assert.equal(state.lastHoldMs, 10 * MINUTE);
  assert.equal(state.holdCount, 1);
});

test('a state stored without the end of its last hold still doubles, from its pause while that names a hold', () => {
  const time = clock();
  const hold = holdOf(421, GMAIL_4_7_28);
  // As the shared store keeps a site: no lastHoldUntil.
  const { lastHoldUntil: _dropped, ...stored } = onHold(initialState({ connectionLimit: 5 }), hold, time.now());
  time.advance(30 * MINUTE);
  const again = onHold(stored, hold, time.now());
  assert.equal(again.lastHoldMs, 20 * MINUTE);
  assert.equal(again.holdCount, 2);
});

test('Yahoo TSS04 holds the site 2 hours; a sender fault holds the sending domain 30 minutes', () => {
  const time = clock();
  const yahoo = onHold(initialState({ connectionLimit: 10 }), holdOf(421, YAHOO_TSS04), time.now());
  assert.equal(yahoo.lastHoldMs, 2 * HOUR);
  assert.equal(yahoo.pauseReason, 'site_paused');
  assert.equal(yahoo.connectionLimit, 1);

  const dmarc = holdOf(
    550,
    "550-5.7.26 Unauthenticated email from example.com is not accepted due to domain's\n550 5.7.26 DMARC policy. a1si123 - gsmtp",
  );
  assert.deepEqual(dmarc, { scope: 'sender', key: 'sender_fault' });
  const sender = onHold(initialState({ connectionLimit: 5 }), dmarc, time.now());
  assert.equal(sender.pauseReason, 'sender_paused');
  assert.equal(sender.lastHoldMs, 30 * MINUTE);
  assert.deepEqual(resumesAt(sender, time.now()), time.at(30 * MINUTE));
});

test('the [holds] table overrides the durations and the cap; an unknown key pauses like a throttle', () => {
  const time = clock();
  const holds = { ...DEFAULT_HOLDS, google_rate_limit: 5 * MINUTE, max: 15 * MINUTE, throttle: 2 * MINUTE };
  let state = initialState({ connectionLimit: 5 });
  const pauses: number[] = [];
  for (let i = 0; i < 4; i++) {
    state = onHold(state, { scope: 'site', key: 'google_rate_limit' }, time.now(), holds);
    pauses.push(state.lastHoldMs! / MINUTE);
    time.advance(state.lastHoldMs!);
  }
  assert.deepEqual(pauses, [5, 10, 15, 15]);

  const other = onHold(initialState({ connectionLimit: 5 }), { scope: 'site', key: 'no_such_key' }, time.now(), holds);
  assert.equal(other.lastHoldMs, 2 * MINUTE);
  // A first duration above the cap is cut to the cap.
  const capped = onHold(initialState({ connectionLimit: 5 }), { scope: 'site', key: 'yahoo_tss04' }, time.now(), holds);
  assert.equal(capped.lastHoldMs, 15 * MINUTE);
});

test('a throttle halves the connections and the rate, never below one, and pauses for the throttle hold', () => {
  const limits: AdaptiveLimits = { connectionLimit: 10, maxMessageRate: { count: 100, perMs: MINUTE } };
  const time = clock();
  let state = initialState(limits);
  assert.equal(state.messageRatePerMinute, 100);
  const throttled = classifyReply(
    451,
    '451 4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation. (S775)',
  );
  assert.equal(throttled.class, 'throttled');
  assert.equal(throttled.hold, undefined);

  const connections: number[] = [];
  const rates: number[] = [];
  for (let i = 0; i < 9; i++) {
    state = onThrottle(state, limits, time.now());
    connections.push(state.connectionLimit);
    rates.push(state.messageRatePerMinute!);
  }
  assert.deepEqual(connections, [5, 2, 1, 1, 1, 1, 1, 1, 1]);
  assert.deepEqual(rates, [50, 25, 12.5, 6.25, 3.125, 1.5625, 1, 1, 1]);
  assert.equal(state.pauseReason, 'throttled');
  assert.equal(DEFAULT_HOLDS.throttle, 5 * MINUTE);
  assert.deepEqual(resumesAt(state, time.now()), time.at(5 * MINUTE));
  assert.equal(isHeld(state, time.now()), false);
  time.advance(5 * MINUTE);
  assert.ok(mayStart(state, time.now()));

  // A site without a configured rate gets none from a throttle: only its connections halve.
  const noRate = onThrottle(initialState({ connectionLimit: 5 }), { connectionLimit: 5 }, time.now());
  assert.equal(noRate.connectionLimit, 2);
  assert.equal(noRate.messageRatePerMinute, undefined);
});

test('a throttle during a hold does not shorten the hold', () => {
  const time = clock();
  let state = onHold(initialState({ connectionLimit: 5 }), holdOf(421, YAHOO_TSS04), time.now());
  time.advance(MINUTE);
  state = onThrottle(state, { connectionLimit: 5 }, time.now());
  assert.equal(state.pauseReason, 'site_paused');
  assert.deepEqual(state.pausedUntil, time.at(2 * HOUR));
  assert.equal(state.connectionLimit, 1);
});

test('successes win back the connections and the rate up to the configured limits, and never above', () => {
  const limits: AdaptiveLimits = { connectionLimit: 4, maxMessageRate: { count: 20, perMs: 1_000 } };
  const time = clock();
  let state = initialState(limits);
  assert.equal(state.messageRatePerMinute, 1200);
  for (let i = 0; i < 4; i++) state = onThrottle(state, limits, time.now());
  assert.equal(state.connectionLimit, 1);
  assert.equal(state.messageRatePerMinute, 75);
  time.advance(DEFAULT_HOLDS.throttle!); // the throttle's pause

  // Fewer successes than a step change nothing.
  state = succeed(state, limits, SUCCESSES_PER_STEP - 1, time.now());
  assert.equal(state.connectionLimit, 1);
  assert.equal(state.messageRatePerMinute, 75);
  state = onSuccess(state, limits, time.now());
  assert.equal(state.connectionLimit, 2);
  assert.ok(Math.abs(state.messageRatePerMinute! - 82.5) < 1e-9);

  let highest = 0;
  let fastest = 0;
  for (let i = 0; i < 100 * SUCCESSES_PER_STEP; i++) {
    state = onSuccess(state, limits, time.now());
    highest = Math.max(highest, state.connectionLimit);
    fastest = Math.max(fastest, state.messageRatePerMinute!);
  }
  assert.equal(highest, 4);
  assert.equal(state.connectionLimit, 4);
  assert.equal(fastest, 1200);
  assert.equal(state.messageRatePerMinute, 1200);

  // Limits lowered by a new shaping file: the next success brings the state down to them at once.
  const lower: AdaptiveLimits = { connectionLimit: 2, maxMessageRate: { count: 10, perMs: MINUTE } };
  state = onSuccess(state, lower, time.now());
  assert.equal(state.connectionLimit, 2);
  assert.equal(state.messageRatePerMinute, 10);
  // A rate no longer configured: kept while the site's last throttle is recent, lifted after a quiet spell.
  assert.equal(onSuccess(state, { connectionLimit: 2 }, time.now()).messageRatePerMinute, 10);
  time.advance(RATE_QUIET_MS);
  const unlimited = onSuccess(state, { connectionLimit: 2 }, time.now());
  assert.equal(unlimited.messageRatePerMinute, undefined);
});

test('never below one connection or one message a minute, nor above a slower configured rate', () => {
  const time = clock();
  // One message an hour: slower than the floor, so throttles and holds leave it where it is.
  const slow: AdaptiveLimits = { connectionLimit: 1, maxMessageRate: { count: 1, perMs: HOUR } };
  let state = initialState(slow);
  for (let i = 0; i < 5; i++) {
    state = onThrottle(state, slow, time.now());
    state = onHold(state, { scope: 'site', key: 'google_rate_limit' }, time.now());
    assert.equal(state.connectionLimit, 1);
    assert.equal(state.messageRatePerMinute, 1 / 60);
    time.advance(5 * HOUR);
  }
  state = succeed(state, slow, 10 * SUCCESSES_PER_STEP, time.now());
  assert.equal(state.connectionLimit, 1);
  assert.equal(state.messageRatePerMinute, 1 / 60);

  // Three a minute: halves to 1.5, then stops at one.
  const three: AdaptiveLimits = { connectionLimit: 3, maxMessageRate: { count: 3, perMs: MINUTE } };
  state = initialState(three);
  const rates: number[] = [];
  for (let i = 0; i < 3; i++) {
    state = onHold(state, { scope: 'sender', key: 'sender_fault' }, time.now());
    rates.push(state.messageRatePerMinute!);
    assert.equal(state.connectionLimit, 1);
    time.advance(5 * HOUR);
  }
  assert.deepEqual(rates, [1.5, 1, 1]);
});

test("the shaping file's limits and [holds] drive it as they are", () => {
  const time = clock();
  const policy = compileShapingPolicy({
    site: { google: { max_message_rate: '30/m' } },
    holds: { google_rate_limit: '15m', yahoo_tss04: '1h', max: '1h' },
  });
  const google: AdaptiveLimits = policy.limitsFor('google');
  let state = initialState(google);
  assert.equal(state.connectionLimit, 5);
  assert.equal(state.messageRatePerMinute, 30);
  const pauses: number[] = [];
  for (let i = 0; i < 4; i++) {
    state = onHold(state, holdOf(421, GMAIL_4_7_28), time.now(), policy.holds);
    pauses.push(state.lastHoldMs! / MINUTE);
    time.advance(state.lastHoldMs!);
  }
  assert.deepEqual(pauses, [15, 30, 60, 60]);
  // The file has no sender_fault key: the built-in half hour applies.
  const sender = onHold(initialState(google), { scope: 'sender', key: 'sender_fault' }, time.now(), policy.holds);
  assert.equal(sender.lastHoldMs, 30 * MINUTE);
});
