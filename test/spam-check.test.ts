import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../src/platform/config.ts';
import type { Logger } from '../src/platform/logger.ts';
import { createSpamChecker, type SpamCheckConfig } from '../src/receiving/spam-check.ts';
import { startRspamd, type Rspamd } from './helpers/rspamd.ts';
import { freePort } from './helpers/server-process.ts';
import { buildTestApp, createTestOrganization } from './helpers/app.ts';
import { startInboundServer } from '../src/inbound/inbound-server.ts';
import { createTransport as smtpClient } from 'nodemailer';

// The spam check against a real rspamd, started once for the file (helpers/rspamd.ts).

let rspamd: Rspamd;
before(async () => {
  rspamd = await startRspamd();
});
after(async () => {
  await rspamd?.stop();
});

const GTUBE = 'XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X';

function message(body: string): Buffer {
  return Buffer.from(
    [
      'From: Jane Doe <jane@example.com>',
      'To: bob@example.org',
      'Subject: Lunch tomorrow',
      'Date: Thu, 26 Nov 2026 10:00:00 +0000',
      'Message-ID: <lunch-1@example.com>',
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      body,
      '',
    ].join('\r\n'),
  );
}

const HAM = message('Hi Bob,\r\n\r\nShall we have lunch tomorrow at noon, at the usual place?\r\n\r\nJane');
const SPAM = message(`Hi Bob,\r\n\r\n${GTUBE}\r\n`);

const settings = (env: Record<string, string> = {}): SpamCheckConfig =>
  loadConfig({ MAILROOM_RSPAMD_URL: rspamd.url, ...env });

/** A logger that keeps what it was told, to check that a missed scan is logged. */
function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (_fields: Record<string, unknown>, text?: string) => void lines.push(text ?? '');
  return { lines, info: keep, warn: keep, error: keep };
}

test('unset MAILROOM_RSPAMD_URL: nothing is scanned', async () => {
  assert.equal(await createSpamChecker(loadConfig({}))(SPAM), null);
  assert.equal(await createSpamChecker()(SPAM), null);
});

test('an ordinary message is ham, with its score, and not quarantined', async () => {
  const verdict = await createSpamChecker(settings())(HAM, {
    clientAddress: '127.0.0.1',
    helo: 'mail.example.com',
    mailFrom: 'jane@example.com',
    recipients: ['bob@example.org'],
  });
  assert.ok(verdict, 'rspamd answered');
  assert.equal(verdict.verdict, 'ham');
  assert.equal(typeof verdict.score, 'number');
  assert.ok(verdict.score < 6, `an ordinary message scores low, got ${verdict.score}`);
  assert.equal(verdict.quarantined, false);
});

test('the envelope reaches rspamd: a client address with no reverse name scores more than none', async () => {
  const check = createSpamChecker(settings());
  const without = await check(HAM);
  const withAddress = await check(HAM, { clientAddress: '203.0.113.5', recipients: ['bob@example.org'] });
  assert.ok(without && withAddress);
  assert.ok(withAddress.score > without.score, `${withAddress.score} > ${without.score}`);
});

test("GTUBE is spam and, by default (rspamd's reject), quarantined", async () => {
  const verdict = await createSpamChecker(settings())(SPAM, { clientAddress: '127.0.0.1' });
  assert.ok(verdict);
  assert.equal(verdict.verdict, 'spam');
  assert.ok(verdict.score >= 15, `GTUBE scores at rspamd's reject threshold, got ${verdict.score}`);
  assert.equal(verdict.quarantined, true);
});

test('MAILROOM_SPAM_QUARANTINE_SCORE decides quarantine instead of rspamd’s action', async () => {
  const lenient = await createSpamChecker(settings({ MAILROOM_SPAM_QUARANTINE_SCORE: '1000' }))(SPAM);
  assert.deepEqual(
    lenient && { verdict: lenient.verdict, quarantined: lenient.quarantined },
    { verdict: 'spam', quarantined: false },
    'spam under the threshold is marked, not quarantined',
  );
  const strict = await createSpamChecker(settings({ MAILROOM_SPAM_QUARANTINE_SCORE: '-50' }))(HAM);
  assert.deepEqual(
    strict && { verdict: strict.verdict, quarantined: strict.quarantined },
    { verdict: 'spam', quarantined: true },
    'at or over the threshold is quarantined, and so counted as spam',
  );
});

test('MAILROOM_SPAM_QUARANTINE_SCORE takes a decimal number and refuses anything else', () => {
  assert.equal(loadConfig({ MAILROOM_SPAM_QUARANTINE_SCORE: '7.5' }).spamQuarantineScore, 7.5);
  assert.equal(loadConfig({}).spamQuarantineScore, undefined);
  assert.throws(() => loadConfig({ MAILROOM_SPAM_QUARANTINE_SCORE: 'high' }), /MAILROOM_SPAM_QUARANTINE_SCORE/);
  assert.throws(() => loadConfig({ MAILROOM_RSPAMD_URL: 'ftp://x' }), /MAILROOM_RSPAMD_URL/);
});

test('rspamd not running: no verdict, at once, and logged', async () => {
  const log = recordingLogger();
  const closed = `http://127.0.0.1:${await freePort()}`;
  const started = Date.now();
  const verdict = await createSpamChecker(loadConfig({ MAILROOM_RSPAMD_URL: closed }), log)(HAM);
  assert.equal(verdict, null);
  assert.ok(Date.now() - started < 1000, `took ${Date.now() - started} ms`);
  assert.match(log.lines.join('\n'), /stored unscanned/);
});

test('rspamd that takes the message and never answers: no verdict once the timeout has passed', async () => {
  const log = recordingLogger();
  const check = createSpamChecker(settings({ MAILROOM_SPAM_CHECK_TIMEOUT_MS: '300' }), log);
  rspamd.pause();
  try {
    const started = Date.now();
    const verdict = await check(HAM);
    const elapsed = Date.now() - started;
    assert.equal(verdict, null);
    assert.ok(elapsed >= 250 && elapsed < 2000, `gave up after the timeout, took ${elapsed} ms`);
    assert.match(log.lines.join('\n'), /did not answer/);
  } finally {
    rspamd.resume();
  }
  // And it answers again once it is back.
  assert.equal((await check(HAM))?.verdict, 'ham');
});

test('through the inbound listener: each message is stored with its verdict; a silent filter costs none', async () => {
  const t = await buildTestApp({ MAILROOM_RSPAMD_URL: rspamd.url, MAILROOM_SPAM_CHECK_TIMEOUT_MS: '500' });
  const org = await createTestOrganization(t.db, t.config, 'spam');
  await t.db.query('UPDATE domains SET receiving = true WHERE organization_id = $1', [org.id]);
  const inbound = await startInboundServer({
    db: t.db,
    signer: t.app.signer,
    host: '127.0.0.1',
    port: 0,
    log: recordingLogger(),
    spamCheck: createSpamChecker(t.config, recordingLogger()),
  });
  const deliver = async (raw: Buffer, subject: string) => {
    const client = smtpClient({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
    try {
      const to = `desk@${org.domain}`;
      const message = Buffer.from(raw.toString('utf8').replace('Subject: Lunch tomorrow', `Subject: ${subject}`));
      return (await client.sendMail({ envelope: { from: 'jane@example.com', to: [to] }, raw: message })).response;
    } finally {
      client.close();
    }
  };
  const stored = async (subject: string) => {
    const { rows } = await t.db.query<{ spam_verdict: string | null; spam_score: number | null; quarantined: boolean }>(
      'SELECT spam_verdict, spam_score, quarantined FROM received_emails WHERE organization_id = $1 AND subject = $2',
      [org.id, subject],
    );
    return rows;
  };
  try {
    await deliver(HAM, 'ham');
    const [ham] = await stored('ham');
    assert.equal(ham?.spam_verdict, 'ham');
    assert.equal(typeof ham?.spam_score, 'number');
    assert.equal(ham?.quarantined, false);

    assert.match(await deliver(SPAM, 'gtube'), /^250 /, 'spam is taken, not refused');
    assert.deepEqual(
      (await stored('gtube')).map((row) => ({ verdict: row.spam_verdict, quarantined: row.quarantined })),
      [{ verdict: 'spam', quarantined: true }],
    );

    rspamd.pause();
    try {
      assert.match(await deliver(SPAM, 'unscanned'), /^250 /, 'a filter that does not answer refuses nothing');
    } finally {
      rspamd.resume();
    }
    assert.deepEqual(await stored('unscanned'), [{ spam_verdict: null, spam_score: null, quarantined: false }]);
  } finally {
    await inbound.close();
    await t.close();
  }
});
