// scheduled_at in plain English as Resend takes it ("in 1 hour", "tomorrow at 9am", "friday at 3pm ET")
// besides ISO 8601: the grammar against a fixed clock, then the same forms over POST /emails, batch
// entries, PATCH /emails/:id and the Resend SDK, with anything else refused by name.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send, sendBatch } from './helpers/emails.ts';
import { responseProblems } from './helpers/resend-openapi.ts';
import { parseScheduledAt } from '../src/emails/scheduled-at.ts';
import { ServiceError } from '../src/platform/errors.ts';
import { loadConfig } from '../src/platform/config.ts';

describe('the grammar, on a fixed clock', () => {
  // Friday 6 March 2026, 10:00 UTC; US clocks go forward on Sunday 8 March, Europe's on 29 March.
  const now = new Date('2026-03-06T10:00:00Z');
  const cases: Array<[string, string]> = [
    ['2026-03-06T10:00:01Z', '2026-03-06T10:00:01.000Z'],
    ['2026-03-07T09:00:00+02:00', '2026-03-07T07:00:00.000Z'],
    ['in 1 min', '2026-03-06T10:01:00.000Z'],
    ['in 5 mins', '2026-03-06T10:05:00.000Z'],
    ['in 30 seconds', '2026-03-06T10:00:30.000Z'],
    ['in an hour', '2026-03-06T11:00:00.000Z'],
    ['In  3  Hours', '2026-03-06T13:00:00.000Z'],
    ['in 2 hrs', '2026-03-06T12:00:00.000Z'],
    ['in a day', '2026-03-07T10:00:00.000Z'],
    ['in 30 days', '2026-04-05T10:00:00.000Z'],
    ['in 2 weeks', '2026-03-20T10:00:00.000Z'],
    ['today at noon', '2026-03-06T12:00:00.000Z'],
    ['today at 23:59', '2026-03-06T23:59:00.000Z'],
    ['tomorrow at 9am', '2026-03-07T09:00:00.000Z'],
    ['tomorrow 9:30 pm', '2026-03-07T21:30:00.000Z'],
    ['tomorrow at 12am', '2026-03-07T00:00:00.000Z'],
    ['tomorrow at midnight', '2026-03-07T00:00:00.000Z'],
    ['tomorrow at 12pm', '2026-03-07T12:00:00.000Z'],
    ['tomorrow at 9am UTC+2', '2026-03-07T07:00:00.000Z'],
    ['tomorrow at 9am -05:00', '2026-03-07T14:00:00.000Z'],
    ['tomorrow at 9am PST', '2026-03-07T17:00:00.000Z'],
    // A weekday is the next time it is that day and hour: today while it is ahead, else next week.
    ['friday at 11am', '2026-03-06T11:00:00.000Z'],
    ['friday at 9am', '2026-03-13T09:00:00.000Z'],
    ['Friday at 3pm ET', '2026-03-06T20:00:00.000Z'], // EST, UTC-5
    ['monday at 3pm ET', '2026-03-09T19:00:00.000Z'], // EDT from Sunday, UTC-4
    ['monday at 9am Europe/Paris', '2026-03-09T08:00:00.000Z'],
    ['thursday at 08:15', '2026-03-12T08:15:00.000Z'],
  ];
  for (const [value, expected] of cases) {
    test(`"${value}" is ${expected}`, () => {
      assert.equal(parseScheduledAt(value, now)?.toISOString(), expected);
    });
  }

  test('"today" and "tomorrow" are dates where the zone is', () => {
    // 22:00 UTC on 31 December is already 1 January in Tokyo: tomorrow there is 2 January.
    const lateInTheYear = new Date('2026-12-31T22:00:00Z');
    assert.equal(
      parseScheduledAt('tomorrow at 9am', lateInTheYear)?.toISOString(),
      '2027-01-01T09:00:00.000Z',
      'UTC: the next year',
    );
    assert.equal(
      parseScheduledAt('tomorrow at 9am Asia/Tokyo', lateInTheYear)?.toISOString(),
      '2027-01-02T00:00:00.000Z',
    );
    assert.equal(
      parseScheduledAt('today at 10pm Asia/Tokyo', lateInTheYear)?.toISOString(),
      '2027-01-01T13:00:00.000Z',
    );
  });

  test('no value is no schedule', () => {
    assert.equal(parseScheduledAt(undefined, now), undefined);
  });

  const refused: Array<[string, RegExp]> = [
    ['tomorrow', /needs a time/],
    ['friday', /needs a time/],
    ['tomorrow at 9', /ambiguous/],
    ['next friday at 9am', /must be an ISO 8601 timestamp/],
    ['in a while', /must be an ISO 8601 timestamp/],
    ['in -1 hours', /must be an ISO 8601 timestamp/],
    ['in 1.5 hours', /must be an ISO 8601 timestamp/],
    ['9am tomorrow', /must be an ISO 8601 timestamp/],
    ['tomorrow at 13pm', /no such time of day/],
    ['tomorrow at 24:00', /no such time of day/],
    ['tomorrow at 9am CET', /time zone not understood/],
    ['tomorrow at 9am Mars/Olympus', /time zone not understood/],
    ['tomorrow at 9am +15:00', /time zone not understood/],
    ['sunday at 2:30am ET', /does not exist there/], // the hour US clocks skip on 8 March
    ['today at 9am', /must be in the future/],
    ['in 0 minutes', /must be in the future/],
    ['in 999999 weeks', /too far ahead/],
    ['2026-02-30T09:00:00Z', /not a real date/],
    ['2026-03-07T09:00:00', /must be an ISO 8601 timestamp/],
    ['', /must be an ISO 8601 timestamp/],
  ];
  for (const [value, why] of refused) {
    test(`"${value}" is refused: ${why.source}`, () => {
      assert.throws(
        () => parseScheduledAt(value, now),
        (error: unknown) =>
          error instanceof ServiceError &&
          error.name === 'validation_error' &&
          error.field === 'scheduled_at' &&
          why.test(error.message),
      );
    });
  }
});

describe('the bound, MAILROOM_MAX_SCHEDULE_DAYS', () => {
  const now = new Date('2026-03-06T10:00:00Z');
  test('up to the limit is taken, in every form', () => {
    for (const value of ['in 30 days', 'in 720 hours', '2026-04-05T10:00:00Z', '2026-04-05T12:00:00+02:00']) {
      assert.equal(parseScheduledAt(value, now, 30)?.toISOString(), '2026-04-05T10:00:00.000Z', value);
    }
    assert.equal(parseScheduledAt('in 40 days', now, 45)?.toISOString(), '2026-04-15T10:00:00.000Z');
  });
  for (const value of ['in 31 days', 'in 5 weeks', 'in 40 days', '2026-04-05T10:00:01Z', '9999-12-31T23:59:59Z']) {
    test(`"${value}" is past 30 days: refused, naming the limit`, () => {
      assert.throws(
        () => parseScheduledAt(value, now, 30),
        (error: unknown) =>
          error instanceof ServiceError &&
          error.name === 'validation_error' &&
          error.field === 'scheduled_at' &&
          error.message.includes('at most 30 days ahead (MAILROOM_MAX_SCHEDULE_DAYS)') &&
          error.message.includes('the latest now is 2026-04-05T10:00:00.000Z'),
      );
    });
  }
  test('the setting: 30 unless set, a whole number of days', () => {
    assert.equal(loadConfig({}).maxScheduleDays, 30);
    assert.equal(loadConfig({ MAILROOM_MAX_SCHEDULE_DAYS: '365' }).maxScheduleDays, 365);
    assert.throws(() => loadConfig({ MAILROOM_MAX_SCHEDULE_DAYS: '0' }), /MAILROOM_MAX_SCHEDULE_DAYS/);
  });
});

describe('over the API and the Resend SDK', () => {
  let t: TestApp;
  let org: TestOrganization;
  let resend: Resend;

  before(async () => {
    t = await buildTestApp();
    org = await createTestOrganization(t.db, t.config, 'sched');
    resend = new Resend(org.fullKey, { baseUrl: await t.app.listen({ port: 0, host: '127.0.0.1' }) });
  });
  after(() => t.close());

  const scheduledAt = async (id: string) => {
    const res = await t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(org.fullKey) });
    return Date.parse(res.json().scheduled_at as string);
  };
  /** The instant `value` means at any time between `start` and `end` (the clock moved while the call ran). */
  const between = (value: number, start: number, end: number, offsetMs: number) =>
    assert.ok(value >= start + offsetMs && value <= end + offsetMs, `${new Date(value).toISOString()}`);
  /** 09:00 UTC on the day after the given instant's day. */
  const tomorrowAtNine = (at: number) => {
    const day = new Date(at);
    return Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate() + 1, 9);
  };

  test('POST /emails takes "in 1 hour"; the message is scheduled for an hour after it was sent', async () => {
    const start = Date.now();
    const res = await send(t.app, org.fullKey, message(org, { scheduled_at: 'in 1 hour' }));
    const end = Date.now();
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(responseProblems('POST', '/emails', res.statusCode, res.json()), []);
    between(await scheduledAt(res.json().id), start, end, 3600_000);
  });

  test('a batch entry takes "in 2 days"', async () => {
    const start = Date.now();
    const res = await sendBatch(t.app, org.fullKey, [
      message(org, { scheduled_at: 'in 2 days' }),
      message(org, { scheduled_at: 'whenever' }),
    ]);
    const end = Date.now();
    assert.equal(res.statusCode, 200, res.body);
    const [accepted, refused] = res.json().data;
    between(await scheduledAt(accepted.id), start, end, 2 * 86_400_000);
    assert.deepEqual([refused.object, refused.name], ['error', 'validation_error']);
    assert.match(refused.message, /scheduled_at must be an ISO 8601 timestamp .* "in <number> minutes/);
  });

  test('PATCH /emails/:id takes "tomorrow at 9am" (UTC)', async () => {
    const id = (await send(t.app, org.fullKey, message(org, { scheduled_at: 'in 1 hour' }))).json().id;
    const start = Date.now();
    const res = await t.app.inject({
      method: 'PATCH',
      url: `/emails/${id}`,
      headers: bearer(org.fullKey),
      payload: { scheduled_at: 'tomorrow at 9am' },
    });
    const end = Date.now();
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(responseProblems('PATCH', `/emails/${id}`, res.statusCode, res.json()), []);
    assert.ok([tomorrowAtNine(start), tomorrowAtNine(end)].includes(await scheduledAt(id)));
  });

  test('what the grammar does not take is a 400 validation_error on scheduled_at, listing the forms', async () => {
    const id = (await send(t.app, org.fullKey, message(org, { scheduled_at: 'in 1 hour' }))).json().id;
    for (const value of ['tomorrow', 'next friday at 9am', 'tomorrow at 9', 'in 0 minutes']) {
      const answers: Array<[string, Awaited<ReturnType<typeof send>>]> = [
        ['scheduled_at', await send(t.app, org.fullKey, message(org, { scheduled_at: value }))],
        [
          'scheduled_at',
          await t.app.inject({
            method: 'PATCH',
            url: `/emails/${id}`,
            headers: bearer(org.fullKey),
            payload: { scheduled_at: value },
          }),
        ],
        // A strict batch names the entry too.
        [
          '0.scheduled_at',
          await sendBatch(t.app, org.fullKey, [message(org, { scheduled_at: value })], {
            'x-batch-validation': 'strict',
          }),
        ],
      ];
      for (const [field, res] of answers) {
        assert.equal(res.statusCode, 400, `${value}: ${res.body}`);
        assert.deepEqual([res.json().name, res.json().field], ['validation_error', field], value);
      }
    }
  });

  test('past MAILROOM_MAX_SCHEDULE_DAYS (30 here) is a 400 naming the limit: sends, batch entries, PATCH, broadcasts', async () => {
    const id = (await send(t.app, org.fullKey, message(org, { scheduled_at: 'in 1 hour' }))).json().id;
    for (const value of ['in 40 days', new Date(Date.now() + 31 * 86_400_000).toISOString(), '9999-12-31T23:59:59Z']) {
      const patch = (payload: object) =>
        t.app.inject({ method: 'PATCH', url: `/emails/${id}`, headers: bearer(org.fullKey), payload });
      const answers: Array<[string, Awaited<ReturnType<typeof send>>]> = [
        ['scheduled_at', await send(t.app, org.fullKey, message(org, { scheduled_at: value }))],
        ['scheduled_at', await patch({ scheduled_at: value })],
        [
          '0.scheduled_at',
          await sendBatch(t.app, org.fullKey, [message(org, { scheduled_at: value })], {
            'x-batch-validation': 'strict',
          }),
        ],
        [
          'scheduled_at',
          await t.app.inject({
            method: 'POST',
            url: '/broadcasts',
            headers: bearer(org.fullKey),
            payload: { from: `hello@${org.domain}`, subject: 'Far', text: 'Far', send: true, scheduled_at: value },
          }),
        ],
      ];
      for (const [field, res] of answers) {
        assert.equal(res.statusCode, 400, `${value}: ${res.body}`);
        assert.deepEqual([res.json().name, res.json().field], ['validation_error', field], value);
        assert.match(res.json().message, /at most 30 days ahead \(MAILROOM_MAX_SCHEDULE_DAYS\)/, value);
      }
      // A batch without strict validation refuses that entry alone.
      const batch = await sendBatch(t.app, org.fullKey, [message(org, { scheduled_at: value }), message(org)]);
      assert.equal(batch.statusCode, 200, batch.body);
      const [refused, accepted] = batch.json().data;
      assert.deepEqual([refused.name, typeof accepted.id], ['validation_error', 'string'], value);
      assert.match(refused.message, /at most 30 days ahead/);
    }
    // Within the limit, the same message is moved.
    assert.equal(
      (
        await t.app.inject({
          method: 'PATCH',
          url: `/emails/${id}`,
          headers: bearer(org.fullKey),
          payload: { scheduled_at: 'in 29 days' },
        })
      ).statusCode,
      200,
    );
  });

  test('the Resend SDK sends with scheduledAt "in 1 min" and moves it to "tomorrow at 9am"', async () => {
    const start = Date.now();
    const sent = await resend.emails.send({
      from: `Acme <hello@${org.domain}>`,
      to: 'someone@example.com',
      subject: 'Later',
      text: 'In a minute',
      scheduledAt: 'in 1 min',
    });
    const end = Date.now();
    assert.equal(sent.error, null, JSON.stringify(sent.error));
    const id = sent.data!.id;
    between(await scheduledAt(id), start, end, 60_000);

    const before = Date.now();
    const moved = await resend.emails.update({ id, scheduledAt: 'tomorrow at 9am' });
    const later = Date.now();
    assert.equal(moved.error, null, JSON.stringify(moved.error));
    assert.ok([tomorrowAtNine(before), tomorrowAtNine(later)].includes(await scheduledAt(id)));

    const refused = await resend.emails.update({ id, scheduledAt: 'someday' });
    assert.equal(refused.error?.name, 'validation_error');
  });
});
