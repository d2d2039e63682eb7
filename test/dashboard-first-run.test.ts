// The first-run checklist on the Overview and "Send a test email", in a real browser against a real
// server: each step ticked from the organization's real state, examples that run as shown (the curl
// command in a shell, the Node one with the `resend` SDK, the Python one, the SMTP settings with
// nodemailer) and send through this server, a test email that is listed and delivered, and a domain's
// DNS records readable and copyable at phone width.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import nodemailer from 'nodemailer';
import type { Page } from 'playwright-core';
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
import { freePort } from './helpers/server-process.ts';
import { waitFor } from './helpers/wait.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const DOMAIN = 'acme.example';
const NEWCOMER = { email: 'new@fresh.example', password: 'another horse battery staple' };

let dashboard: Dashboard;
let dataDir = '';
let smtpPort = 0;
let scratch = '';

before(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-first-run-'));
  await mkdir(path.join(ROOT, 'test-results'), { recursive: true });
  scratch = await mkdtemp(path.join(ROOT, 'test-results', 'first-run-'));
  smtpPort = await freePort();
  const env: Record<string, string> = { MAILROOM_TRANSPORT: 'capture', MAILROOM_SUBMISSION_PORT: String(smtpPort) };
  // On PostgreSQL the captured messages and the submission certificate need a directory of their own.
  if (process.env.DATABASE_URL) env.MAILROOM_DATA_DIR = dataDir;
  dashboard = await startDashboard({
    env,
    async prepare(cli, org) {
      // The owner's organization has a verified domain and no key; the newcomer's has nothing at all.
      await cli('domain', 'add', '--org', org, DOMAIN);
      await cli('domain', 'verify', '--org', org, DOMAIN, '--trust');
      const fresh = await cli('org', 'create', '--name', 'Fresh');
      await cli(
        'user',
        'create',
        '--org',
        fresh.id as string,
        '--email',
        NEWCOMER.email,
        '--password',
        NEWCOMER.password,
      );
    },
  });
});
after(async () => {
  await dashboard?.close();
  await rm(dataDir, { recursive: true, force: true });
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

const checklist = (page: Page) => page.getByRole('region', { name: 'Get started' });

/** The example shown after pressing its button. */
async function example(page: Page, name: string): Promise<string> {
  await checklist(page).getByRole('button', { name, exact: true }).click();
  return (await page.getByLabel(`Example: ${name}`).textContent())!;
}

/** Reads an email with the dashboard's session (a sending key may not read); fails on anything but 200. */
async function readEmail(token: string, id: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${dashboard.base}/emails/${id}`, { headers: { authorization: `Bearer ${token}` } });
  const body = (await res.json()) as Record<string, unknown>;
  assert.equal(res.status, 200, JSON.stringify(body));
  return body;
}

describe('an organization with nothing set up', () => {
  test('nothing is ticked; the examples use this server, a placeholder key and domain; Dismiss hides it for good', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, NEWCOMER.email, NEWCOMER.password);
        const list = checklist(page);
        await list.getByText('0 of 3 done').waitFor();
        for (const step of ['Verify a domain', 'Create an API key', 'Send your first email']) {
          await list.getByRole('heading', { name: `${step} (to do)` }).waitFor();
        }
        await list.getByRole('link', { name: 'Add the domain you send from' }).waitFor();
        const [scrollWidth, innerWidth] = await page.evaluate<[number, number]>(
          '[document.documentElement.scrollWidth, window.innerWidth]',
        );
        assert.ok(scrollWidth <= innerWidth, `the page is ${scrollWidth}px wide in a ${innerWidth}px window`);
        await list.getByText('add and verify one').waitFor(); // no test email without a verified domain
        const curl = await example(page, 'curl');
        assert.match(curl, new RegExp(`^curl -X POST ${dashboard.base}/emails`));
        assert.match(curl, /Bearer mr_\.\.\./);
        assert.match(curl, /"from":"hello@your-verified-domain\.example"/);
        assert.match(curl, /"to":\["new@fresh\.example"\]/);
        const smtp = await example(page, 'SMTP');
        assert.match(smtp, /^Host: +127\.0\.0\.1$/m);
        assert.match(smtp, new RegExp(`^Port: +${smtpPort} \\(STARTTLS\\)$`, 'm'));
        assert.match(smtp, /^User name: mailroom$/m);
        assert.match(smtp, /^Password: +mr_\.\.\.$/m);

        await list.getByRole('button', { name: 'Dismiss' }).click();
        await list.waitFor({ state: 'detached' });
        await page.reload();
        await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
        await page.getByText('Nothing sent yet').waitFor();
        assert.equal(await checklist(page).count(), 0);
        assert.deepEqual(problems, []);
      },
      { viewport: PHONE },
    );
  });
});

test('the checklist and "Send a test email" say when the domains could not be loaded, and try again', async (t) => {
  await withPage(t, dashboard, async ({ page, problems }) => {
    let failing = true;
    await page.route(
      (url) => url.pathname === '/domains',
      (route) =>
        failing
          ? route.fulfill({
              status: 500,
              contentType: 'application/json',
              body: JSON.stringify({ statusCode: 500, name: 'internal_server_error', message: 'Simulated failure' }),
            })
          : route.continue(),
    );
    await signIn(page, NEWCOMER.email, NEWCOMER.password);
    const checklistError = page
      .getByRole('alert')
      .filter({ hasText: 'The getting-started checklist could not be loaded' });
    await checklistError.waitFor();
    assert.equal(await checklist(page).count(), 0);

    await openPage(page, '/emails', 'Emails');
    await page.getByRole('button', { name: 'Send a test email' }).click();
    const form = page.getByRole('form', { name: 'Send a test email' });
    await form.getByRole('alert').filter({ hasText: 'The domains could not be loaded' }).waitFor();
    assert.equal(await form.getByRole('button', { name: 'Send test email' }).isDisabled(), true);
    failing = false;
    await form.getByRole('button', { name: 'Try again' }).click();
    await page.getByText('add and verify one').waitFor(); // the newcomer has no verified domain

    failing = true;
    await openPage(page, '/', 'Overview');
    await checklistError.waitFor();
    failing = false;
    await checklistError.getByRole('button', { name: 'Try again' }).click();
    await checklist(page).getByText('0 of 3 done').waitFor();
    assert.equal(await checklistError.count(), 0);
    // The browser logs the failed requests (500) the test made fail.
    assert.deepEqual(
      problems.filter((problem) => !/status of 500/.test(problem)),
      [],
    );
  });
});

describe("the owner's first run", () => {
  let key = '';

  test('domain ticked; a key made here is shown once and used by the examples; a test email completes the list', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      const list = checklist(page);
      await list.getByText('1 of 3 done').waitFor();
      await list.getByRole('heading', { name: 'Verify a domain (done)' }).waitFor();
      await list.getByText(`You can send from any address at ${DOMAIN}.`).waitFor();

      await list.getByRole('button', { name: 'Create a sending key' }).click();
      key = await page.getByLabel('API key', { exact: true }).inputValue();
      assert.match(key, /^mr_/);
      await list.getByRole('heading', { name: 'Create an API key (done)' }).waitFor();
      await list.getByText('2 of 3 done').waitFor();
      // Dismissing now would throw away the key's only showing.
      assert.equal(await list.getByRole('button', { name: 'Dismiss' }).isDisabled(), true);
      assert.match(await example(page, 'curl'), new RegExp(`Bearer ${key}`));
      assert.match(await example(page, 'curl'), new RegExp(`"from":"hello@${DOMAIN}"`));
      assert.match(await example(page, 'Node.js (resend)'), new RegExp(`new Resend\\('${key}'`));
      await list.getByRole('heading', { name: 'Create an API key (done)' }).scrollIntoViewIfNeeded();
      await page.evaluate("document.querySelector('.first-run .checklist-done + .checklist-step').scrollIntoView()");
      await docScreenshot(page, 'first-run');

      // The test email: from test@ the verified domain to the signed-in user, unless changed.
      assert.equal(await list.getByLabel('From', { exact: true }).inputValue(), `test@${DOMAIN}`);
      assert.equal(await list.getByLabel('Send the test to').inputValue(), dashboard.user.email);
      await list.getByRole('button', { name: 'Send test email' }).click();
      await list.getByText('All done: your organization is sending.').waitFor();
      await list.getByRole('heading', { name: 'Send your first email (done)' }).waitFor();
      const follow = list.getByRole('link', { name: 'Follow it on its page' });
      const emailId = decodeURIComponent((await follow.getAttribute('href'))!.replace(/^#\/emails\//, ''));

      // Each example, run as shown, sends through this server with the new key.
      const sent: string[] = [];
      const { stdout: curlOut } = await run('sh', ['-c', await example(page, 'curl')]);
      sent.push((JSON.parse(curlOut) as { id: string }).id);

      const nodeFile = path.join(scratch, 'send.mjs'); // under the project: `resend` resolves from node_modules
      await writeFile(nodeFile, await example(page, 'Node.js (resend)'));
      sent.push((await run(process.execPath, [nodeFile])).stdout.trim());

      // Python, with the real `requests` (.ci/run installs python3-requests).
      const python = await example(page, 'Python (requests)');
      await writeFile(path.join(scratch, 'send.py'), python);
      const { stdout: pythonOut } = await run('python3', [path.join(scratch, 'send.py')]);
      const pythonMatch = /^200 \{'object': 'email', 'id': '([0-9a-f-]+)'\}|^200 \{'id': '([0-9a-f-]+)'/.exec(
        pythonOut.trim(),
      );
      assert.ok(pythonMatch, pythonOut);
      sent.push((pythonMatch[1] ?? pythonMatch[2])!);

      const smtp = await example(page, 'SMTP');
      const setting = (name: string) => new RegExp(`^${name}:\\s+(\\S+)`, 'm').exec(smtp)![1]!;
      const transport = nodemailer.createTransport({
        host: setting('Host'),
        port: Number(setting('Port')),
        auth: { user: setting('User name'), pass: setting('Password') },
        tls: { rejectUnauthorized: false }, // the listener's own self-signed certificate
      });
      let info;
      try {
        info = await transport.sendMail({
          from: setting('From'),
          to: dashboard.user.email,
          subject: 'Over SMTP',
          text: 'It works.',
        });
      } finally {
        transport.close();
      }
      sent.push(/<([0-9a-f-]{36})>/.exec(info.response)![1]!);

      const session = (await sessionToken(page))!;
      for (const id of sent) assert.equal((await readEmail(session, id)).from, `hello@${DOMAIN}`);
      const test = await readEmail(session, emailId);
      assert.equal(test.subject, 'Test email from Mailroom');
      assert.deepEqual(test.to, [dashboard.user.email]);

      // The test email's page follows it to delivered; the list is gone on the next visit.
      await follow.click();
      await page.getByRole('heading', { level: 1, name: 'Test email from Mailroom' }).waitFor();
      await page
        .getByRole('list', { name: `Timeline of ${dashboard.user.email}` })
        .getByText('Delivered')
        .waitFor();
      await openPage(page, '/', 'Overview');
      await page.getByText('messages per second').waitFor();
      assert.equal(await checklist(page).count(), 0);
      assert.deepEqual(problems, []);
    });
  });

  test('Emails: "Send a test email" to another address; it is listed and found by a part of it', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/emails', 'Emails');
      await page.getByRole('button', { name: 'Send a test email' }).click();
      const form = page.getByRole('form', { name: 'Send a test email' });
      // The From address filled in for you can be cleared, and stays cleared.
      const from = form.getByLabel('From', { exact: true });
      await waitFor(async () => (await from.inputValue()) === `test@${DOMAIN}`, 20_000); // once the domains are in
      await from.fill('');
      await page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
      assert.equal(await from.inputValue(), '');
      await from.fill(`test@${DOMAIN}`);
      await form.getByLabel('Send the test to').fill('not an address');
      await form.getByRole('button', { name: 'Send test email' }).click();
      await form
        .getByText(/Invalid `to` field|not a valid|invalid/i)
        .first()
        .waitFor();
      await form.getByLabel('Send the test to').fill('tester@example.net');
      await form.getByRole('button', { name: 'Send test email' }).click();
      await form.getByText('Sent to tester@example.net.').waitFor();
      await page.locator('table tbody').getByText('tester@example.net').waitFor();

      await page.getByLabel('Search', { exact: true }).fill('tester');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.waitForURL(/#\/emails\?search=tester$/);
      // The unfiltered table stays on screen while the filtered page loads: wait for its other rows to go.
      const rows = page.locator('table tbody tr');
      await rows.nth(1).waitFor({ state: 'detached' });
      await page.locator('table tbody').getByText('tester@example.net').waitFor();
      assert.equal(await rows.count(), 1);
      // The browser logs the refused request (400) it was meant to make.
      assert.deepEqual(
        problems.filter((problem) => !/status of 400/.test(problem)),
        [],
      );
    });
  });
});

test("phone width: a domain's DNS records are each a block, values wrapped inside the screen and copyable", async (t) => {
  await withPage(
    t,
    dashboard,
    async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await page.getByRole('button', { name: 'Menu' }).click();
      await page.getByRole('link', { name: 'Domains' }).click();
      await page.getByRole('link', { name: DOMAIN }).click();
      await page.getByRole('heading', { level: 1, name: DOMAIN }).waitFor();
      const records = page.getByRole('table', { name: `DNS records for ${DOMAIN}` });
      await records.waitFor();
      const [scrollWidth, innerWidth] = await page.evaluate<[number, number]>(
        '[document.documentElement.scrollWidth, window.innerWidth]',
      );
      assert.ok(scrollWidth <= innerWidth, `the page is ${scrollWidth}px wide in a ${innerWidth}px window`);
      // Every value and its copy button lie inside the screen, not in a column scrolled away.
      const values = records.locator('code.dns-value');
      const rows = await records.locator('tbody tr').count();
      assert.ok(rows >= 1);
      assert.equal(await values.count(), 2 * rows); // a name and a value each
      for (let i = 0; i < 2 * rows; i++) {
        const box = (await values.nth(i).boundingBox())!;
        assert.ok(box.x >= 0 && box.x + box.width <= PHONE.width, `value ${i} spans ${box.x}..${box.x + box.width}`);
      }
      const copy = page.getByRole('button', { name: 'Copy DKIM value' });
      const button = (await copy.boundingBox())!;
      assert.ok(button.x + button.width <= PHONE.width);
      await copy.click();
      await page.getByRole('status').filter({ hasText: 'Copied' }).first().waitFor();
      const dkim = (await records
        .locator('tbody tr')
        .filter({ hasText: 'DKIM' })
        .locator('code.dns-value')
        .nth(1)
        .textContent())!;
      assert.equal(await page.evaluate('navigator.clipboard.readText()'), dkim);
      await docScreenshot(page, 'domain-phone');
      assert.deepEqual(problems, []);
    },
    { viewport: PHONE, permissions: ['clipboard-read', 'clipboard-write'] },
  );
});
