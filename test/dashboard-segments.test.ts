// The dashboard's contact properties and segments in a real browser against a real server: a property
// and a segment made and deleted on their pages, and on a contact's page its property values (a wrong
// type refused on the field) and its segments, with the members count the Segments page shows.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Locator, Page } from 'playwright-core';
import { docScreenshot, openPage, signIn, startDashboard, withPage, type Dashboard } from './helpers/browser.ts';
import { waitFor } from './helpers/wait.ts';

let dashboard: Dashboard;
/** A session of the dashboard's user, for API calls the test makes itself. */
let token: string;

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${dashboard.base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers read field by field
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, any>) : undefined };
}

before(async () => {
  dashboard = await startDashboard();
  const login = await fetch(`${dashboard.base}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(dashboard.user),
  });
  token = ((await login.json()) as { token: string }).token;
});
after(() => dashboard?.close());

const unexpected = (problems: string[]) =>
  problems.filter((problem) => !/Failed to load resource: the server responded with a status of 4\d\d/.test(problem));

/** The text of the field error tied to a labelled control (through aria-describedby). */
async function errorOf(page: Page | Locator, label: string): Promise<string> {
  const control = page.getByLabel(label, { exact: true });
  await waitFor(async () => (await control.getAttribute('aria-invalid')) === 'true');
  const ids = (await control.getAttribute('aria-describedby'))!.split(' ');
  return (await page.locator(`[id="${ids.at(-1)}"]`).textContent()) ?? '';
}

describe('contact properties and segments', () => {
  test('add a property and a segment, set a contact’s value and segment on its page, delete both', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);

      await openPage(page, '/contact-properties', 'Contact properties');
      await page.getByText('No contact properties yet').waitFor();
      await page.getByLabel('Key', { exact: true }).fill('1st');
      await page.getByRole('button', { name: 'Add property' }).click();
      assert.match(await errorOf(page, 'Key'), /letters, digits and underscores/);
      await page.getByLabel('Key', { exact: true }).fill('company');
      await page.getByLabel('Fallback value').fill('your company');
      await page.getByRole('button', { name: 'Add property' }).click();
      await page.locator('td code').getByText('company', { exact: true }).waitFor();
      await page.getByLabel('Key', { exact: true }).fill('seats');
      await page.getByLabel('Type').selectOption('number');
      await page.getByRole('button', { name: 'Add property' }).click();
      await page.locator('td code').getByText('seats', { exact: true }).waitFor();
      await docScreenshot(page, 'contact-properties');

      await openPage(page, '/segments', 'Segments');
      await page.getByText('No segments yet').waitFor();
      await page.getByLabel('Segment name').fill('Customers');
      await page.getByRole('button', { name: 'Add segment' }).click();
      const row = page.getByRole('row').filter({ hasText: 'Customers' });
      await row.getByText('0 contacts').waitFor();

      const contact = await call('POST', '/contacts', { email: 'ada@example.org' });
      assert.equal(contact.status, 201);
      await openPage(page, `/contacts/${contact.body!.id}`, 'ada@example.org');
      assert.equal(await page.getByLabel('company', { exact: true }).getAttribute('placeholder'), 'your company');
      await page.getByLabel('company', { exact: true }).fill('Analytical Engines');
      await page.getByLabel('seats', { exact: true }).fill('three');
      await page.getByRole('button', { name: 'Save properties' }).click();
      assert.match(await errorOf(page, 'seats'), /must be a number/);
      await page.getByLabel('seats', { exact: true }).fill('3');
      await page.getByRole('button', { name: 'Save properties' }).click();
      await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
      assert.deepEqual((await call('GET', '/contacts/ada@example.org')).body!.properties, {
        company: { type: 'string', value: 'Analytical Engines' },
        seats: { type: 'number', value: 3 },
      });

      const membership = page.getByLabel('Customers');
      assert.equal(await membership.isChecked(), false);
      await membership.check();
      await waitFor(async () => (await membership.isEnabled()) && (await membership.isChecked()));
      const segments = await call('GET', '/contacts/ada@example.org/segments');
      assert.deepEqual(
        segments.body!.data.map((item: { name: string }) => item.name),
        ['Customers'],
      );

      await openPage(page, '/segments', 'Segments');
      await row.getByText('1 contact').waitFor();
      await docScreenshot(page, 'segments');
      // The header's primary action brings the form to the keyboard.
      await page.getByRole('button', { name: 'New segment' }).click();
      assert.equal(
        await page.evaluate<string | null>("document.activeElement.getAttribute('id')"),
        await page.getByLabel('Segment name').getAttribute('id'),
      );
      await page.getByRole('button', { name: 'Delete Customers' }).click();
      await page
        .getByRole('group', { name: 'Confirm' })
        .getByRole('button', { name: /Delete/ })
        .click();
      await page.getByText('No segments yet').waitFor();
      assert.equal((await call('GET', '/contacts/ada@example.org')).status, 200, 'the contact stays');

      await openPage(page, '/contact-properties', 'Contact properties');
      await page.getByRole('button', { name: 'Delete seats' }).click();
      await page
        .getByRole('group', { name: 'Confirm' })
        .getByRole('button', { name: /Delete/ })
        .click();
      await page.locator('td code').getByText('seats', { exact: true }).waitFor({ state: 'detached' });
      assert.deepEqual((await call('GET', '/contacts/ada@example.org')).body!.properties, {
        company: { type: 'string', value: 'Analytical Engines' },
      });
      assert.deepEqual(unexpected(problems), []);
    });
  });
});
