// The Overview's deliverability rates in a real browser against a real server: messages delivered by the
// server's own worker to a loopback SMTP relay that refuses one recipient for good, and a complaint about
// another sent back over SMTP to the server's inbound listener, show as today's delivery, bounce and
// complaint rates (from GET /emails/metrics with the session), each chart with the limits mailbox
// providers and sending services use drawn and labelled, and as a table. Resend's test addresses among
// the recipients (delivered, bounced, complained, all simulated) change none of the rates.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { docScreenshot, signIn, startSendingDashboard, withPage, type SendingDashboard } from './helpers/browser.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { freePort } from './helpers/server-process.ts';
import { feedbackReport } from './helpers/delivery-reports.ts';

const DOMAIN = 'rates.example';
let sending: SendingDashboard;
let sink: SmtpSink;

/** Waits until GET /emails/metrics holds `expected`. */
async function counted(expected: Record<string, number>): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const answer = await sending.api('GET', `/emails/metrics?metrics=${Object.keys(expected).join(',')}`);
    if (JSON.stringify(answer.totals) === JSON.stringify(expected)) return;
    assert.ok(Date.now() < deadline, `outcomes not all recorded: ${JSON.stringify(answer.totals)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  sink.replyToRecipient('gone@example.com', { code: 550, message: '5.1.1 No such user' });
  const inboundPort = await freePort();
  sending = await startSendingDashboard(DOMAIN, {
    env: {
      MAILROOM_TRANSPORT: 'smtp',
      MAILROOM_SMTP_URL: sink.url,
      MAILROOM_RETURN_PATH_DOMAIN: `bounces.${DOMAIN}`,
      MAILROOM_INBOUND_PORT: String(inboundPort),
    },
  });
  const from = `Acme <hello@${DOMAIN}>`;
  await sending.api('POST', '/emails', {
    from,
    to: ['ann@example.com', 'gone@example.com', 'cat@example.com', 'bounced@resend.dev', 'complained@resend.dev'],
    subject: 'Rates',
    text: 'One of each',
  });
  await sending.api('POST', '/emails', {
    from,
    to: ['dan@example.com', 'eve@example.com', 'delivered@resend.dev'],
    subject: 'Rates',
    text: 'Two more delivered',
  });
  // The worker records the outcomes: wait until the API counts the five real ones.
  await counted({ sent: 5, complained: 0 });
  // cat@ complains: an RFC 5965 report to the return path of its copy, at the inbound listener.
  const copy = sink.transactions.find((tx) => tx.rcptTo.includes('cat@example.com'))!;
  const client = nodemailerTransport({ host: '127.0.0.1', port: inboundPort, secure: false, ignoreTLS: true });
  try {
    await client.sendMail({
      envelope: { from: '', to: [copy.mailFrom] },
      raw: feedbackReport(copy.mailFrom, ['Feedback-Type: abuse', 'Version: 1'], { from, to: 'cat@example.com' }),
    });
  } finally {
    client.close();
  }
  await counted({ sent: 5, complained: 1 });
});
after(async () => {
  await sending?.close();
  await sink?.close();
});

test('the Overview shows the delivery, bounce and complaint rates of the mail sent, against the providers’ limits', async (t) => {
  const { dashboard } = sending;
  await withPage(t, dashboard, async ({ page, problems }) => {
    await signIn(page, dashboard.user.email, dashboard.user.password);
    const section = page.getByRole('region', { name: 'Deliverability per day (UTC), last 30 days' });
    await section.waitFor();

    // 5 tried: 4 delivered, 1 bounced; 1 complaint over 4 delivered. The test addresses count nowhere.
    const summary = section.getByRole('definition');
    await summary.first().waitFor();
    assert.deepEqual(await summary.locator('.rate-value').allTextContents(), ['80%', '20%', '25%', '5']);
    // Each rate says where it stands in words, not only by its colour.
    assert.deepEqual(await summary.locator('.rate-verdict').allTextContents(), [
      'Poor: below 95%',
      'Poor: 5% or more',
      'Poor: 0.3% or more',
    ]);

    for (const [name, latest] of [
      ['Delivery rate', '80%'],
      ['Bounce rate', '20%'],
      ['Complaint rate', '25%'],
    ] as const) {
      const chart = section.getByRole('img', { name: `${name} per day (UTC), last 30 days` });
      assert.match((await chart.locator('desc').textContent())!, new RegExp(`^Latest: ${latest} on `));
      assert.equal(await chart.locator('circle.chart-dot').count(), 1, `${name}: one day with mail`);
    }

    // The limits: drawn as lines at their value, tagged in the chart and named under it.
    const complaints = section.getByRole('img', { name: /^Complaint rate per day/ });
    const lineAt = async (value: string) =>
      Number(await complaints.locator(`g.chart-threshold[data-threshold="${value}"] line`).getAttribute('y1'));
    assert.ok((await lineAt('0.3')) < (await lineAt('0.1')), 'the 0.3% line is above the 0.1% line');
    assert.deepEqual(await complaints.locator('g.chart-threshold text').allTextContents(), ['0.1%', '0.3%']);
    assert.deepEqual(
      await section.getByRole('list', { name: 'Complaint rate limits' }).getByRole('listitem').allTextContents(),
      ['0.1%: Gmail and Yahoo ask senders to stay below', '0.3%: Gmail and Yahoo, never reach'],
    );
    const bounces = section.getByRole('img', { name: /^Bounce rate per day/ });
    assert.deepEqual(await bounces.locator('g.chart-threshold text').allTextContents(), ['5%']);
    assert.deepEqual(
      await section.getByRole('list', { name: 'Bounce rate limits' }).getByRole('listitem').allTextContents(),
      ['5%: Amazon SES puts the account under review'],
    );

    await section.scrollIntoViewIfNeeded();
    await docScreenshot(page, 'overview-rates');

    // Every day as a table: today has the rates, the other 29 days had nothing to rate.
    await section.getByRole('button', { name: 'Show the rates as a table' }).click();
    const rows = section.getByRole('table', { name: /Deliverability per day/ }).locator('tbody tr');
    assert.equal(await rows.count(), 30);
    assert.deepEqual(await rows.last().locator('td').allTextContents(), [
      await rows.last().locator('td').first().textContent(),
      '5',
      '4',
      '80%',
      '20%',
      '25%',
    ]);
    assert.deepEqual((await rows.first().locator('td').allTextContents()).slice(1), ['0', '0', '–', '–', '–']);
    assert.deepEqual(problems, []);
  });
});
