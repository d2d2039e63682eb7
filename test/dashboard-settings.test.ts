// Settings and Suppressions in a real browser against a real server: the tracking switches are saved
// and read back after a reload, the organization's id can be copied, and an address is added to and
// taken off the suppression list, with a bad address refused next to its field.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  docScreenshot,
  openPage,
  PHONE,
  sessionToken,
  signIn,
  startDashboard,
  withPage,
  type Dashboard,
} from './helpers/browser.ts';

let dashboard: Dashboard;
before(async () => {
  dashboard = await startDashboard({ organizationName: 'Acme Settings' });
});
after(() => dashboard?.close());

async function organization(token: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${dashboard.base}/organization`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, unknown>;
}

describe('settings', () => {
  test('shows the organization and saves the tracking switches', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/settings', 'Settings');
      await page.getByText(dashboard.organizationId, { exact: true }).waitFor();
      await page.getByRole('button', { name: 'Copy organization id' }).click();
      await page
        .getByRole('status')
        .filter({ hasText: /^Copied$/ })
        .waitFor();

      const token = (await sessionToken(page))!;
      const before = await organization(token);
      const opens = page.getByLabel('Track opens');
      assert.equal(await opens.isChecked(), before.open_tracking);
      await opens.click();
      await page.getByText(`Saved: Open tracking is ${before.open_tracking ? 'off' : 'on'}.`).waitFor();
      assert.equal((await organization(token)).open_tracking, !before.open_tracking);

      const clicks = page.getByLabel('Track clicks');
      await clicks.click();
      await page.getByText(`Saved: Click tracking is ${before.click_tracking ? 'off' : 'on'}.`).waitFor();
      const after = await organization(token);
      assert.equal(after.click_tracking, !before.click_tracking);
      assert.equal(after.open_tracking, !before.open_tracking);

      await page.reload();
      await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
      await page.getByText(dashboard.organizationId, { exact: true }).waitFor();
      assert.equal(await page.getByLabel('Track opens').isChecked(), !before.open_tracking);
      assert.equal(await page.getByLabel('Track clicks').isChecked(), !before.click_tracking);
      await docScreenshot(page, 'settings');
      assert.deepEqual(problems, []);
    });
  });
});

describe('suppressions', () => {
  test('empty, add (a bad address is refused at its field), remove', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/suppressions', 'Suppressions');
      await page.getByText('No suppressed addresses').waitFor();

      const field = page.getByLabel('Address to suppress');
      await field.fill('not an address');
      // Checked by the API (the form leaves the browser's check out), its message shown at the field.
      await page.getByRole('button', { name: 'Add to list' }).click();
      await page.locator('form[aria-label="Suppress an address"] input[aria-invalid="true"]').waitFor();
      const errorId = (await field.getAttribute('aria-describedby'))!;
      assert.match((await page.locator(`[id="${errorId}"]`).textContent())!, /address/i);
      await page.getByRole('table').waitFor({ state: 'detached' });

      for (const address of ['bounced@example.com', 'Ann@Example.com']) {
        await field.fill(address);
        await page.getByRole('button', { name: 'Add to list' }).click();
        await page.getByText(/is suppressed: nothing will be sent to it\.$/).waitFor();
      }
      const rows = page.locator('table tbody tr');
      await rows.nth(1).waitFor();
      assert.match((await rows.nth(0).textContent())!, /bounced@example\.com.*Added by hand/);
      await docScreenshot(page, 'suppressions');

      await page.getByRole('button', { name: 'Remove bounced@example.com' }).click();
      await page.getByText('Take bounced@example.com off the list? The next message to it will be sent.').waitFor();
      await page.getByRole('button', { name: 'Remove', exact: true }).click();
      await page.getByText('bounced@example.com was removed from the list.').waitFor();
      await page.getByRole('button', { name: 'Remove bounced@example.com' }).waitFor({ state: 'detached' });
      assert.equal(await rows.count(), 1);

      const res = await fetch(`${dashboard.base}/suppressions`, {
        headers: { authorization: `Bearer ${(await sessionToken(page))!}` },
      });
      const list = (await res.json()) as { data: Array<{ email: string }> };
      assert.deepEqual(
        list.data.map((entry) => entry.email),
        ['ann@example.com'],
      );
      // The refused address left one logged 400 in the console; nothing else.
      assert.deepEqual(
        problems.filter((problem) => !/status of 400/.test(problem)),
        [],
      );
    });
  });

  test('phone width: Settings and the list fit, and the actions are reachable', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        await openPage(page, '/suppressions', 'Suppressions');
        await page
          .getByRole('button', { name: /^Remove / })
          .first()
          .waitFor();
        const [scrollWidth, innerWidth] = await page.evaluate<[number, number]>(
          '[document.documentElement.scrollWidth, window.innerWidth]',
        );
        assert.ok(scrollWidth <= innerWidth, `the page is ${scrollWidth}px wide in a ${innerWidth}px window`);
        await openPage(page, '/settings', 'Settings');
        await page.getByRole('button', { name: 'Copy organization id' }).waitFor();
        const widths = await page.evaluate<[number, number]>(
          '[document.documentElement.scrollWidth, window.innerWidth]',
        );
        assert.ok(widths[0] <= widths[1], `Settings is ${widths[0]}px wide in a ${widths[1]}px window`);
        assert.deepEqual(problems, []);
      },
      { viewport: PHONE },
    );
  });
});
