// The Destinations page in a real browser against a real server: sites written into the database as the
// shaper leaves them (a paused provider with its reply, a throttled one below its configured limits, one
// sending with a configured rate), each organization's queue counted for it alone, its own sending
// domain's hold called out with a link to the domain's records and another organization's never shown;
// the empty state on an install that has met no site; and the page at phone width.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import {
  docScreenshot,
  openPage,
  PHONE,
  signIn,
  startDashboard,
  waitUntilLoaded,
  withPage,
  type Dashboard,
} from './helpers/browser.ts';
import { seedDestinations } from './helpers/destinations.ts';

const DOMAIN = 'mail.acme.example';
const OTHER_DOMAIN = 'news.other.example';
const GMAIL_HOLD =
  '421 4.7.28 [203.0.113.5] Gmail has detected an unusual rate of unsolicited mail originating from your IP address. To protect our users from spam, mail sent from your IP address has been temporarily rate limited.';
const DMARC = (domain: string) =>
  `550 5.7.26 Unauthenticated email from ${domain} is not accepted due to domain's DMARC policy. Please contact the administrator of ${domain} domain.`;
const OUTLOOK_THROTTLE =
  '451 4.7.650 The mail server [203.0.113.5] has been temporarily rate limited due to IP reputation.';

let dashboard: Dashboard;
let empty: Dashboard;
let shapingDir: string;
let domainId = '';
const otherUser = { email: 'owner@other.example', password: 'another correct horse battery' };

before(async () => {
  shapingDir = await mkdtemp(path.join(tmpdir(), 'mailroom-destinations-'));
  const shapingFile = path.join(shapingDir, 'shaping.toml');
  // Configured rates, so that the page has them to show (and one lowered by back-off) beside the built-in
  // connection limits.
  await writeFile(
    shapingFile,
    [
      '[site.yahoo]\nmax_message_rate = "600/m"\nmax_connection_rate = "30/m"',
      '[site.microsoft]\nmax_message_rate = "120/m"',
    ].join('\n\n'),
  );
  const now = Date.now();
  // allSettled: if one fails to start, the other is kept for `after` to close instead of left running.
  const started = await Promise.allSettled([
    startDashboard({
      organizationName: 'Acme Destinations',
      env: { MAILROOM_SHAPING_FILE: shapingFile },
      async prepare(cli, org, env) {
        // Sending domains are verified ones: a sender hold is shown to the organization that verified it.
        domainId = (await cli('domain', 'add', '--org', org, DOMAIN)).id as string;
        await cli('domain', 'verify', '--org', org, DOMAIN, '--trust');
        const other = (await cli('org', 'create', '--name', 'Other Org')).id as string;
        await cli('domain', 'add', '--org', other, OTHER_DOMAIN);
        await cli('domain', 'verify', '--org', other, OTHER_DOMAIN, '--trust');
        await cli('user', 'create', '--org', other, '--email', otherUser.email, '--password', otherUser.password);
        // Pauses and leases run hours past the test, so its speed cannot end them early.
        const hours = (n: number) => new Date(now + n * 3600_000);
        await seedDestinations(env, {
          sites: [
            {
              site: 'google',
              connectionLimit: 1,
              pausedUntil: hours(2),
              pauseReason: 'site_paused',
              pauseReply: GMAIL_HOLD,
              throttleReplies: 4,
              lastReply: { code: 421, text: GMAIL_HOLD, at: hours(-0.2) },
            },
            {
              site: 'microsoft',
              connectionLimit: 2,
              messageRate: 60,
              connections: 2,
              throttleReplies: 1,
              lastReply: { code: 451, text: OUTLOOK_THROTTLE, at: hours(-0.5) },
            },
            { site: 'yahoo', connectionLimit: 10, messageRate: 600, connections: 3, expiredConnections: 1 },
            { site: 'mx:mx1.example.net,mx2.example.net', connectionLimit: 10 },
          ],
          senderHolds: [
            { site: 'google', senderDomain: DOMAIN, pausedUntil: hours(0.5), reply: DMARC(DOMAIN) },
            { site: 'google', senderDomain: OTHER_DOMAIN, pausedUntil: hours(0.5), reply: DMARC(OTHER_DOMAIN) },
            // Ended: no longer a hold.
            { site: 'microsoft', senderDomain: DOMAIN, pausedUntil: hours(-1), reply: DMARC(DOMAIN) },
          ],
          recipients: [
            { organizationId: org, site: 'google', count: 2 },
            { organizationId: org, site: 'yahoo', count: 3 },
            { organizationId: org, site: 'yahoo', count: 4, status: 'delivered' },
            { organizationId: other, site: 'google', count: 5 },
          ],
        });
      },
    }),
    startDashboard({ organizationName: 'Acme Empty' }),
  ]);
  const [first, second] = started;
  if (first.status === 'fulfilled') dashboard = first.value;
  if (second.status === 'fulfilled') empty = second.value;
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
});
after(async () => {
  await Promise.all([dashboard?.close(), empty?.close()]);
  await rm(shapingDir, { recursive: true, force: true });
});

/** The cells of the table row whose site cell starts with `site`, as text. */
async function rowOf(page: Page, site: string): Promise<Record<string, string>> {
  const table = page.getByRole('table', { name: 'Destination sites' });
  const headers = await table.locator('thead th').allTextContents();
  const row = table.locator('tbody tr').filter({ has: page.locator('td:first-child', { hasText: site }) });
  assert.equal(await row.count(), 1, `one row for ${site}`);
  const cells = await row.locator('td').allInnerTexts();
  return Object.fromEntries(headers.map((header, i) => [header, cells[i]!.replace(/\s+/g, ' ').trim()]));
}

describe('destinations', () => {
  test('sites with their state, limits and queue; the own domain held, linked to its records', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Destinations' }).click();
      await page.getByRole('heading', { level: 1, name: 'Destinations' }).waitFor();
      await waitUntilLoaded(page);

      const table = page.getByRole('table', { name: 'Destination sites' });
      await table.waitFor();
      // In site order, the MX hosts of an mx: site readable.
      assert.deepEqual(await table.locator('tbody tr td:first-child > :first-child').allTextContents(), [
        'Google (Gmail, Workspace)',
        'Microsoft (Outlook, Microsoft 365)',
        'mx1.example.net, mx2.example.net',
        'Yahoo (Yahoo, AOL)',
      ]);

      const google = await rowOf(page, 'Google');
      assert.match(google.State!, /^Paused until .+ \(in (2 hours|1 hour|\d+ minutes)\)/);
      assert.ok(google.State!.includes('The site is on hold.'), google.State);
      assert.ok(google.State!.includes(`Reply: ${GMAIL_HOLD}`), google.State);
      assert.ok(google.State!.includes('One of your domains is held here'), google.State);
      assert.equal(google.Connections, '0 of 1 lowered from 5 up to 50 messages each');
      assert.equal(google.Rate, 'No limit');
      // Two of this organization's recipients wait; the other organization's five are not counted.
      assert.equal(google.Queued, '2');
      // The reply that paused it, shown once.
      assert.match(
        google['Last throttle reply']!,
        /^The reply shown under State \d+ minutes ago · 4 throttle replies in all$/,
      );

      const microsoft = await rowOf(page, 'Microsoft');
      assert.match(microsoft.State!, /^Throttled Sending below its limits/);
      // Its ended sender hold is not one.
      assert.doesNotMatch(microsoft.State!, /held here/);
      assert.equal(microsoft.Connections, '2 of 2 lowered from 5 up to 50 messages each');
      assert.equal(microsoft.Rate, '60 a minute lowered from 120 a minute');
      assert.equal(microsoft.Queued, '0');
      assert.match(
        microsoft['Last throttle reply']!,
        /^451 4\.7\.650 The mail server .+ \d+ minutes ago · 1 throttle reply in all$/,
      );

      const yahoo = await rowOf(page, 'Yahoo');
      assert.equal(yahoo.State, 'Sending');
      // The slot whose lease ran out is not an open connection.
      assert.equal(yahoo.Connections, '3 of 10 up to 20 messages each');
      assert.equal(yahoo.Rate, '600 a minute new connections: 30 a minute');
      // Pending recipients only: the four delivered are not waiting.
      assert.equal(yahoo.Queued, '3');
      assert.equal(yahoo['Last throttle reply'], 'None');

      assert.equal((await rowOf(page, 'mx1.example.net')).State, 'Sending');

      // The organization's own hold comes first, with the reply and a way to fix it; the other's never.
      const holds = page.getByRole('region', { name: 'Mail from one of your domains is held' });
      const heldItems = holds.getByRole('listitem');
      assert.equal(await heldItems.count(), 1);
      const held = (await heldItems.first().innerText()).replace(/\s+/g, ' ');
      assert.ok(held.startsWith(`${DOMAIN} at Google (Gmail, Workspace), held until `), held);
      assert.ok(held.includes(`The site said: ${DMARC(DOMAIN)}`), held);
      assert.equal(await page.getByText(OTHER_DOMAIN).count(), 0);
      await docScreenshot(page, 'destinations');

      await holds.getByRole('link', { name: `Check the DNS records of ${DOMAIN}` }).click();
      await page.getByRole('heading', { level: 1, name: DOMAIN }).waitFor();
      assert.equal(new URL(page.url()).hash, `#/domains/${domainId}`);
      await page.getByRole('heading', { level: 2, name: 'DNS records to publish' }).waitFor();
      assert.deepEqual(problems, []);
    });
  });

  test("another organization sees its own domain's hold and queue, not this one's", async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, otherUser.email, otherUser.password);
      await openPage(page, '/destinations', 'Destinations');
      await waitUntilLoaded(page);
      assert.equal((await rowOf(page, 'Google')).Queued, '5');
      assert.equal((await rowOf(page, 'Yahoo')).Queued, '0');
      const holds = page.getByRole('region', { name: 'Mail from one of your domains is held' });
      await holds.getByRole('link', { name: `Check the DNS records of ${OTHER_DOMAIN}` }).waitFor();
      assert.equal(await page.getByText(DOMAIN).count(), 0);
      assert.deepEqual(problems, []);
    });
  });

  test('an install that has met no site says what will appear', async (t) => {
    await withPage(t, empty, async ({ page, problems }) => {
      await signIn(page, empty.user.email, empty.user.password);
      await openPage(page, '/destinations', 'Destinations');
      await page.getByText('No destinations yet').waitFor();
      await page.getByText(/appears here once Mailroom delivers to it/).waitFor();
      await page.getByRole('link', { name: 'Send a test email from the Overview' }).waitFor();
      const learnMore = page.getByRole('link', { name: 'Learn more about destinations (opens in a new tab)' });
      assert.equal(await learnMore.getAttribute('href'), '/guide/shaping#seeing-and-steering-destinations');
      const guide = await page.request.get((await learnMore.getAttribute('href'))!);
      assert.equal(guide.status(), 200);
      assert.match(await guide.text(), /id="seeing-and-steering-destinations"/);
      assert.equal(await page.getByRole('table').count(), 0);
      assert.deepEqual(problems, []);
    });
  });

  test('phone width: the page fits, the hold and its link come first, each site a block of labelled values', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        await openPage(page, '/destinations', 'Destinations');
        await waitUntilLoaded(page);
        const link = page.getByRole('link', { name: `Check the DNS records of ${DOMAIN}` });
        await link.waitFor();
        const [scrollWidth, innerWidth] = await page.evaluate<[number, number]>(
          '[document.documentElement.scrollWidth, window.innerWidth]',
        );
        assert.ok(scrollWidth <= innerWidth, `the page is ${scrollWidth}px wide in a ${innerWidth}px window`);
        // The hold is above the table, so it is seen without scrolling past every site.
        const table = page.getByRole('table', { name: 'Destination sites' });
        assert.ok((await link.boundingBox())!.y < (await table.boundingBox())!.y);
        // Stacked, nothing to scroll sideways, and still a table with its cells for a screen reader.
        const region = page.getByRole('region', { name: 'Destination sites' });
        const [inner, outer] = await region.evaluate((el: { scrollWidth: number; clientWidth: number }) => [
          el.scrollWidth,
          el.clientWidth,
        ]);
        assert.ok(inner <= outer, `the sites are ${inner}px wide in a ${outer}px region`);
        assert.equal(await table.getByRole('cell').count(), 4 * 6);
        assert.equal(await table.getByRole('columnheader').count(), 6);
        assert.equal((await rowOf(page, 'Google')).Queued, '2');
        assert.deepEqual(problems, []);
      },
      { viewport: PHONE },
    );
  });
});
