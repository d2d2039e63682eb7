// The dashboard's broadcast pages in a real browser against a real server delivering through the capture
// transport: a broadcast composed from a template and HTML, previewed as one contact of its segment (the
// contact's name filled in), a test copy sent to one address, then sent to the segment, its progress and
// results on its page (delivered, left out by reason) and, once a copy's tracked link is fetched over
// HTTP, the clicked-links table; a broadcast scheduled and canceled back to a draft; and a broadcast
// being sent paused with a reason, the reason shown, resumed until the monthly quota runs out (paused
// again, with the quota as the reason) and canceled.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { simpleParser } from 'mailparser';
import type { Page } from 'playwright-core';
import type { Database } from '../src/platform/db/database.ts';
import { openPGliteDirectory } from '../src/platform/db/pglite.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import {
  docScreenshot,
  openPage,
  sessionToken,
  signIn,
  startSendingDashboard,
  withPage,
  type SendingDashboard,
} from './helpers/browser.ts';
import { waitFor } from './helpers/wait.ts';

const DOMAIN = 'news.example';
/** Contacts of the segment the paused broadcast goes to: more than the monthly quota leaves. */
const LARGE_SEGMENT = 30;
/** The organization's monthly quota: the first test's test copy and two copies fit, the large segment not. */
const MONTHLY_QUOTA = 20;

let sending: SendingDashboard;
let api: SendingDashboard['api'];
let readersId = '';
let largeId = '';
/** A broadcast being sent whose copies are not made yet: queued, with no fan-out job to make them. */
let sendingId = '';

const openDatabase = (env: Record<string, string>): Promise<Database> =>
  env.DATABASE_URL ? Promise.resolve(openPostgres(env.DATABASE_URL, 2)) : openPGliteDirectory(env.MAILROOM_DATA_DIR!);

before(async () => {
  sending = await startSendingDashboard(DOMAIN, {
    // Written before the server starts (a PGlite directory has one user at a time): the quota, the large
    // segment, and a broadcast caught between being sent and its copies being made, so that it can be
    // paused from the page however fast the copies of a real one are made.
    async prepare(env, organizationId) {
      const db = await openDatabase(env);
      try {
        const { rows } = await db.query<{ id: string }>(
          `INSERT INTO segments (organization_id, name) VALUES ($1, 'Everyone') RETURNING id`,
          [organizationId],
        );
        largeId = rows[0]!.id;
        await db.query(
          `WITH made AS (
             INSERT INTO contacts (organization_id, email)
             SELECT $1, 'reader' || n || '@example.net' FROM generate_series(1, $3::int) AS n RETURNING id)
           INSERT INTO contact_segments (contact_id, segment_id) SELECT id, $2 FROM made`,
          [organizationId, largeId, LARGE_SEGMENT],
        );
        await db.query('UPDATE organizations SET monthly_quota = $2 WHERE id = $1', [organizationId, MONTHLY_QUOTA]);
        const sending = await db.query<{ id: string }>(
          `INSERT INTO broadcasts (organization_id, name, segment_id, "from", subject, text, status)
           VALUES ($1, 'Big news', $2, $3, 'Big', 'Big news', 'queued') RETURNING id`,
          [organizationId, largeId, `news@${DOMAIN}`],
        );
        sendingId = sending.rows[0]!.id;
      } finally {
        await db.close();
      }
    },
  });
  api = sending.api;
  // New organizations start with tracking off; the clicked links need it.
  await api('PATCH', '/organization', { open_tracking: true, click_tracking: true });
  readersId = (await api('POST', '/segments', { name: 'Readers' })).id as string;
  for (const contact of [
    { email: 'ada@example.org', first_name: 'Ada' },
    { email: 'bob@example.org' },
    { email: 'carl@example.org', unsubscribed: true },
    { email: 'dora@example.org', first_name: 'Dora' },
  ]) {
    await api('POST', '/contacts', { ...contact, segments: [{ id: readersId }] });
  }
  await api('POST', '/suppressions', { email: 'dora@example.org' });
  await api('POST', '/topics', { name: 'Newsletter', default_subscription: 'opt_in' });
  await api('POST', '/templates', {
    name: 'Monthly',
    subject: 'Our monthly news',
    html: '<p>From the template</p>',
  });
});
after(() => sending?.close());

const unexpected = (problems: string[]) =>
  problems.filter((problem) => !/Failed to load resource: the server responded with a status of 4\d\d/.test(problem));

/** The page's Summary status badge reads `words`. */
async function waitForStatus(page: Page, words: string) {
  await page
    .locator('section[aria-labelledby="summary-title"] .status-badge')
    .filter({ hasText: new RegExp(`^${words}$`) })
    .waitFor();
}

/** The number in a results table's row. */
async function resultOf(page: Page, table: string, label: string): Promise<string> {
  const row = page.getByRole('table', { name: table }).getByRole('row').filter({ hasText: label });
  return ((await row.locator('td').nth(1).textContent()) ?? '').trim();
}

describe('broadcasts', () => {
  test('compose from a template, preview as a contact, send a test, send, follow its progress and results', async (t) => {
    await withPage(t, sending.dashboard, async ({ page, problems }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await openPage(page, '/broadcasts', 'Broadcasts');
      // The broadcast being sent (written before the server started) is listed with its status and segment.
      const big = page.getByRole('row').filter({ hasText: 'Big news' });
      await big.getByText('Sending', { exact: true }).waitFor();
      await big.getByText('Everyone').waitFor();
      await page.getByRole('link', { name: 'New broadcast' }).first().click();
      await page.getByRole('heading', { level: 1, name: 'New broadcast' }).waitFor();

      await page.getByLabel('Start from a template').selectOption({ label: 'Monthly' });
      await page.getByRole('button', { name: 'Use template' }).click();
      await waitFor(
        async () => (await page.getByLabel('Subject', { exact: true }).inputValue()) === 'Our monthly news',
      );
      assert.equal(await page.getByLabel('HTML', { exact: true }).inputValue(), '<p>From the template</p>');

      await page.getByLabel('Name', { exact: true }).fill('November news');
      await page.getByLabel('Segment', { exact: true }).selectOption(readersId);
      await page.getByLabel('Topic', { exact: true }).selectOption({ label: 'Newsletter' });
      await page.getByLabel('From', { exact: true }).fill(`Acme News <news@${DOMAIN}>`);
      await page.getByLabel('Preview text', { exact: true }).fill('What happened this month');
      await page
        .getByLabel('HTML', { exact: true })
        .fill(
          '<p>Hello {{{contact.first_name|there}}},</p><p><a href="https://shop.example.com/offer">The offer</a></p>' +
            '<p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p>',
        );
      await page.getByRole('button', { name: 'Save draft' }).click();
      await page.getByRole('heading', { level: 1, name: 'November news' }).waitFor();
      await waitForStatus(page, 'Draft');
      const id = decodeURIComponent(new URL(page.url()).hash.split('/').at(-1)!);
      const saved = await api('GET', `/broadcasts/${id}`);
      assert.equal(saved.subject, 'Our monthly news');
      assert.equal(saved.segment_id, readersId);
      assert.equal(saved.preview_text, 'What happened this month');

      // As Ada receives it: her name in place of the placeholder.
      await page.getByLabel("Contact's email").fill('ada@example.org');
      await page.getByRole('button', { name: 'Preview', exact: true }).click();
      const frame = page.getByTitle('Preview of the HTML');
      await frame.waitFor();
      assert.match((await frame.getAttribute('srcdoc')) ?? '', /Hello Ada,/);
      assert.equal(await frame.getAttribute('sandbox'), '');
      await page.locator('.rendered-subject').getByText('Our monthly news').waitFor();
      // An address that is no contact's reads the fallbacks.
      await page.getByLabel("Contact's email").fill('stranger@example.com');
      await page.getByRole('button', { name: 'Preview', exact: true }).click();
      await waitFor(async () => /Hello there,/.test((await frame.getAttribute('srcdoc')) ?? ''));
      await page.getByLabel("Contact's email").fill('ada@example.org');
      await page.getByRole('button', { name: 'Preview', exact: true }).click();
      await waitFor(async () => /Hello Ada,/.test((await frame.getAttribute('srcdoc')) ?? ''));
      await page.evaluate("document.getElementById('preview-title').scrollIntoView()");
      await docScreenshot(page, 'broadcast-preview');

      // A test copy to one address, followed on the Emails pages.
      await page.getByLabel('Send a test to').fill('tester@example.com');
      await page.getByRole('button', { name: 'Send test' }).click();
      await page.getByRole('status').filter({ hasText: 'Test sent to tester@example.com' }).waitFor();
      const testLink = page.getByRole('link', { name: 'Follow it' });
      const testId = (await testLink.getAttribute('href'))!.split('/').at(-1)!;
      const testEmail = await api('GET', `/emails/${testId}`);
      assert.deepEqual(testEmail.to, ['tester@example.com']);

      // Sent: Ada and Bob get a copy; Carl (unsubscribed) and Dora (suppressed) are left out.
      await page.getByRole('button', { name: 'Send now' }).click();
      await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Send now' }).click();
      await page.getByRole('heading', { name: /^(Progress|Sending)$/ }).waitFor();
      await page.getByRole('progressbar', { name: 'Copies sent' }).waitFor();
      await waitForStatus(page, 'Sent');
      // Polling stops once every copy has left; their delivered outcomes may come a moment later.
      await waitFor(
        async () => {
          if ((await resultOf(page, 'What the copies became', 'Delivered')) === '2') return true;
          await page.getByRole('button', { name: 'Refresh' }).click();
          return false;
        },
        30_000,
        500,
      );
      await page.getByText(/2 sent, 0 queued, 0 waiting their turn, of 2 recipients/).waitFor();
      assert.equal(await resultOf(page, 'Left out when the audience was taken', 'Unsubscribed from everything'), '1');
      assert.equal(await resultOf(page, 'Left out when the audience was taken', 'On the suppression list'), '1');
      assert.equal(await resultOf(page, 'Left out when the audience was taken', 'Opted out of the topic'), '0');
      await page.getByText('No clicks yet').waitFor();

      // Ada clicks the offer in her copy: the tracked link, fetched over HTTP as her mail client would.
      const adaCopy = (await api('GET', '/emails?search=ada%40example.org')).data as Array<{ id: string }>;
      assert.equal(adaCopy.length, 1);
      const raw = await fetch(`${sending.dashboard.base}/emails/${adaCopy[0]!.id}/raw`, {
        headers: { authorization: `Bearer ${await sessionToken(page)}` },
      });
      assert.equal(raw.status, 200);
      const html = String((await simpleParser(await raw.text())).html);
      const tracked = /href="[^"]*(\/t\/c\/[^"]+)"/.exec(html)?.[1]?.replaceAll('&amp;', '&');
      assert.ok(tracked, html);
      const redirect = await fetch(`${sending.dashboard.base}${tracked}`, { redirect: 'manual' });
      assert.equal(redirect.status, 302);
      assert.equal(redirect.headers.get('location'), 'https://shop.example.com/offer');

      await waitFor(
        async () => {
          if ((await page.getByRole('table', { name: 'Clicked links, most clicked first' }).count()) > 0) return true;
          await page.getByRole('button', { name: 'Refresh' }).click();
          return false;
        },
        15_000,
        500,
      );
      const link = page.getByRole('row').filter({ hasText: 'https://shop.example.com/offer' });
      assert.deepEqual(await link.locator('td').allTextContents(), ['https://shop.example.com/offer', '1', '1']);
      assert.equal(await resultOf(page, 'What the copies became', 'Clicked'), '1 (50%)');
      await page.evaluate("document.getElementById('progress-title').scrollIntoView()");
      await docScreenshot(page, 'broadcast-results');

      // Who clicked, from the recipients list.
      await page.getByLabel('Show who').selectOption('clicked');
      await page.getByRole('table', { name: 'Recipients: clicked' }).getByText('ada@example.org').waitFor();

      await openPage(page, '/broadcasts', 'Broadcasts');
      const row = page.getByRole('row').filter({ hasText: 'November news' });
      await row.getByText('Sent', { exact: true }).waitFor();
      await row.getByText('Readers').waitFor();
      await docScreenshot(page, 'broadcasts');

      // Sent once, duplicated into a new draft with the same name, audience and content.
      await openPage(page, `/broadcasts/${id}`, 'November news');
      await page.getByRole('button', { name: 'Duplicate' }).click();
      await waitFor(async () => !page.url().endsWith(id));
      await waitForStatus(page, 'Draft');
      assert.equal(await page.getByLabel('Segment', { exact: true }).inputValue(), readersId);
      assert.match(await page.getByLabel('HTML', { exact: true }).inputValue(), /The offer/);
      assert.deepEqual(unexpected(problems), []);
    });
  });

  test('schedule a broadcast, then cancel it back to a draft', async (t) => {
    const { id } = (await api('POST', '/broadcasts', {
      name: 'Later news',
      segment_id: readersId,
      from: `news@${DOMAIN}`,
      subject: 'Later',
      html: '<p>Later</p>',
    })) as { id: string };
    await withPage(t, sending.dashboard, async ({ page, problems }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await openPage(page, `/broadcasts/${id}`, 'Later news');
      await waitForStatus(page, 'Draft');
      // Ten days ahead, within MAILROOM_MAX_SCHEDULE_DAYS (30), as the field takes it (local time).
      const soon = new Date(Date.now() + 10 * 86_400_000);
      const day = new Date(soon.getTime() - soon.getTimezoneOffset() * 60_000).toISOString().slice(0, 10);
      await page.getByLabel('Send at').fill(`${day}T09:30`);
      await page.getByRole('button', { name: 'Schedule' }).click();
      await waitForStatus(page, 'Scheduled');
      await page.getByRole('heading', { name: 'Scheduled', level: 2 }).waitFor();
      const scheduled = await api('GET', `/broadcasts/${id}`);
      assert.equal(scheduled.status, 'scheduled');
      const inDays = (Date.parse(scheduled.scheduled_at as string) - Date.now()) / 86_400_000;
      assert.ok(inDays > 8 && inDays < 12, String(scheduled.scheduled_at));

      await page.getByRole('button', { name: 'Cancel schedule' }).click();
      await waitForStatus(page, 'Draft');
      assert.equal((await api('GET', `/broadcasts/${id}`)).status, 'draft');
      // A draft again: it can be sent or scheduled anew.
      await page.getByRole('button', { name: 'Send now' }).waitFor();
      assert.deepEqual(unexpected(problems), []);
    });
  });

  test('pause a sending broadcast with a reason, resume it, see it paused when the quota runs out, cancel', async (t) => {
    await withPage(t, sending.dashboard, async ({ page, problems }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await openPage(page, `/broadcasts/${sendingId}`, 'Big news');
      await waitForStatus(page, 'Sending');
      await page.getByRole('progressbar', { name: 'Copies sent' }).waitFor();
      await page.getByLabel('Reason for pausing').fill('Checking the offer link');
      await page.getByRole('button', { name: 'Pause', exact: true }).click();
      await waitForStatus(page, 'Paused');
      await page.getByRole('status').filter({ hasText: 'Checking the offer link' }).waitFor();
      const paused = await api('GET', `/broadcasts/${sendingId}`);
      assert.equal(paused.status, 'paused');
      assert.equal(paused.pause_reason, 'Checking the offer link');

      // Resumed, its copies are made until the monthly quota runs out: then it pauses by itself, and says why.
      await page.getByRole('button', { name: 'Resume' }).click();
      await page.getByText('Checking the offer link').waitFor({ state: 'detached' });
      await waitForStatus(page, 'Paused');
      await page.getByRole('status').filter({ hasText: 'The monthly quota of this organization is used up' }).waitFor();
      await docScreenshot(page, 'broadcast-paused');
      const stopped = await api('GET', `/broadcasts/${sendingId}`);
      const stats = stopped.stats as { audience: number; pending: number };
      assert.equal(stats.audience, LARGE_SEGMENT);
      assert.ok(stats.pending > 0, 'contacts past the quota wait');

      await page.getByRole('button', { name: 'Cancel broadcast' }).click();
      await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Cancel broadcast' }).click();
      await waitForStatus(page, 'Canceled');
      assert.equal((await api('GET', `/broadcasts/${sendingId}`)).status, 'canceled');
      assert.deepEqual(unexpected(problems), []);
    });
  });
});
