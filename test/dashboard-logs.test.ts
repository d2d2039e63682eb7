// The Logs page in a real browser against a real server: requests made with API keys listed newest first
// (method, path, status, key, duration, time), filtered by status class and path in the address, and one
// request's detail with its bodies, message content redacted. The dashboard's own requests are not listed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  docScreenshot,
  openPage,
  signIn,
  startDashboard,
  waitUntilLoaded,
  withPage,
  type Dashboard,
} from './helpers/browser.ts';
import { waitFor } from './helpers/wait.ts';

const DOMAIN = 'mail.logs-page.example';
let dashboard: Dashboard;
let fullKey = '';
let sendingKey = '';

before(async () => {
  dashboard = await startDashboard({
    organizationName: 'Acme Logs',
    env: { MAILROOM_TRANSPORT: 'capture' },
    async prepare(cli, org) {
      await cli('domain', 'add', '--org', org, DOMAIN);
      await cli('domain', 'verify', '--org', org, DOMAIN, '--trust');
      fullKey = (await cli('key', 'create', '--org', org, '--name', 'backend', '--permission', 'full_access'))
        .token as string;
      sendingKey = (await cli('key', 'create', '--org', org, '--name', 'sender', '--permission', 'sending_access'))
        .token as string;
    },
  });
});
after(() => dashboard?.close());

async function call(token: string, method: string, route: string, body?: unknown): Promise<number> {
  const res = await fetch(`${dashboard.base}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      'user-agent': 'billing-service/2.1',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

describe('logs', () => {
  test('the list, its filters, and a request with its redacted bodies', async (t) => {
    const send = { from: `Billing <billing@${DOMAIN}>`, to: 'ada@example.com', subject: 'Quarterly invoice' };
    assert.equal(await call(fullKey, 'POST', '/emails', { ...send, html: '<p>Secret plan</p>' }), 200);
    assert.equal(await call(fullKey, 'GET', '/domains'), 200);
    assert.equal(await call(fullKey, 'GET', '/emails/00000000-0000-7000-8000-000000000000'), 404);
    assert.equal(await call(sendingKey, 'GET', '/emails'), 401);

    // Entries are written a moment after their answer: wait for the four (read with a session, which the
    // log does not record).
    const login = await fetch(`${dashboard.base}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(dashboard.user),
    });
    const { token: session } = (await login.json()) as { token: string };
    await waitFor(async () => {
      const res = await fetch(`${dashboard.base}/logs`, { headers: { authorization: `Bearer ${session}` } });
      return ((await res.json()) as { data: unknown[] }).data.length === 4;
    }, 10_000);

    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Logs' }).click();
      await page.getByRole('heading', { level: 1, name: 'Logs' }).waitFor();
      await waitUntilLoaded(page);
      const rows = page.locator('main table tbody tr');
      assert.equal(await rows.count(), 4, 'only the API keys’ requests, not the dashboard’s');
      const texts = await rows.allInnerTexts();
      assert.match(texts[0]!, /GET\s+\/emails\s+401\s+sender/);
      assert.match(texts[1]!, /GET\s+\/emails\/00000000-0000-7000-8000-000000000000\s+404\s+backend/);
      assert.match(texts[2]!, /GET\s+\/domains\s+200\s+backend\s+\d+ ms/);
      assert.match(texts[3]!, /POST\s+\/emails\s+200\s+backend/);
      await docScreenshot(page, 'logs');

      await page.getByLabel('Status').selectOption('4xx');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.waitForURL(/status=4xx/);
      await waitUntilLoaded(page);
      await page.locator('main table tbody tr').nth(2).waitFor({ state: 'detached' });
      assert.deepEqual(
        (await rows.allInnerTexts()).map((text) => /\b(\d{3})\b/.exec(text)?.[1]),
        ['401', '404'],
      );

      await page.getByLabel('Path').fill('/emails/');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.waitForURL(/endpoint=%2Femails%2F/);
      await rows.nth(1).waitFor({ state: 'detached' });
      assert.equal(await rows.count(), 1);

      await page.getByRole('button', { name: 'Clear filters' }).first().click();
      await page.waitForURL(/#\/logs$/);
      await rows.nth(3).waitFor();
      await rows.nth(3).getByRole('link', { name: '/emails' }).click();
      await page.getByRole('heading', { level: 1, name: 'POST /emails' }).waitFor();
      await waitUntilLoaded(page);
      const request = page.getByRole('region', { name: 'Request body' });
      await request.getByText('"html": "[redacted]"').waitFor();
      await request.getByText('"subject": "Quarterly invoice"').waitFor();
      assert.equal(await page.getByText('Secret plan').count(), 0, 'message content is never shown');
      await page.getByRole('region', { name: 'Response body' }).getByText('"id":').waitFor();
      await page.getByText('billing-service/2.1').waitFor();
      await docScreenshot(page, 'log');

      assert.deepEqual(problems, []);

      // (Chromium reports the 404 itself on the console, so this comes after the check above.)
      await openPage(page, '/logs/00000000-0000-7000-8000-000000000000', 'Request');
      await page.getByText('No such request').waitFor();
    });
  });
});
