// The Deliverability section (the doctor, Check now) and the DMARC reports section of a domain's page in a real browser against a real server: reports stored
// as the inbound listener leaves them, the pass rate, the failing source first, and the record to publish
// (the rua address at the return-path domain); a domain without reports says how to get them.
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
import { openProcessDatabase } from './helpers/destinations.ts';
import { storeDmarcReport } from '../src/domains/dmarc.ts';

const DOMAIN = 'mail.dmarc-page.example';
const QUIET = 'quiet.dmarc-page.example';
let dashboard: Dashboard;
let domainId = '';
let quietId = '';

before(async () => {
  dashboard = await startDashboard({
    organizationName: 'Acme DMARC',
    // DNS goes to a dead loopback port: the doctor's look-ups fail at once, and nothing leaves the machine.
    env: {
      MAILROOM_RETURN_PATH_DOMAIN: 'bounces.dmarc-page.example',
      MAILROOM_DNS_SERVERS: '127.0.0.1:9',
      MAILROOM_DNS_TIMEOUT_MS: '200',
    },
    async prepare(cli, org, env) {
      domainId = (await cli('domain', 'add', '--org', org, DOMAIN)).id as string;
      await cli('domain', 'verify', '--org', org, DOMAIN, '--trust');
      quietId = (await cli('domain', 'add', '--org', org, QUIET)).id as string;
      await cli('domain', 'verify', '--org', org, QUIET, '--trust');
      const db = await openProcessDatabase(env);
      try {
        const yesterday = new Date(Date.now() - 86_400_000);
        const row = { disposition: 'none', headerFrom: DOMAIN, envelopeFrom: DOMAIN, spfDomain: DOMAIN };
        await storeDmarcReport(db, {
          reporter: 'google.com',
          reporterEmail: 'noreply-dmarc-support@google.com',
          reportId: 'page-1',
          begin: yesterday,
          end: yesterday,
          domain: DOMAIN,
          policy: 'none',
          records: [
            {
              ...row,
              sourceIp: '203.0.113.10',
              messages: 194,
              dkimAligned: true,
              spfAligned: true,
              dkimDomains: [DOMAIN],
            },
            {
              ...row,
              sourceIp: '198.51.100.66',
              messages: 6,
              dkimAligned: false,
              spfAligned: false,
              envelopeFrom: 'spoof.example',
              dkimDomains: [],
            },
          ],
        });
      } finally {
        await db.close();
      }
    },
  });
});
after(() => dashboard?.close());

describe('dmarc', () => {
  test('the pass rate, the failing source first, and the record to publish', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, `/domains/${domainId}`, DOMAIN);
      await waitUntilLoaded(page);
      const section = page.getByRole('region', { name: 'DMARC reports' });
      await section.getByText('passed DMARC').waitFor();
      const intro = (await section.locator('p').first().innerText()).replace(/\s+/g, ' ');
      assert.match(
        intro,
        /^97% of 200 messages from mail\.dmarc-page\.example passed DMARC in the last 30 days \(1 report\)\. The sources that failed come first/,
      );
      const rows = (
        await section
          .getByRole('table', { name: 'DMARC results per source address' })
          .locator('tbody tr')
          .allInnerTexts()
      ).map((row) => row.replace(/\s+/g, ' ').trim());
      assert.equal(rows.length, 2);
      assert.match(
        rows[0]!,
        /^198\.51\.100\.66 Not Mailroom 6 6 DKIM 0 · SPF 0 return path spoof\.example reported by google\.com$/,
      );
      assert.match(
        rows[1]!,
        /^203\.0\.113\.10 194 0 DKIM 194 · SPF 194 return path mail\.dmarc-page\.example signed by mail\.dmarc-page\.example/,
      );
      await section.getByText('v=DMARC1; p=none; rua=mailto:dmarc@bounces.dmarc-page.example').waitFor();
      await section.scrollIntoViewIfNeeded();
      await docScreenshot(page, 'domain-dmarc');
      assert.deepEqual(problems, []);
    });
  });

  test('a domain without reports says how to get them', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, `/domains/${quietId}`, QUIET);
      await waitUntilLoaded(page);
      const section = page.getByRole('region', { name: 'DMARC reports' });
      await section.getByText(`No reports about ${QUIET} in the last 30 days.`).waitFor();
      await section.getByText('v=DMARC1; p=none; rua=mailto:dmarc@bounces.dmarc-page.example').waitFor();
      assert.deepEqual(problems, []);
    });
  });

  test('Check now runs the doctor and lists each finding with its fix, failing ones first', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, `/domains/${quietId}`, QUIET);
      await waitUntilLoaded(page);
      const section = page.getByRole('region', { name: 'Deliverability' });
      await section.getByText('Not checked yet.').waitFor();
      await section.getByRole('button', { name: 'Check now' }).click();
      await section.getByText(/findings? needs? a fix/).waitFor();
      const items = (await section.getByRole('listitem').allInnerTexts()).map((item) =>
        item.replace(/\s+/g, ' ').trim(),
      );
      assert.match(
        items[0]!,
        /^Fails return path mx · bounces\.dmarc-page\.example .*Fix: Point the MX of bounces\.dmarc-page\.example/,
      );
      assert.ok(
        items.some((item) => /^Passes complaint rate · organization/.test(item)),
        items.join('\n'),
      );
      await section.scrollIntoViewIfNeeded();
      await docScreenshot(page, 'domain-health');
      assert.deepEqual(problems, []);
    });
  });
});
