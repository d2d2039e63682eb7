// The Overview, the Emails list and the message page in a real browser against a real server: messages
// sent through the API with a key are delivered by the capture transport (on PGlite and on PostgreSQL),
// found in the list by part of a recipient or of the subject, and read on their page (timeline, sandboxed
// HTML with its inline images, raw source, attachments); a scheduled one is rescheduled and cancelled; a
// message full of script runs none of it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import {
  docScreenshot,
  openPage,
  PHONE,
  signIn,
  startSendingDashboard,
  withPage,
  type Dashboard,
  type SendingDashboard,
} from './helpers/browser.ts';

const DOMAIN = 'acme.example';
let dashboard: Dashboard;
let sending: SendingDashboard;
let callApi: SendingDashboard['api'];

before(async () => {
  sending = await startSendingDashboard(DOMAIN);
  ({ dashboard, api: callApi } = sending);
});
after(() => sending?.close());

async function send(message: Record<string, unknown>): Promise<string> {
  return (await callApi('POST', '/emails', { from: `Acme <receipts@${DOMAIN}>`, ...message })).id as string;
}

async function waitForEvent(id: string, event: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const email = await callApi('GET', `/emails/${id}`);
    if (email.last_event === event) return;
    assert.ok(Date.now() < deadline, `email ${id} is still ${String(email.last_event)}, not ${event}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** No horizontal scrolling of the page itself (tables scroll inside their own region). */
async function assertNoPageOverflow(page: Page): Promise<void> {
  const [scrollWidth, innerWidth] = await page.evaluate<[number, number]>(
    '[document.documentElement.scrollWidth, window.innerWidth]',
  );
  assert.ok(scrollWidth <= innerWidth, `the page is ${scrollWidth}px wide in a ${innerWidth}px window`);
}

const XSS_SUBJECT = `<img src=x onerror="window.__xss=1;alert(1)"><script>window.__xss=1</script>`;
const XSS_HTML = `<p id="greeting">Hello</p>
<script>window.top.__xss = 1; parent.document.title = 'pwned'; alert(1)</script>
<img src=x onerror="window.top.__xss = 1; parent.document.title = 'pwned'">`;

let receiptId = '';
// A 2×2 red PNG, shown in the receipt's HTML by its Content-ID.
const LOGO_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg==';

describe('before anything is sent', () => {
  test('the Overview shows the quota and says how to send the first message', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await page.getByText('Nothing sent yet').waitFor();
      const example = await page.getByLabel('Example: send a message with curl').textContent();
      assert.match(example!, new RegExp(`curl -X POST ${dashboard.base}/emails`));
      assert.match(example!, /\$MAILROOM_KEY/); // the variable, never a key
      assert.equal(await page.getByLabel("This month's quota").getAttribute('value'), '0');
      await page.getByText('messages per second').waitFor();

      await openPage(page, '/emails', 'Emails');
      await page.getByText('No emails yet').waitFor();
      assert.deepEqual(problems, []);
    });
  });

  test('phone width: the Overview and its example fit the screen', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        await page.getByText('Nothing sent yet').waitFor();
        await assertNoPageOverflow(page);
        assert.deepEqual(problems, []);
      },
      { viewport: PHONE },
    );
  });
});

describe('messages sent through the API', () => {
  before(async () => {
    receiptId = await send({
      to: ['Alice <alice@example.com>'],
      cc: ['carol@example.com'],
      subject: 'Your receipt',
      html: '<h1>Thanks for your order</h1><p>Order 1042: <strong>2 items</strong>, €48.00.</p><img id="logo" alt="Acme" src="cid:logo" width="64" height="64">',
      text: 'Thanks for your order. Order 1042: 2 items, €48.00.',
      tags: [{ name: 'category', value: 'receipt' }],
      attachments: [
        { filename: 'receipt.txt', content: Buffer.from('Order 1042\n').toString('base64') },
        { filename: 'logo.png', content: LOGO_PNG, content_id: 'logo' },
      ],
    });
    await send({ to: ['bob@example.com'], subject: 'Welcome aboard', text: 'Hello Bob' });
    await waitForEvent(receiptId, 'delivered');
  });

  test('the Overview counts them: quota used and delivered in the chart, also as a table', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      // Three recipients charged: alice, carol, bob.
      await page.getByText(/^3 of [\d,.\s]+ recipients used$/).waitFor();
      assert.equal(await page.getByLabel("This month's quota").getAttribute('value'), '3');
      const chart = page.getByRole('img', { name: 'Outcomes per hour (UTC), last 24 hours' });
      await chart.waitFor();
      assert.match((await chart.locator('desc').textContent())!, /Delivered: [23]/);
      await page.getByRole('button', { name: 'Show as table' }).click();
      const table = page.getByRole('table', { name: /Outcomes per hour/ });
      assert.equal(await table.locator('tbody tr').count(), 24);
      await page.getByRole('button', { name: '30 days' }).click();
      await page.getByRole('table', { name: /Outcomes per day/ }).waitFor();
      assert.equal(
        await page
          .getByRole('table', { name: /Outcomes per day/ })
          .locator('tbody tr')
          .count(),
        30,
      );
      await page.getByRole('button', { name: 'Hide table' }).click();
      await page.getByRole('button', { name: '24 hours' }).click();
      await page.evaluate('window.scrollTo(0, 0)');
      await docScreenshot(page, 'overview-outcomes');
      assert.deepEqual(problems, []);
    });
  });

  test('the search finds a message by part of a recipient or of the subject; it stays in the address', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/emails', 'Emails');
      const rows = page.locator('table tbody tr');
      await rows.nth(1).waitFor();
      assert.equal(await rows.count(), 2);
      await docScreenshot(page, 'emails');

      // Part of a cc address: the receipt (to alice, cc carol), not the welcome (to bob).
      await page.getByLabel('Search', { exact: true }).fill('Carol');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.waitForURL(/#\/emails\?search=Carol$/);
      await page.getByRole('link', { name: 'Welcome aboard' }).waitFor({ state: 'detached' });
      assert.equal(await rows.count(), 1);
      await page.getByRole('link', { name: 'Your receipt' }).waitFor();
      // Part of a subject.
      await page.getByLabel('Search', { exact: true }).fill('welcome');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.getByRole('link', { name: 'Your receipt' }).waitFor({ state: 'detached' });
      await page.getByRole('link', { name: 'Welcome aboard' }).waitFor();
      // The domain of every recipient; and a % that is not a wildcard.
      await page.getByLabel('Search', { exact: true }).fill('example.com');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.getByRole('link', { name: 'Your receipt' }).waitFor();
      await page.getByRole('link', { name: 'Welcome aboard' }).waitFor();
      await page.getByLabel('Search', { exact: true }).fill('%');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.getByText('No emails match these filters').waitFor();
      await page.getByLabel('Search', { exact: true }).fill('carol');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.getByRole('link', { name: 'Welcome aboard' }).waitFor({ state: 'detached' });

      // A reload keeps the filter; a status filter with nothing in it says so.
      await page.reload();
      assert.equal(await page.getByLabel('Search', { exact: true }).inputValue(), 'carol');
      await page.getByLabel('Status').selectOption('bounced');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.getByText('No emails match these filters').waitFor();
      await page.getByRole('button', { name: 'Clear filters' }).first().click();
      await page.getByRole('link', { name: 'Welcome aboard' }).waitFor();
      assert.deepEqual(problems, []);
    });
  });

  test("the message page: fields, each recipient's delivered entry, sandboxed HTML, text, attachment, raw source", async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      // An address saved before the search existed (recipient=) still finds its messages.
      await openPage(page, '/emails?recipient=alice@example.com', 'Emails');
      await page.getByRole('link', { name: 'Welcome aboard' }).waitFor({ state: 'detached' });
      await page.getByRole('link', { name: 'Your receipt' }).click();
      await page.getByRole('heading', { level: 1, name: 'Your receipt' }).waitFor();
      assert.equal(new URL(page.url()).hash, `#/emails/${receiptId}`);
      await page.getByText('category: receipt').waitFor();

      for (const recipient of ['alice@example.com', 'carol@example.com']) {
        const timeline = page.getByRole('list', { name: `Timeline of ${recipient}` });
        await timeline.getByText('Delivered').waitFor();
        assert.match((await timeline.textContent())!, /captured/);
      }
      await page.getByRole('list', { name: 'Timeline of the message' }).getByText('Accepted').waitFor();

      const frame = page.locator('iframe.preview-frame');
      assert.equal(await frame.getAttribute('sandbox'), '');
      assert.equal(await frame.getAttribute('referrerpolicy'), 'no-referrer');
      assert.ok((await frame.getAttribute('src'))!.startsWith('/previews/'));
      await page.frameLocator('iframe.preview-frame').getByText('Thanks for your order').waitFor();
      // The inline image (cid:logo) shows: loaded, 2×2, without asking for remote content.
      await page.frameLocator('iframe.preview-frame').locator('#logo').waitFor();
      const preview = page.frames().find((f) => f.url().includes('/previews/'))!;
      const loaded = `(() => { const image = document.getElementById('logo');
        return image.complete ? image.naturalWidth : -1; })()`;
      const deadline = Date.now() + 10_000;
      while ((await preview.evaluate<number>(loaded)) === -1 && Date.now() < deadline) await page.waitForTimeout(50);
      assert.equal(await preview.evaluate<number>(loaded), 2); // 0 when the image is broken
      await page.getByRole('button', { name: 'Load remote content' }).click();
      assert.match((await frame.getAttribute('src'))!, /\/previews\/[^?]+\?remote_content=1$/);
      await page.frameLocator('iframe.preview-frame').getByText('Thanks for your order').waitFor();

      assert.match((await page.getByLabel("The message's text").textContent())!, /Order 1042: 2 items/);

      const download = page.getByRole('link', { name: 'receipt.txt' });
      const href = (await download.getAttribute('href'))!;
      assert.ok(href.startsWith(`${dashboard.base}/attachments/`), href);
      const file = await fetch(href); // the signed link is its own credential
      assert.equal(await file.text(), 'Order 1042\n');

      await page.getByRole('button', { name: 'Show raw source' }).click();
      const raw = (await page.getByLabel("The message's raw source").textContent())!;
      assert.match(raw, /^DKIM-Signature: /m);
      assert.match(raw, /^Subject: Your receipt/m);
      await page.evaluate("document.getElementById('email-content').scrollIntoView()");
      await docScreenshot(page, 'email-content');
      await page.evaluate('window.scrollTo(0, 0)');
      await docScreenshot(page, 'email');
      assert.deepEqual(problems, []);
    });
  });

  test('a scheduled message: a time in the past is refused next to the field; reschedule, then cancel', async (t) => {
    const id = await send({
      to: ['later@example.com'],
      subject: 'Reminder',
      text: 'Later',
      scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
    });
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, `/emails/${id}`, 'Reminder');
      // Unsent: no raw source yet, said in words rather than as an error.
      await page.getByRole('button', { name: 'Show raw source' }).click();
      await page
        .locator('.notice')
        .getByText(/only the capture transport .* keeps it, once the message is sent/)
        .waitFor();
      assert.equal(await page.getByRole('alert').count(), 0);

      const when = page.getByLabel('Send at (your local time)');
      await when.fill('2020-01-01T09:00');
      await page.getByRole('button', { name: 'Reschedule' }).click();
      await page.getByText(/scheduled_at must be in the future/).waitFor();
      assert.equal(await when.getAttribute('aria-invalid'), 'true');

      // Ten days ahead, within MAILROOM_MAX_SCHEDULE_DAYS (30), as the field takes it (local time).
      const soon = new Date(Date.now() + 10 * 86_400_000);
      const day = new Date(soon.getTime() - soon.getTimezoneOffset() * 60_000).toISOString().slice(0, 10);
      await when.fill(`${day}T09:30`);
      await page.getByRole('button', { name: 'Reschedule' }).click();
      await page.getByText(/^Rescheduled for /).waitFor();
      const email = await callApi('GET', `/emails/${id}`);
      const inDays = (Date.parse(email.scheduled_at as string) - Date.now()) / 86_400_000;
      assert.ok(inDays > 8 && inDays < 12, String(email.scheduled_at));
      // The timeline says when it was to go, and the move.
      const timeline = page.getByRole('list', { name: 'Timeline of the message' });
      await timeline.getByText(/^Scheduled for /).waitFor();
      await timeline.getByText(/^Rescheduled from .+ to .+/).waitFor();

      await page.getByRole('button', { name: 'Cancel email' }).click();
      await page.getByRole('button', { name: 'Yes, cancel it' }).click();
      await page.locator('.status-badge').filter({ hasText: 'Canceled' }).first().waitFor();
      await page.getByRole('button', { name: 'Reschedule' }).waitFor({ state: 'detached' });
      assert.equal((await callApi('GET', `/emails/${id}`)).last_event, 'canceled');
      // The browser logs the refused requests (404 raw source, 400 past time) it was meant to make.
      const expected = /Failed to load resource: the server responded with a status of (404|400)/;
      assert.deepEqual(
        problems.filter((problem) => !expected.test(problem)),
        [],
      );
    });
  });

  test('phone width: the list and the message page do not scroll sideways; the table scrolls in its region', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        await openPage(page, '/emails', 'Emails');
        await page.getByRole('link', { name: 'Your receipt' }).waitFor();
        await assertNoPageOverflow(page);
        assert.equal(await page.getByRole('region', { name: /Emails/ }).getAttribute('tabindex'), '0');
        // Each message a block: its recipients are shown (not hidden at this width), inside the screen.
        const recipients = page
          .locator('table tbody td[data-label="To"]')
          .filter({ hasText: /alice@example\.com>? \+1$/ });
        await recipients.waitFor();
        const box = (await recipients.boundingBox())!;
        assert.ok(box.x >= 0 && box.x + box.width <= PHONE.width, `the recipients span ${box.x}..${box.x + box.width}`);
        await docScreenshot(page, 'emails-phone');
        await page.getByRole('link', { name: 'Your receipt' }).click();
        await page.getByRole('heading', { level: 1, name: 'Your receipt' }).waitFor();
        await page.getByRole('list', { name: 'Timeline of alice@example.com' }).getByText('Delivered').waitFor();
        await page.getByRole('button', { name: 'Show raw source' }).click();
        await page.getByLabel("The message's raw source").waitFor();
        await assertNoPageOverflow(page);
        assert.deepEqual(problems, []);
      },
      { viewport: PHONE },
    );
  });
});

describe('a message full of script', () => {
  test('runs nothing: not in the list, not on its page, not in its preview', async (t) => {
    const id = await send({
      to: ['"<script>window.__xss=1</script>" <xss@example.com>'],
      subject: XSS_SUBJECT,
      html: XSS_HTML,
      text: '<script>window.__xss=1</script>',
      tags: [{ name: 'note', value: '<img src=x onerror=alert(1)>' }],
    });
    await waitForEvent(id, 'delivered');
    await withPage(t, dashboard, async ({ page, problems }) => {
      const dialogs: string[] = [];
      page.on('dialog', (dialog) => {
        dialogs.push(dialog.message());
        void dialog.dismiss();
      });
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/emails?recipient=xss@example.com', 'Emails');
      const link = page.getByRole('link', { name: XSS_SUBJECT, exact: true });
      await link.waitFor();
      assert.match((await page.locator('table tbody').textContent())!, /<script>window\.__xss=1<\/script>/);
      await link.click();
      await page.getByRole('heading', { level: 1, name: XSS_SUBJECT, exact: true }).waitFor();
      await page.getByText('note: <img src=x onerror=alert(1)>', { exact: true }).waitFor();
      assert.equal(await page.getByLabel("The message's text").textContent(), '<script>window.__xss=1</script>');
      await page.frameLocator('iframe.preview-frame').locator('#greeting').waitFor();
      await page.getByRole('button', { name: 'Load remote content' }).click();
      const preview = page.frameLocator('iframe.preview-frame');
      await preview.locator('#greeting').waitFor();

      const frame = page.locator('iframe.preview-frame');
      assert.equal(await frame.getAttribute('sandbox'), '');
      assert.ok((await frame.getAttribute('src'))!.startsWith('/previews/'));
      // Seen from inside the frame: an opaque origin, and no way into the dashboard's document.
      const inside = page.frames().find((f) => f.url().includes('/previews/'))!;
      assert.ok(inside, 'the preview frame is loaded');
      assert.equal(await inside.evaluate<string>('window.origin'), 'null');
      assert.equal(
        await inside.evaluate<string>(
          `(() => { try { return String(window.parent.document.title); } catch (error) { return error.name; } })()`,
        ),
        'SecurityError',
      );
      // The message's script and handlers did not run there either.
      assert.equal(await inside.evaluate<unknown>('window.__xss'), undefined);

      await page.waitForTimeout(300); // an onerror handler would have fired by now
      assert.equal(await page.evaluate<unknown>('window.__xss'), undefined);
      assert.equal(await page.evaluate<string>('document.title'), `${XSS_SUBJECT} · Mailroom`);
      assert.deepEqual(dialogs, []);
      // The only complaints are the preview's own policy refusing the message's script and image.
      const fromDashboard = problems.filter((problem) => !/previews|sandboxed|Refused to|allow-scripts/.test(problem));
      assert.deepEqual(fromDashboard, []);
    });
  });
});

describe('the search box', () => {
  let invoiceId = '';
  let contactId = '';
  before(async () => {
    invoiceId = await send({ to: ['dora@example.com'], subject: 'Zebra invoice 7', text: 'Invoice' });
    await send({ to: ['dora@example.com'], subject: 'Zebra invoice 8', text: 'Invoice' });
    contactId = (await callApi('POST', '/contacts', { email: 'zebra.keeper@example.org', first_name: 'Zed' }))
      .id as string;
  });

  test('`/` jumps to it; arrows and Enter open a result; Escape closes the list, then clears the box', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/domains', 'Domains');
      await page.keyboard.press('/');
      const box = page.getByRole('combobox', { name: /^Search/ });
      assert.equal(await page.evaluate<string | null>("document.activeElement.getAttribute('role')"), 'combobox');
      await page.keyboard.type('zebra');
      const list = page.getByRole('listbox', { name: 'Search results' });
      const emails = list.getByRole('group', { name: 'Emails' });
      await emails.getByRole('option', { name: /Zebra invoice 8/ }).waitFor();
      assert.deepEqual(
        (await emails.getByRole('option').allTextContents()).map((text) => text.replace(/dora.*$/, '')),
        ['Zebra invoice 8', 'Zebra invoice 7'],
        'newest first',
      );
      await list
        .getByRole('group', { name: 'Contacts' })
        .getByRole('option', { name: /zebra\.keeper/ })
        .waitFor();
      await page.getByRole('status').filter({ hasText: '3 found' }).waitFor();
      await docScreenshot(page, 'search');

      // The first choice is active; one down is the older invoice.
      assert.equal(await emails.getByRole('option').first().getAttribute('aria-selected'), 'true');
      await page.keyboard.press('ArrowDown');
      const older = emails.getByRole('option', { name: /Zebra invoice 7/ });
      assert.equal(await older.getAttribute('aria-selected'), 'true');
      assert.equal(await box.getAttribute('aria-activedescendant'), await older.getAttribute('id'));
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { level: 1, name: 'Zebra invoice 7' }).waitFor();
      assert.match(page.url(), new RegExp(`#/emails/${invoiceId}$`));
      assert.equal(await box.inputValue(), '', 'the box is cleared once a result is opened');

      await page.keyboard.press('Control+k');
      await page.keyboard.type('zebra.keeper@example.org');
      await list.getByRole('option', { name: /zebra\.keeper@example\.org/ }).waitFor();
      await page.keyboard.press('Escape');
      assert.equal(await list.isHidden(), true, 'the first Escape closes the list');
      assert.equal(await box.inputValue(), 'zebra.keeper@example.org');
      await page.keyboard.press('Escape');
      assert.equal(await box.inputValue(), '', 'the second clears the box');

      await box.fill('Zed');
      await list.getByRole('option', { name: /zebra\.keeper/ }).click();
      await page.getByRole('heading', { level: 1, name: /zebra\.keeper@example\.org/ }).waitFor();
      assert.match(page.url(), new RegExp(`#/contacts/${contactId}$`));
      assert.deepEqual(problems, []);
    });
  });

  test('`/` typed into a field stays a character; nothing found says so; the last choice searches every email', async (t) => {
    await withPage(t, dashboard, async ({ page }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/emails', 'Emails');
      const filter = page.getByRole('main').getByRole('searchbox').first();
      await filter.click();
      await page.keyboard.type('a/b');
      assert.equal(await filter.inputValue(), 'a/b');

      const box = page.getByRole('combobox', { name: /^Search/ });
      await box.fill('nothing-like-this');
      await page.getByRole('status').filter({ hasText: 'Nothing found for “nothing-like-this”' }).waitFor();
      const everyEmail = page.getByRole('option', { name: 'Search every email for “nothing-like-this”' });
      assert.equal(await everyEmail.getAttribute('aria-selected'), 'true', 'the only choice, so the active one');
      await box.fill('invoice 8');
      await page.getByRole('option', { name: /Zebra invoice 8/ }).waitFor();
      await page.keyboard.press('ArrowUp'); // from the first choice up wraps to the last
      await page.keyboard.press('Enter');
      await page.waitForURL(/#\/emails\?search=invoice%208$/);
      await page.getByRole('link', { name: 'Zebra invoice 8' }).waitFor();
    });
  });

  test('phone width: the box fits the header and its results fit the screen', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        const box = page.getByRole('combobox', { name: /^Search/ });
        await box.fill('zebra');
        const option = page.getByRole('option', { name: /Zebra invoice 8/ });
        await option.waitFor();
        for (const element of [box, page.getByRole('listbox', { name: 'Search results' })]) {
          const bounds = (await element.boundingBox())!;
          assert.ok(bounds.x >= 0 && bounds.x + bounds.width <= PHONE.width, `${bounds.x} + ${bounds.width}`);
        }
        await option.tap();
        await page.getByRole('heading', { level: 1, name: 'Zebra invoice 8' }).waitFor();
      },
      { viewport: PHONE, hasTouch: true, isMobile: true },
    );
  });
});
