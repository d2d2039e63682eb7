// The Sources section of the Destinations page in a real browser against a real server whose shaping
// file declares egress sources, pools and routing: each source with where it sends from, the pool this
// organization's mail goes through (by its sending domain), and a warming source's stage and day at two
// providers as the shaper leaves them in the database. An install without sources shows no section.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  docScreenshot,
  openPage,
  signIn,
  startDashboard,
  waitUntilLoaded,
  withPage,
  type Dashboard,
} from './helpers/browser.ts';
import { seedDestinations } from './helpers/destinations.ts';

const DOMAIN = 'mail.sources.example';
let dashboard: Dashboard;
let plain: Dashboard;
let shapingDir: string;

before(async () => {
  shapingDir = await mkdtemp(path.join(tmpdir(), 'mailroom-sources-'));
  const shapingFile = path.join(shapingDir, 'shaping.toml');
  await writeFile(
    shapingFile,
    `
[source.mta1]
address = "192.0.2.10"
ehlo = "mta1.sources.example"

[source.fresh]
address = "192.0.2.11"
ehlo = "fresh.sources.example"
warmup = true

[source.esp]
relay = "smtp://user:hunter2@smtp.esp.example:587"

[pool.shared]
sources = ["mta1"]

[pool.warming]
sources = ["fresh"]
overflow = "esp"
[pool.warming.sites]
microsoft = "shared"

[routing]
default_pool = "shared"
[routing.domains]
"${DOMAIN}" = "warming"
`,
  );
  const today = new Date().toISOString().slice(0, 10);
  // Both started before either fails the hook, so that a failing start leaves no server behind.
  const started = await Promise.allSettled([
    startDashboard({
      organizationName: 'Acme Sources',
      // Capture on both databases: the mx transport would refuse documentation addresses this host lacks.
      env: { MAILROOM_SHAPING_FILE: shapingFile, MAILROOM_TRANSPORT: 'capture' },
      async prepare(cli, org, env) {
        await cli('domain', 'add', '--org', org, DOMAIN);
        await cli('domain', 'verify', '--org', org, DOMAIN, '--trust');
        await seedDestinations(env, {
          sites: [
            { site: 'google', source: 'fresh', connectionLimit: 5 },
            { site: 'google', source: 'mta1', connectionLimit: 5 },
          ],
          warmup: [
            {
              source: 'fresh',
              site: 'google',
              stage: 2,
              day: today,
              sent: 150,
              delivered: 148,
              deferred: 2,
              lastChange: `${today}: stage 2 (500 a day) delivered 480 (over 90%), deferred 0.4%: advanced to stage 3 (1000 a day)`,
              changedAt: new Date(),
            },
            {
              source: 'fresh',
              site: 'yahoo',
              stage: 0,
              day: today,
              sent: 12,
              delivered: 10,
              blocked: true,
              lastChange: `${today}: blocked (553 5.7.2 [TSS09] All messages from 192.0.2.11 will be permanently deferred): back to stage 1 (200 a day)`,
              changedAt: new Date(),
            },
          ],
        });
      },
    }),
    startDashboard({ organizationName: 'Acme Plain' }),
  ]);
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) {
    await Promise.all(started.map((result) => (result.status === 'fulfilled' ? result.value.close() : undefined)));
    throw failed.reason;
  }
  [dashboard, plain] = started.map((result) => (result as PromiseFulfilledResult<Dashboard>).value) as [
    Dashboard,
    Dashboard,
  ];
});
after(async () => {
  await Promise.all([dashboard?.close(), plain?.close()]);
  await rm(shapingDir, { recursive: true, force: true });
});

describe('sources', () => {
  test('the sources, the pool of this organization’s mail, and the warm-up per site', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/destinations', 'Destinations');
      await waitUntilLoaded(page);
      const section = page.getByRole('region', { name: 'Sources', exact: true });
      await section.waitFor();
      const intro = (await section.locator('p').first().innerText()).replace(/\s+/g, ' ');
      assert.equal(
        intro,
        "The addresses and relays mail leaves from. Your mail goes through pool warming (fresh; over a warming source's allowance: esp; Microsoft (Outlook, Microsoft 365) through pool shared).",
      );
      const sources = section.getByRole('table', { name: 'Egress sources' });
      const rows = await sources.locator('tbody tr').allInnerTexts();
      assert.deepEqual(
        rows.map((row) => row.replace(/\s+/g, ' ').trim()),
        [
          'mta1 192.0.2.10 EHLO mta1.sources.example shared Warm',
          'fresh 192.0.2.11 EHLO fresh.sources.example warming Warming up',
          'esp Relay smtp.esp.example:587 warming Warm',
        ],
      );
      // The relay's credentials never reach the page.
      assert.equal(await page.getByText('hunter2').count(), 0);

      const warmup = section.getByRole('table', { name: 'Warm-up per source and site' });
      const warmRows = (await warmup.locator('tbody tr').allInnerTexts()).map((row) => row.replace(/\s+/g, ' ').trim());
      assert.equal(warmRows.length, 2);
      assert.match(
        warmRows[0]!,
        /^fresh Google \(Gmail, Workspace\) 3 of 18 1,000 a day 150 sent of [\d,]+ released so far 148 delivered · 2 deferred .*advanced to stage 3/,
      );
      assert.match(
        warmRows[1]!,
        /^fresh Yahoo \(Yahoo, AOL\) 1 of 18 200 a day 12 sent of [\d,]+ released so far 10 delivered · 0 deferred · blocked today .*blocked \(553 5\.7\.2 \[TSS09\]/,
      );
      await section.scrollIntoViewIfNeeded();
      await docScreenshot(page, 'destinations-sources');
      assert.deepEqual(problems, []);
    });
  });

  test('an install without sources shows no Sources section', async (t) => {
    await withPage(t, plain, async ({ page, problems }) => {
      await signIn(page, plain.user.email, plain.user.password);
      await openPage(page, '/destinations', 'Destinations');
      await waitUntilLoaded(page);
      await page.getByText('No destinations yet').waitFor();
      assert.equal(await page.getByRole('region', { name: 'Sources', exact: true }).count(), 0);
      assert.deepEqual(problems, []);
    });
  });
});
