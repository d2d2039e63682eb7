// The dashboard's frame in a real browser against a real server: signing in and out, a refused password,
// the navigation at desktop and phone width, an ended session, and the security headers with no
// Content-Security-Policy violation on any page.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  docScreenshot,
  openPage,
  PHONE,
  sessionToken,
  signIn,
  startDashboard,
  waitUntilLoaded,
  withPage,
  type Dashboard,
} from './helpers/browser.ts';
import { DASHBOARD_CSP } from '../src/dashboard/dashboard-routes.ts';
import { waitFor } from './helpers/wait.ts';

let dashboard: Dashboard;
before(async () => {
  dashboard = await startDashboard();
});
after(() => dashboard?.close());

// The navigation's groups and their pages, in order; Overview comes first and Settings last, in none.
const GROUPS = {
  Sending: [
    ['Emails', '/emails'],
    ['Templates', '/templates'],
    ['Broadcasts', '/broadcasts'],
    ['Automations', '/automations'],
    ['Events', '/events'],
  ],
  Audience: [
    ['Topics & contacts', '/topics'],
    ['Segments', '/segments'],
    ['Contact properties', '/contact-properties'],
    ['Contact imports', '/imports'],
    ['Suppressions', '/suppressions'],
  ],
  Receiving: [
    ['Received', '/received'],
    ['Inbound routes', '/inbound-routes'],
  ],
  Deliverability: [
    ['Domains', '/domains'],
    ['Destinations', '/destinations'],
  ],
  Developers: [
    ['API keys', '/api-keys'],
    ['Webhooks', '/webhooks'],
    ['Logs', '/logs'],
  ],
} as const;

const NAV = [['Overview', '/'], ...Object.values(GROUPS).flat(), ['Settings', '/settings']] as const;

describe('signing in and out', () => {
  test('a right password opens the Overview; Sign out returns to the sign-in page', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await page.goto('/');
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await docScreenshot(page, 'sign-in');
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await page.getByText('Acme Test').waitFor(); // the organization, read with the session
      // The token is kept in sessionStorage and never in the address.
      const token = (await sessionToken(page))!;
      assert.match(token, /^mrs_/);
      assert.ok(!page.url().includes(token));
      await docScreenshot(page, 'overview');

      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await page.getByRole('status').filter({ hasText: 'You have signed out.' }).waitFor();
      assert.equal(await sessionToken(page), undefined);
      // The server ended the session too.
      const res = await fetch(`${dashboard.base}/organization`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 401);
      assert.deepEqual(problems, []);
    });
  });

  test('a wrong password is refused in words inside the form; empty fields are named', async (t) => {
    await withPage(t, dashboard, async ({ page }) => {
      await page.goto('/');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByText('Enter the email address you sign in with.').waitFor();
      await page.getByText('Enter your password.').waitFor();
      // Each message is tied to its field.
      const email = page.getByLabel('Email');
      assert.equal(await email.getAttribute('aria-invalid'), 'true');
      const describedBy = (await email.getAttribute('aria-describedby'))!;
      assert.equal(
        await page.locator(`[id="${describedBy}"]`).textContent(),
        'Enter the email address you sign in with.',
      );

      await email.fill(dashboard.user.email);
      await page.getByLabel('Password').fill('not the password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      const alert = page.locator('form').getByRole('alert');
      await alert.waitFor();
      assert.equal((await alert.textContent())?.trim(), 'Email or password is incorrect');
      assert.equal(await page.getByRole('button', { name: 'Sign in' }).isEnabled(), true);
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await docScreenshot(page, 'sign-in-refused');
    });
  });

  test('a session ended elsewhere sends the page back to sign in, saying why, and then to where it was', async (t) => {
    await withPage(t, dashboard, async ({ page }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/domains', 'Domains');
      await waitUntilLoaded(page);
      const token = (await sessionToken(page))!;
      const out = await fetch(`${dashboard.base}/auth/logout`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(out.status, 200);

      // The next request with it (here the organization, read by the frame when the page loads) is refused.
      await page.reload();
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await page.getByText('Your session has expired; sign in again.').waitFor();
      // The notice is kept like the session: a reload of the sign-in page (or a request of the page
      // refused just before a reload) still says why.
      await page.reload();
      await page.getByText('Your session has expired; sign in again.').waitFor();
      await page.getByLabel('Email').fill(dashboard.user.email);
      await page.getByLabel('Password').fill(dashboard.user.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();
    });
  });
});

describe('the frame', () => {
  test('the navigation reaches every page, marks the current one, and an unknown address says so', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      const nav = page.getByRole('navigation', { name: 'Main' });
      for (const [label, address] of NAV) {
        await nav.getByRole('link', { name: label, exact: true }).click();
        await page.getByRole('heading', { level: 1, name: label }).waitFor();
        assert.equal(new URL(page.url()).hash, `#${address}`);
        assert.equal(await nav.getByRole('link', { name: label, exact: true }).getAttribute('aria-current'), 'page');
        // The new page's title has the focus (Overview, shown first, was already open).
        if (address !== '/') assert.equal(await page.evaluate('document.activeElement?.tagName'), 'H1');
      }
      await openPage(page, '/no-such-page', 'Page not found');
      assert.deepEqual(problems, []);
    });
  });

  test('the navigation is in named groups, every page one click away, and a group folds away', async (t) => {
    await withPage(t, dashboard, async ({ page }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      const nav = page.getByRole('navigation', { name: 'Main' });
      assert.deepEqual(await nav.locator('summary').allTextContents(), Object.keys(GROUPS));
      for (const [group, pages] of Object.entries(GROUPS)) {
        const links = nav.locator('details', { has: page.locator('summary', { hasText: group }) }).getByRole('link');
        assert.deepEqual(
          await links.allTextContents(),
          pages.map(([label]) => label),
        );
      }
      // Every page's link is on screen at 1280 px: one click.
      for (const [label] of NAV) {
        assert.equal(await nav.getByRole('link', { name: label, exact: true }).isVisible(), true, label);
      }
      await nav.locator('summary', { hasText: 'Audience' }).click();
      assert.equal(await nav.getByRole('link', { name: 'Segments' }).isVisible(), false, 'folded');
      assert.equal(await nav.getByRole('link', { name: 'Emails' }).isVisible(), true, 'the other groups stay open');
      await nav.locator('summary', { hasText: 'Audience' }).click();
      await nav.getByRole('link', { name: 'Segments' }).waitFor();
    });
  });

  test('at phone width every page is two taps away: Menu, then the page', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        const nav = page.getByRole('navigation', { name: 'Main' });
        for (const [label, address] of NAV) {
          await page.getByRole('button', { name: 'Menu', exact: true }).click();
          await nav.getByRole('link', { name: label, exact: true }).click();
          await page.getByRole('heading', { level: 1, name: label }).waitFor();
          assert.equal(new URL(page.url()).hash, `#${address}`);
        }
      },
      { viewport: PHONE },
    );
  });

  test('at phone width the navigation is behind a Menu button', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        const nav = page.getByRole('navigation', { name: 'Main' });
        const menu = page.getByRole('button', { name: 'Menu' });
        assert.equal(await nav.isVisible(), false);
        assert.equal(await menu.getAttribute('aria-expanded'), 'false');
        await menu.click();
        await nav.waitFor({ state: 'visible' });
        await docScreenshot(page, 'phone-menu');
        await nav.getByRole('link', { name: 'Webhooks' }).click();
        await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
        assert.equal(await nav.isVisible(), false, 'the menu closes once a page is chosen');
        // Nothing is wider than the screen.
        assert.equal(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth'), true);
      },
      { viewport: PHONE },
    );
  });
});

describe('security headers', () => {
  test('/ carries the Content-Security-Policy and the other headers; no page violates the policy', async (t) => {
    const res = await fetch(`${dashboard.base}/`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-security-policy'), DASHBOARD_CSP);
    assert.match(DASHBOARD_CSP, /script-src 'self';/);
    assert.doesNotMatch(DASHBOARD_CSP, /unsafe-inline|unsafe-eval/);
    assert.match(DASHBOARD_CSP, /frame-ancestors 'none'/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    assert.doesNotMatch(html, /https?:\/\//, 'nothing remote');

    const asset = html.match(/src="(\/assets\/[^"]+\.js)"/)![1]!;
    const script = await fetch(`${dashboard.base}${asset}`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type')!, /^text\/javascript/);
    assert.equal(script.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    const missing = await fetch(`${dashboard.base}/assets/nope.js`);
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as { name: string }).name, 'not_found');

    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      for (const [label, address] of NAV) await openPage(page, address, label);
      // A violation would be reported here: prove the listener works by provoking one on purpose.
      assert.deepEqual(problems, []);
      await page.evaluate(`{
        const script = document.createElement('script');
        script.textContent = 'window.inlineRan = true';
        document.body.append(script);
      }`);
      assert.equal(await page.evaluate('window.inlineRan'), undefined);
      // The report comes as an event of its own: waited for, not given a fixed 100 ms.
      await waitFor(() => problems.some((p) => /script-src/.test(p)), 10_000).catch(() =>
        assert.fail(`an inline script is refused and reported: ${problems.join('; ')}`),
      );
    });
  });
});

describe('the code a page costs', () => {
  // What a phone downloads before it shows the first page: at most 150 KiB of script, gzipped as served.
  const FIRST_PAGE_SCRIPT_LIMIT = 150 * 1024;

  test('signing in and the Overview fetch at most 150 KiB of script; another page fetches its own file when opened', async (t) => {
    await withPage(t, dashboard, async ({ page }) => {
      const scripts: Array<{ name: string; encoded: number; encoding: string | undefined }> = [];
      const measuring: Array<Promise<unknown>> = [];
      page.on('requestfinished', (request) => {
        const url = new URL(request.url());
        if (!url.pathname.startsWith('/assets/') || !url.pathname.endsWith('.js')) return;
        // Measured as it crossed the wire (after gzip), which is what a slow connection pays for.
        measuring.push(
          Promise.all([request.sizes(), request.response()]).then(([sizes, response]) =>
            scripts.push({
              name: url.pathname.slice('/assets/'.length),
              encoded: sizes.responseBodySize,
              encoding: response?.headers()['content-encoding'],
            }),
          ),
        );
      });
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await waitUntilLoaded(page);
      await waitFor(() => scripts.some((script) => script.name.startsWith('OverviewPage-')));
      await Promise.all(measuring);
      const firstPage = scripts.reduce((sum, script) => sum + script.encoded, 0);
      t.diagnostic(`first page: ${(firstPage / 1024).toFixed(1)} KiB of script in ${scripts.length} files`);
      assert.ok(firstPage > 10 * 1024, `the sizes were measured (${firstPage} bytes)`);
      assert.ok(firstPage <= FIRST_PAGE_SCRIPT_LIMIT, `${firstPage} bytes of script before the first page`);
      for (const script of scripts) assert.equal(script.encoding, 'gzip', script.name);
      assert.ok(!scripts.some((script) => script.name.startsWith('EmailsPage-')), 'the Emails page waits until opened');

      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Emails', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Emails' }).waitFor();
      await waitFor(() => scripts.some((script) => script.name.startsWith('EmailsPage-')));
    });
  });

  test('a page whose code cannot be fetched says so and offers a reload, and the frame stays', async (t) => {
    await withPage(t, dashboard, async ({ page }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      // As after an upgrade: the file this tab's build names is no longer served.
      await page.route(/\/assets\/TemplatesPage-[^/]+\.js$/, (route) => route.fulfill({ status: 404, body: '' }));
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Templates' }).click();
      const alert = page.getByRole('alert');
      await alert.getByText('This page could not be loaded').waitFor();
      await alert.getByRole('button', { name: 'Reload the dashboard' }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Emails', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Emails' }).waitFor();
    });
  });
});
