// The Overview in a real browser against a real server: its first-message code sample stays inside its
// box at 1280 px and at 390 px, and its rates are coloured by their value against the providers' lines
// and say so in words: mail a relay refuses is a 0% delivery rate that reads poor (not green), and a
// complaint rate with nothing delivered to divide by is neutral and says "no data".
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { DESKTOP, PHONE, signIn, startSendingDashboard, withPage, type SendingDashboard } from './helpers/browser.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';

const DOMAIN = 'overview.example';
const REFUSED = ['nobody@refused.example', 'gone@refused.example'];
let sink: SmtpSink;
let sending: SendingDashboard;

before(async () => {
  // A relay that refuses both recipients for good (550 at RCPT TO): each is a bounce, nothing is delivered.
  sink = await startSmtpSink({ starttls: false });
  for (const address of REFUSED) sink.replyToRecipient(address, { code: 550, message: '5.1.1 No such user' });
  sending = await startSendingDashboard(DOMAIN, { env: { MAILROOM_TRANSPORT: 'smtp', MAILROOM_SMTP_URL: sink.url } });
});
after(async () => {
  await sending?.close();
  await sink?.close();
});

for (const [size, viewport] of [
  ['1280 px', DESKTOP],
  ['390 px (a phone)', PHONE],
] as const) {
  test(`at ${size}, before anything is sent, every code sample stays inside its box`, async (t) => {
    const { dashboard } = sending;
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        await page.getByLabel('Example: send a message with curl').waitFor();
        const examples = page.getByRole('group', { name: 'Example' }).getByRole('button');
        const tabs = await examples.allTextContents();
        assert.ok(tabs.length >= 2, `the getting-started examples: ${tabs.join(', ')}`);
        // Each example of the getting-started list in turn, with the first message's curl below it.
        for (const tab of tabs) {
          await examples.filter({ hasText: tab }).click();
          const samples = await page.evaluate<
            Array<{ label: string; right: number; box: number; scrolls: boolean; overflowX: string }>
          >(`[...document.querySelectorAll('main pre')].map((sample) => ({
            label: sample.getAttribute('aria-label'),
            right: sample.getBoundingClientRect().right,
            box: sample.parentElement.closest('.card, .empty-state').getBoundingClientRect().right,
            scrolls: sample.scrollWidth > sample.clientWidth,
            overflowX: getComputedStyle(sample).overflowX,
          }))`);
          assert.equal(samples.length, 2, JSON.stringify(samples));
          for (const sample of samples) {
            assert.ok(
              sample.right <= sample.box,
              `${sample.label} ends at ${sample.right}, past its box at ${sample.box}`,
            );
            // What does not fit is scrolled inside the sample (or wrapped), never cut off.
            if (sample.scrolls) assert.equal(sample.overflowX, 'auto', `${sample.label} scrolls inside its box`);
          }
          const pageScrolls = await page.evaluate<boolean>(
            'document.documentElement.scrollWidth > document.documentElement.clientWidth',
          );
          assert.equal(pageScrolls, false, `with the ${tab} example the page does not scroll sideways`);
        }
        assert.match(
          await page.getByLabel('Example: send a message with curl').innerText(),
          /"text": "It works\."\}'$/,
        );
        assert.deepEqual(problems, []);
      },
      { viewport },
    );
  });
}

test('a 0% delivery rate reads poor, not green; a rate with nothing to divide by is neutral, "no data"', async (t) => {
  await sending.api('POST', '/emails', { from: `Acme <hello@${DOMAIN}>`, to: REFUSED, subject: 'Rates', text: 'x' });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const totals = (await sending.api('GET', '/emails/metrics?metrics=sent,bounced')).totals as Record<string, number>;
    if (totals.sent === 2 && totals.bounced === 2) break;
    if (Date.now() >= deadline) {
      const emails = await sending.api('GET', '/emails');
      const first = (emails.data as Array<{ id: string }>)[0];
      const events = first ? await sending.api('GET', `/emails/${first.id}/events`) : {};
      assert.fail(`outcomes not all recorded: ${JSON.stringify(totals)}; ${JSON.stringify(events)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const { dashboard } = sending;
  await withPage(t, dashboard, async ({ page, problems }) => {
    await signIn(page, dashboard.user.email, dashboard.user.password);
    const summary = page.locator('dl[aria-label="Rates over the last 30 days"]');
    await summary.locator('dd').first().waitFor();
    const rates = await page.evaluate<Array<{ name: string; text: string; tone: string | null; colour: string }>>(`
      [...document.querySelectorAll('dl[aria-label="Rates over the last 30 days"] > div')].map((item) => ({
        name: item.querySelector('dt').textContent,
        text: item.querySelector('dd').innerText.replace(/\\s+/g, ' '),
        tone: item.querySelector('dd').getAttribute('data-tone'),
        colour: getComputedStyle(item.querySelector('dd')).color,
      }))`);
    const colours = await page.evaluate<Record<string, string>>(`(() => {
      const style = getComputedStyle(document.documentElement);
      const rgb = (name) => { const probe = document.createElement('span'); probe.style.color = style.getPropertyValue(name); document.body.append(probe); const colour = getComputedStyle(probe).color; probe.remove(); return colour; };
      return { success: rgb('--success'), danger: rgb('--danger'), muted: rgb('--text-muted') };
    })()`);
    assert.deepEqual(
      rates.map(({ name, text, tone }) => [name, text, tone]),
      [
        ['Delivery rate', '0% Poor: below 95%', 'poor'],
        ['Bounce rate', '100% Poor: 5% or more', 'poor'],
        ['Complaint rate', '– No data: nothing delivered', 'none'],
        ['Sent', '2', null],
      ],
    );
    const [delivery, bounce, complaint] = rates;
    assert.equal(delivery!.colour, colours.danger, 'a 0% delivery rate is red');
    assert.notEqual(delivery!.colour, colours.success, 'a 0% delivery rate is not green');
    assert.equal(bounce!.colour, colours.danger);
    assert.equal(complaint!.colour, colours.muted, 'no data is neutral');
    assert.deepEqual(problems, []);
  });
});
