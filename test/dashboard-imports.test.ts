// The dashboard's CSV contact import and segment filters in a real browser against a real server: a CSV
// file chosen, its header row mapped (each column's target guessed from its header, contact fields and
// existing properties; one column made a new property), existing contacts left alone and the new ones
// put in a segment; the import's page
// follows it to completed with its counts and shows the row it could not import with why. Then a segment
// with a filter on an imported property: JSON that does not parse refused on the field, a rule the API
// refuses shown with the API's words under it, and the segment made with the number of contacts it
// matches.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Locator, Page } from 'playwright-core';
import {
  docScreenshot,
  openPage,
  signIn,
  startSendingDashboard,
  withPage,
  type SendingDashboard,
} from './helpers/browser.ts';
import { waitFor } from './helpers/wait.ts';

let sending: SendingDashboard;
let api: SendingDashboard['api'];
let importedId = '';

const CSV = [
  'Email,First Name,Last Name,Plan,Seats',
  'ann@example.org,Ann,Lee,pro,3',
  'ben@example.org,Ben,,free,1',
  'not-an-address,Bad,Row,pro,2',
  'old@example.org,Newer,Name,pro,5',
  '',
].join('\r\n');

before(async () => {
  sending = await startSendingDashboard('imports.example');
  api = sending.api;
  await api('POST', '/contact-properties', { key: 'seats', type: 'number' });
  await api('POST', '/contacts', { email: 'old@example.org', first_name: 'Original' });
  importedId = (await api('POST', '/segments', { name: 'Imported' })).id as string;
});
after(() => sending?.close());

const unexpected = (problems: string[]) =>
  problems.filter((problem) => !/Failed to load resource: the server responded with a status of 4\d\d/.test(problem));

/** The text of the field error tied to a labelled control (through aria-describedby). */
async function errorOf(page: Page | Locator, label: string): Promise<string> {
  const control = page.getByLabel(label, { exact: true });
  await waitFor(async () => (await control.getAttribute('aria-invalid')) === 'true');
  const ids = (await control.getAttribute('aria-describedby'))!.split(' ');
  return (await page.locator(`[id="${ids.at(-1)}"]`).textContent()) ?? '';
}

/** A value in the page's details lists, by its label. */
async function detail(page: Page, label: string): Promise<string> {
  const row = page.locator('.detail-row').filter({ has: page.locator('dt', { hasText: new RegExp(`^${label}$`) }) });
  return ((await row.locator('dd').textContent()) ?? '').trim();
}

describe('contact imports and segment filters', () => {
  test('import a CSV file with its columns mapped, follow it to completed, see the row it refused', async (t) => {
    await withPage(t, sending.dashboard, async ({ page, problems }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await openPage(page, '/imports', 'Contact imports');
      await page.getByText('No imports yet').waitFor();
      await page.getByLabel('CSV file', { exact: true }).setInputFiles({
        name: 'contacts.csv',
        mimeType: 'text/csv',
        buffer: Buffer.from(CSV),
      });
      // Each column's target, guessed from its header.
      const guessed: Record<string, string> = {
        'Column “Email”': 'email',
        'Column “First Name”': 'first_name',
        'Column “Last Name”': 'last_name',
        'Column “Plan”': 'skip',
        'Column “Seats”': 'property:seats',
      };
      for (const [label, value] of Object.entries(guessed)) {
        await waitFor(async () => (await page.getByLabel(label).inputValue()) === value);
      }
      // No property is called plan yet: the page makes it before uploading.
      await page.getByLabel('Column “Plan”').selectOption('new:string');
      // Without an email column there is nothing to import: said before anything is uploaded.
      await page.getByLabel('Column “Email”').selectOption('skip');
      await page.getByRole('button', { name: 'Import contacts' }).click();
      await page.getByRole('alert').filter({ hasText: 'Choose the column that holds the email address.' }).waitFor();
      await page.getByLabel('Column “Email”').selectOption('email');

      await page.getByLabel('Contacts already there').selectOption('skip');
      await page.getByLabel('Imported').check();
      await page.getByRole('group', { name: 'Columns' }).scrollIntoViewIfNeeded();
      await docScreenshot(page, 'contact-imports');
      await page.getByRole('button', { name: 'Import contacts' }).click();
      await page.getByRole('heading', { level: 1, name: 'Contact import', exact: true }).waitFor();
      const id = decodeURIComponent(new URL(page.url()).hash.split('/').at(-1)!);

      // Polled until it is finished.
      await page
        .locator('.status-badge')
        .filter({ hasText: /^Completed$/ })
        .waitFor({ timeout: 30_000 });
      const finished = (await api('GET', `/contacts/imports/${id}`)) as {
        counts: Record<string, number>;
      };
      assert.deepEqual(finished.counts, { total: 4, created: 2, updated: 0, skipped: 1, failed: 1 });
      for (const [label, key] of [
        ['Total', 'total'],
        ['Created', 'created'],
        ['Updated', 'updated'],
        ['Skipped', 'skipped'],
        ['Failed', 'failed'],
      ] as const) {
        assert.equal(await detail(page, label), String(finished.counts[key]), label);
      }

      // The refused row, with its column and the API's reason.
      const errors = (await api('GET', `/contacts/imports/${id}/errors`)).data as Array<{
        row: number;
        column: string | null;
        message: string;
      }>;
      assert.equal(errors.length, 1);
      await docScreenshot(page, 'contact-import');
      const errorRow = page.getByRole('table', { name: 'Rows not imported, in file order' }).getByRole('row').nth(1);
      assert.deepEqual(await errorRow.locator('td').allTextContents(), [
        String(errors[0]!.row),
        errors[0]!.column ?? '—',
        errors[0]!.message,
      ]);

      // What was imported: the new contacts with their values, in the segment; the existing one unchanged.
      const ann = await api('GET', '/contacts/ann@example.org');
      assert.equal(ann.first_name, 'Ann');
      assert.deepEqual(ann.properties, { plan: { type: 'string', value: 'pro' }, seats: { type: 'number', value: 3 } });
      assert.equal((await api('GET', '/contacts/old@example.org')).first_name, 'Original');
      const members = (await api('GET', `/segments/${importedId}/contacts`)).data as Array<{ email: string }>;
      assert.deepEqual(members.map((contact) => contact.email).sort(), ['ann@example.org', 'ben@example.org']);

      await openPage(page, '/imports', 'Contact imports');
      const row = page.getByRole('row').filter({ hasText: 'Completed' });
      await row.getByText('2 created, 0 updated, 1 skipped, 1 failed of 4 rows').waitFor();
      assert.equal(((await api('GET', '/contact-properties')).data as unknown[]).length, 2, 'plan was made once');
      assert.deepEqual(unexpected(problems), []);
    });
  });

  // After the import, which made the plan property and gave ann the plan pro.
  test('a segment with a filter: refusals shown on the field, then made with the count it matches', async (t) => {
    await api('POST', '/contacts', { email: 'pat@example.org', properties: { plan: 'pro' } });
    await api('POST', '/contacts', { email: 'sam@example.org', properties: { plan: 'free' } });
    await withPage(t, sending.dashboard, async ({ page, problems }) => {
      await signIn(page, sending.dashboard.user.email, sending.dashboard.user.password);
      await openPage(page, '/segments', 'Segments');
      await page.getByLabel('Segment name').fill('Pro plan');
      await page.getByLabel('Filter (JSON)').fill('{"type": "and", rules: []}');
      await page.getByRole('button', { name: 'Add segment' }).click();
      assert.match(await errorOf(page, 'Filter (JSON)'), /^Not valid JSON/);

      await page
        .getByLabel('Filter (JSON)')
        .fill(
          '{"type": "and", "rules": [{"type": "rule", "field": "properties.plan", "operator": "bogus", "value": "pro"}]}',
        );
      await page.getByRole('button', { name: 'Add segment' }).click();
      const refusal = await errorOf(page, 'Filter (JSON)');
      assert.match(refusal, /operator/);

      await page
        .getByLabel('Filter (JSON)')
        .fill(
          '{"type": "and", "rules": [{"type": "rule", "field": "properties.plan", "operator": "eq", "value": "pro"}]}',
        );
      await page.getByRole('button', { name: 'Add segment' }).click();
      const row = page.getByRole('row').filter({ hasText: 'Pro plan' });
      // The row shows once the segment is made: only then does the API list it.
      await row.getByText('properties.plan eq "pro"').waitFor();
      const expected = ((await api('GET', '/segments')).data as Array<{ name: string; contacts_count: number }>).find(
        (item) => item.name === 'Pro plan',
      )!.contacts_count;
      await row.getByText(expected === 1 ? '1 contact' : `${expected} contacts`).waitFor();
      // ann (imported) and pat match; sam (free) and the imported ben do not.
      assert.equal(expected, 2);
      assert.deepEqual(unexpected(problems), []);
    });
  });
});
