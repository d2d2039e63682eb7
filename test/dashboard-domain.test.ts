// A domain's page tells one story, in a real browser against a real server: the first start's kind of
// domain (example.test, trusted with `domain verify --trust`) reads "Trusted without DNS checks" with
// what that means, never "Verified" over records nobody found; a receiving MX value that is a bare host
// name (a machine called "vm") carries its warning next to the record; and the DNS records table shows
// every column, Status included, at 1280 px and at 390 px.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { DESKTOP, openPage, PHONE, signIn, startDashboard, withPage, type Dashboard } from './helpers/browser.ts';

const DOMAIN = 'example.test';
let dashboard: Dashboard;
let domainId = '';

before(async () => {
  dashboard = await startDashboard({
    // The EHLO name a machine called "vm" has, and so the MX value it offers.
    env: { MAILROOM_HELO_NAME: 'vm' },
    async prepare(cli, org) {
      domainId = (await cli('domain', 'add', '--org', org, DOMAIN)).id as string;
      await cli('domain', 'verify', '--org', org, DOMAIN, '--trust');
    },
  });
  const login = await fetch(`${dashboard.base}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(dashboard.user),
  });
  const { token } = (await login.json()) as { token: string };
  const changed = await fetch(`${dashboard.base}/domains/${domainId}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ capabilities: { receiving: 'enabled' } }),
  });
  assert.equal(changed.status, 200, await changed.text());
});
after(() => dashboard?.close());

/** How far right the DNS table's Status cells (and header) reach, and how far the page lets them be seen. */
async function statusEdges(page: Page) {
  return page.evaluate<{
    cells: number;
    rightmost: number;
    region: number;
    viewport: number;
    scrolls: boolean;
  }>(`(() => {
    const region = document.querySelector('[role="region"][aria-label="DNS records for ${DOMAIN}"]');
    const header = [...region.querySelectorAll('th')].find((th) => th.textContent === 'Status');
    const cells = [...region.querySelectorAll('td[data-label="Status"]')];
    // At phone width the header row is kept for screen readers only, out of the layout.
    const headerShown = getComputedStyle(header.closest('thead')).position !== 'absolute';
    const shown = headerShown ? [header, ...cells] : cells;
    return {
      cells: cells.length,
      rightmost: Math.max(...shown.map((element) => element.getBoundingClientRect().right)),
      region: region.getBoundingClientRect().right,
      viewport: document.documentElement.clientWidth,
      scrolls: region.scrollWidth > region.clientWidth || document.documentElement.scrollWidth > document.documentElement.clientWidth,
    };
  })()`);
}

for (const [size, viewport] of [
  ['1280 px', DESKTOP],
  ['390 px (a phone)', PHONE],
] as const) {
  test(`at ${size}: trusted without DNS checks, the MX warning beside its record, every column in view`, async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        await openPage(page, `/domains/${domainId}`, DOMAIN);
        const main = page.locator('main');
        await main.getByRole('region', { name: `DNS records for ${DOMAIN}` }).waitFor();

        // The state, and what it means: no "Verified" anywhere on the page.
        const notice = page.getByRole('region', { name: 'Trusted without DNS checks' });
        assert.match(await notice.innerText(), /without looking at DNS/);
        assert.match(await notice.innerText(), /reserved name that no DNS provider publishes/);
        assert.equal(await main.locator('.status-badge', { hasText: 'Trusted without DNS checks' }).count(), 1);
        assert.equal(await main.locator('.status-badge', { hasText: /^Verified$/ }).count(), 0);

        // The receiving MX: "vm" with its warning in the table's row and in the Receiving section.
        const row = main.getByRole('row').filter({ hasText: 'Receiving' });
        assert.match(await row.innerText(), /\bvm\b/);
        const warning =
          /Warning: vm is not a public host name \(it is a bare host name, with no dot\).*Set MAILROOM_MX_HOST/s;
        assert.match(await row.locator('.record-warning').innerText(), warning);
        const receiving = page.getByRole('region', { name: 'Receiving' });
        assert.match(await receiving.locator('.record-warning').innerText(), warning);
        // Only the MX value warns: the other records point at nothing of this server's.
        assert.equal(
          await main
            .getByRole('region', { name: `DNS records for ${DOMAIN}` })
            .locator('.record-warning')
            .count(),
          1,
        );

        const edges = await statusEdges(page);
        assert.equal(edges.cells, 4, 'DKIM, SPF, the receiving MX and DMARC');
        assert.ok(
          edges.rightmost <= edges.viewport,
          `the Status column ends at ${edges.rightmost}, past ${edges.viewport}`,
        );
        assert.ok(
          edges.rightmost <= edges.region,
          `the Status column ends at ${edges.rightmost}, past its table at ${edges.region}`,
        );
        assert.equal(edges.scrolls, false, 'nothing scrolls sideways');
        assert.deepEqual(problems, []);
      },
      { viewport },
    );
  });
}

test('the domains list says trusted, and that no record was checked', async (t) => {
  await withPage(t, dashboard, async ({ page, problems }) => {
    await signIn(page, dashboard.user.email, dashboard.user.password);
    await openPage(page, '/domains', 'Domains');
    const row = page.getByRole('row').filter({ hasText: DOMAIN });
    await row.waitFor();
    const cells = await row.getByRole('cell').allInnerTexts();
    assert.deepEqual(cells.slice(0, 3), [DOMAIN, 'Trusted without DNS checks', 'Not checked yet']);
    assert.deepEqual(problems, []);
  });
});
