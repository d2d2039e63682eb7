// The dashboard's setup pages in a real browser against a real server: domains (records, copy, verify
// against a loopback DNS server, tracking), API keys (token once, revoke), webhooks (a real receiver on
// loopback, a delivery with its attempt, replay, rotation), the template editor with its sandboxed
// preview, and topics and contacts with a subscription. One server for the whole file.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Locator, Page } from 'playwright-core';
import { docScreenshot, openPage, PHONE, signIn, startDashboard, withPage, type Dashboard } from './helpers/browser.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { waitFor } from './helpers/wait.ts';

let dashboard: Dashboard;
let dns: DnsServer;
let receiver: { server: Server; url: string; requests: Array<{ headers: IncomingHttpHeaders; body: string }> };
/** A session of the dashboard's user, for API calls the tests make themselves. */
let token: string;
const SENDING_DOMAIN = 'mail.acme.example';

async function call(method: string, path: string, body?: unknown, bearerToken = token) {
  const res = await fetch(`${dashboard.base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${bearerToken}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status, // eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers read field by field
    body: text ? (JSON.parse(text) as Record<string, any>) : undefined,
  };
}

/** Publishes a domain's DKIM record in the test DNS server, in 255-character strings as a zone would. */
function publishDkim(record: { name: string; value: string }) {
  const chunks = record.value.match(/.{1,255}/g) ?? [];
  dns.zone.set(record.name.toLowerCase(), { txt: [chunks] });
}

before(async () => {
  dns = await startDnsServer();
  const requests: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      requests.push({ headers: request.headers, body });
      response.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver = { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, requests };
  dashboard = await startDashboard({
    env: {
      MAILROOM_DNS_SERVERS: dns.address,
      MAILROOM_DNS_TIMEOUT_MS: '2000',
      MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    },
  });
  const login = await fetch(`${dashboard.base}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(dashboard.user),
  });
  token = ((await login.json()) as { token: string }).token;
  // A verified domain to send from, for the webhook's events.
  const added = await call('POST', '/domains', { name: SENDING_DOMAIN });
  publishDkim(added.body!.records.find((record: { record: string }) => record.record === 'DKIM'));
  const verified = await call('POST', `/domains/${added.body!.id}/verify`);
  assert.equal(verified.body!.status, 'verified');
});
after(async () => {
  await dashboard?.close();
  await dns?.close();
  receiver?.server.close();
});

/** The browser's problems, less its log line for each API refusal a test provoked on purpose (4xx). */
const unexpected = (problems: string[]) =>
  problems.filter((problem) => !/Failed to load resource: the server responded with a status of 4\d\d/.test(problem));

/** The text of the field error tied to a labelled control (through aria-describedby). */
async function errorOf(page: Page | Locator, label: string): Promise<string> {
  const control = page.getByLabel(label, { exact: true });
  await waitFor(async () => (await control.getAttribute('aria-invalid')) === 'true');
  const ids = (await control.getAttribute('aria-describedby'))!.split(' ');
  return (await page.locator(`[id="${ids.at(-1)}"]`).textContent()) ?? '';
}

describe('domains', () => {
  test('add a domain, copy its records, verify it in words, switch tracking and TLS, set a tracking subdomain, delete it', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        await openPage(page, '/domains', 'Domains');
        await page.getByRole('link', { name: SENDING_DOMAIN }).waitFor();

        // A name the API refuses: the message is next to the field.
        await page.getByLabel('Domain name').fill('not a domain');
        await page.getByRole('button', { name: 'Add domain' }).click();
        assert.match(await errorOf(page, 'Domain name'), /Invalid domain name/);
        // One the organization already has: 409 in words, next to the field.
        await page.getByLabel('Domain name').fill(SENDING_DOMAIN);
        await page.getByRole('button', { name: 'Add domain' }).click();
        assert.match(await errorOf(page, 'Domain name'), /already been added/);

        await page.getByLabel('Domain name').fill('Shop.Example');
        await page.getByRole('button', { name: 'Add domain' }).click();
        await page.getByRole('heading', { level: 1, name: 'shop.example' }).waitFor();
        const records = page.getByRole('table', { name: 'DNS records for shop.example' });
        assert.equal(await records.locator('tbody tr').count(), 3);
        const domain = (await call('GET', '/domains')).body!.data.find(
          (d: { name: string }) => d.name === 'shop.example',
        );
        const dkim = domain.records.find((record: { record: string }) => record.record === 'DKIM');
        await records.getByText(dkim.value).waitFor();
        assert.equal(await page.getByRole('button', { name: /^Copy (DKIM|SPF|DMARC) (name|value)$/ }).count(), 6);
        await page.getByRole('button', { name: 'Copy DKIM value' }).click();
        await page.getByRole('status').filter({ hasText: 'Copied' }).first().waitFor();
        assert.equal(await page.evaluate('navigator.clipboard.readText()'), dkim.value);
        // The long value wraps inside the page instead of widening it.
        assert.ok((await page.evaluate<number>('document.documentElement.scrollWidth')) <= 1280);

        // Nothing published yet: not verified, and which records are missing.
        await page.getByRole('button', { name: 'Verify DNS records' }).click();
        await page
          .getByRole('status')
          .filter({
            hasText:
              'shop.example is not verified yet: its DKIM record was not found. Still missing: DKIM, SPF, DMARC.',
          })
          .waitFor();
        publishDkim(dkim);
        await page.getByRole('button', { name: 'Verify DNS records' }).click();
        await page
          .getByRole('status')
          .filter({
            hasText: 'shop.example is verified: you can send from any address at it. Still missing: SPF, DMARC.',
          })
          .waitFor();
        await records.getByText('Verified').waitFor();
        await docScreenshot(page, 'domains');

        // Tracking: the switch in force, changed for this domain.
        const opens = page.getByLabel(/^Track opens/);
        const wasOn = await opens.isChecked();
        await opens.click();
        await waitFor(async () => (await opens.isChecked()) === !wasOn && (await opens.isEnabled()));
        assert.equal((await call('GET', `/domains/${domain.id}`)).body!.open_tracking, !wasOn);
        await page.getByRole('button', { name: "Follow the organization's settings" }).click();
        await waitFor(async () => (await opens.isChecked()) === wasOn);

        // TLS: opportunistic until required; required, the API reads tls 'enforced'; and back.
        const requireTls = page.getByLabel('Require TLS (never send in the clear)');
        assert.equal(await requireTls.isChecked(), false);
        await requireTls.click();
        await waitFor(async () => (await requireTls.isChecked()) && (await requireTls.isEnabled()));
        assert.equal((await call('GET', `/domains/${domain.id}`)).body!.tls, 'enforced');
        await requireTls.click();
        await waitFor(async () => !(await requireTls.isChecked()) && (await requireTls.isEnabled()));
        assert.equal((await call('GET', `/domains/${domain.id}`)).body!.tls, 'opportunistic');

        // Tracking subdomain: a bad label is refused next to the field; a good one adds its CNAME record.
        const subdomain = page.getByLabel('Tracking subdomain', { exact: true });
        await subdomain.fill('Links.Shop');
        await page.getByRole('button', { name: 'Save tracking subdomain' }).click();
        assert.match(await errorOf(page, 'Tracking subdomain'), /one lower-case DNS label/);
        await subdomain.fill('links');
        await page.getByRole('button', { name: 'Save tracking subdomain' }).click();
        await records.getByText('links.shop.example').waitFor();
        assert.equal(await records.locator('tbody tr').count(), 4);
        const cname = (await call('GET', `/domains/${domain.id}`)).body!.records.find(
          (record: { record: string }) => record.record === 'Tracking',
        );
        assert.deepEqual([cname.type, cname.name], ['CNAME', 'links.shop.example']);
        await records.getByRole('button', { name: 'Copy Tracking value' }).click();
        await waitFor(async () => (await page.evaluate('navigator.clipboard.readText()')) === cname.value);
        assert.equal(await subdomain.inputValue(), 'links');
        // Emptied, tracking links go back to Mailroom's own address and the record goes.
        await subdomain.fill('');
        await page.getByRole('button', { name: 'Save tracking subdomain' }).click();
        await waitFor(async () => (await records.locator('tbody tr').count()) === 3);
        assert.equal((await call('GET', `/domains/${domain.id}`)).body!.tracking_subdomain, undefined);

        await page.getByRole('button', { name: 'Delete domain' }).click();
        await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Delete domain' }).click();
        await page.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();
        assert.equal((await call('GET', `/domains/${domain.id}`)).status, 404);
        assert.deepEqual(unexpected(problems), []);
      },
      { permissions: ['clipboard-read', 'clipboard-write'] },
    );
  });
});

describe('API keys', () => {
  test('a new key is shown once and works; revoked, it is refused', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/api-keys', 'API keys');
      await page.getByText('No API keys').waitFor();

      await page.getByRole('button', { name: 'Create key' }).click();
      assert.ok((await errorOf(page, 'Name')).length > 0);
      await page.getByLabel('Name', { exact: true }).fill('Billing service');
      await page.getByLabel('Permission').selectOption('full_access');
      await page.getByRole('button', { name: 'Create key' }).click();
      const secret = page.getByRole('region', { name: 'Your new API key “Billing service”' });
      const key = await secret.getByRole('textbox').inputValue();
      assert.match(key, /^mr_/);
      await page.getByRole('cell', { name: 'Billing service', exact: true }).waitFor();
      await docScreenshot(page, 'api-keys');
      const row = (name: string) =>
        page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });
      await row('Billing service').getByRole('cell', { name: 'Never', exact: true }).waitFor();
      assert.equal((await call('GET', '/api-keys', undefined, key)).status, 200);

      await secret.getByRole('button', { name: 'I have stored it' }).click();
      await secret.waitFor({ state: 'detached' });
      assert.ok(!(await page.content()).includes(key), 'the token is gone from the page');

      // Used once: the list says when (a reload reads it again).
      await page.reload();
      await row('Billing service').locator('time').nth(1).waitFor(); // created, then last used
      assert.equal(await row('Billing service').getByRole('cell', { name: 'Never', exact: true }).count(), 0);

      // Renamed in place; the token keeps working.
      await page.getByRole('button', { name: 'Rename Billing service' }).click();
      const rename = page.getByRole('form', { name: 'Rename “Billing service”' });
      await rename.getByLabel('New name').fill('');
      await rename.getByRole('button', { name: 'Save' }).click();
      assert.ok((await errorOf(rename, 'New name')).length > 0, 'an empty name is explained under the field');
      await rename.getByLabel('New name').fill('Billing worker');
      await rename.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('cell', { name: 'Billing worker', exact: true }).waitFor();
      assert.equal((await call('GET', '/api-keys', undefined, key)).status, 200);

      await page.getByRole('button', { name: 'Revoke Billing worker' }).click();
      await page.getByText('Revoke “Billing worker”?').waitFor();
      await page
        .getByRole('group', { name: 'Confirm' })
        .getByRole('button', { name: /Revoke/ })
        .click();
      await page.getByText('No API keys').waitFor();
      assert.equal((await call('GET', '/api-keys', undefined, key)).status, 401);
      assert.deepEqual(unexpected(problems), []);
    });
  });
  test('a sending key limited to one domain: chosen in the form, shown in the list', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/api-keys', 'API keys');
      const sendsFrom = page.getByLabel('Sends from');
      // Full access cannot be limited: the choice is there for sending keys only.
      await page.getByLabel('Permission').selectOption('full_access');
      await sendsFrom.waitFor({ state: 'detached' });
      await page.getByLabel('Permission').selectOption('sending_access');
      await sendsFrom.selectOption({ label: SENDING_DOMAIN });

      await page.getByLabel('Name', { exact: true }).fill('Web shop');
      await page.getByRole('button', { name: 'Create key' }).click();
      const secret = page.getByRole('region', { name: 'Your new API key “Web shop”' });
      assert.match(await secret.getByRole('textbox').inputValue(), /^mr_/);
      const domainId = (await call('GET', '/domains')).body!.data.find(
        (domain: { name: string }) => domain.name === SENDING_DOMAIN,
      ).id;
      const listed = (await call('GET', '/api-keys')).body!.data.find((k: { name: string }) => k.name === 'Web shop');
      assert.deepEqual([listed.permission, listed.domain_id], ['sending_access', domainId]);
      const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'Web shop', exact: true }) });
      await row.getByRole('cell', { name: SENDING_DOMAIN, exact: true }).waitFor();
      // The form is back to all domains for the next key.
      assert.equal(await sendsFrom.inputValue(), '');

      await secret.getByRole('button', { name: 'I have stored it' }).click();
      await call('DELETE', `/api-keys/${listed.id}`);
      assert.deepEqual(unexpected(problems), []);
    });
  });
});

describe('webhooks', () => {
  test('an endpoint on a real receiver: secret once, a delivery with its attempt, replay, rotation', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/webhooks', 'Webhooks');
      await page.getByText('No webhook endpoints').waitFor();

      await page.getByLabel('Endpoint URL').fill(receiver.url);
      const picker = page.getByRole('group', { name: 'Events to send' });
      await picker.getByLabel('All events, including types added later').uncheck();
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      await picker.getByText('Choose at least one event, or All events.').waitFor();
      await picker.getByRole('group', { name: 'Emails' }).getByLabel('email.delivered').check();
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const secret = await page
        .getByRole('region', { name: 'Your new signing secret' })
        .getByRole('textbox')
        .inputValue();
      assert.match(secret, /^whsec_/);
      await page.getByRole('link', { name: receiver.url }).waitFor();

      const sent = await call('POST', '/emails', {
        from: `Acme <hello@${SENDING_DOMAIN}>`,
        to: 'delivered@resend.dev',
        subject: 'Webhook test',
        text: 'Hello',
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      await waitFor(() => receiver.requests.length === 1, 20_000);
      const event = JSON.parse(receiver.requests[0]!.body) as { type: string };
      assert.equal(event.type, 'email.delivered');

      await page.getByRole('link', { name: receiver.url }).click();
      await page.getByRole('heading', { level: 1, name: 'Webhook endpoint' }).waitFor();
      const deliveries = page.locator('.deliveries > li');
      await deliveries.first().getByText('Attempt 1: HTTP 200').waitFor();
      await deliveries.first().getByText('Succeeded').waitFor();
      await deliveries.first().getByText('thanks').waitFor();

      await page.getByRole('button', { name: 'Replay email.delivered' }).click();
      await page
        .getByRole('status')
        .filter({ hasText: 'email.delivered was queued again as a new delivery' })
        .waitFor();
      await waitFor(async () => (await deliveries.count()) === 2);
      await deliveries.first().getByText('(replay)').waitFor();
      await deliveries.first().getByText('Attempt 1: HTTP 200').waitFor({ timeout: 20_000 });
      assert.equal(receiver.requests.length, 2);
      assert.equal(receiver.requests[1]!.headers['webhook-id'], receiver.requests[0]!.headers['webhook-id']);
      await docScreenshot(page, 'webhooks');

      await page.getByRole('button', { name: 'Rotate secret' }).click();
      await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Rotate secret' }).click();
      const rotated = await page
        .getByRole('region', { name: 'Your new signing secret' })
        .getByRole('textbox')
        .inputValue();
      assert.match(rotated, /^whsec_/);
      assert.notEqual(rotated, secret);

      const onOff = page.getByRole('switch', { name: 'Send events to this endpoint' });
      await onOff.click();
      await page.getByText('Disabled: events are not sent').waitFor();
      await onOff.click();
      await waitFor(async () => (await onOff.getAttribute('aria-checked')) === 'true');
      assert.deepEqual(problems, []);
    });
  });
});

describe('templates', () => {
  test('create and edit a template with its preview; a broken source is named next to its field', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/templates', 'Templates');
      await page.getByText('No templates yet').waitFor();
      await page.getByRole('link', { name: 'New template' }).click();
      await page.getByRole('heading', { level: 1, name: 'New template' }).waitFor();

      await page.getByLabel('Name', { exact: true }).fill('Welcome');
      await page.getByLabel('Subject').fill('Welcome, {{name}}');
      await page.getByLabel('HTML').fill('<h1>Hello {{name}}</h1><p>You have {{credits}} credits.</p>');
      await page.getByLabel('Text', { exact: true }).fill('Hello {{name}}, {{credits}} credits.');
      await page.getByRole('button', { name: 'Add variable' }).click();
      const second = page.getByRole('group', { name: 'Variable 2' });
      await second.getByLabel('Key').fill('credits');
      await second.getByLabel('Type').selectOption('number');
      await second.getByLabel('Fallback').fill('3');
      // A row added and left blank is no variable: it neither blocks saving nor is saved.
      await page.getByRole('button', { name: 'Add variable' }).click();
      await page.getByRole('group', { name: 'Variable 3' }).waitFor();
      await page.getByRole('button', { name: 'Create template' }).click();
      await page.getByRole('heading', { level: 1, name: 'Welcome' }).waitFor();
      assert.match(new URL(page.url()).hash, /^#\/templates\/[0-9a-f-]{36}$/);
      const templateId = new URL(page.url()).hash.slice('#/templates/'.length);
      assert.deepEqual(
        ((await call('GET', `/templates/${templateId}`)).body!.variables as Array<{ key: string }>).map((v) => v.key),
        ['name', 'credits'],
      );
      const publication = page.getByRole('region', { name: 'Publication' });
      await publication.getByText('Draft', { exact: true }).waitFor();
      await publication.getByText(/Never: sends with this template are refused/).waitFor();

      const sample = page.getByLabel('Sample values (JSON)');
      await sample.fill('{"name": "<Ann & Bob>"}');
      await page.getByRole('button', { name: 'Preview', exact: true }).click();
      await page.locator('.rendered-subject').getByText('Welcome, <Ann & Bob>').waitFor();
      const frame = page.frameLocator('iframe[title="Rendered HTML"]');
      await frame.getByRole('heading', { name: 'Hello <Ann & Bob>' }).waitFor();
      await frame.getByText('You have 3 credits.').waitFor();
      assert.equal(await page.locator('iframe[title="Rendered HTML"]').getAttribute('sandbox'), '');
      await page.locator('.rendered-text').getByText('Hello <Ann & Bob>, 3 credits.').waitFor();
      await docScreenshot(page, 'templates');

      await sample.fill('{"name": ');
      await page.getByRole('button', { name: 'Preview', exact: true }).click();
      assert.match(await errorOf(page, 'Sample values (JSON)'), /^Not valid JSON/);
      await sample.fill('{"name": "Ann"}');

      await page.getByLabel('HTML').fill('<p>{{#if name}}Hello</p>');
      await page.getByRole('button', { name: 'Preview', exact: true }).click();
      assert.match(await errorOf(page, 'HTML'), /html/i);
      await page.getByRole('button', { name: 'Save template' }).click();
      assert.match(await errorOf(page, 'HTML'), /html/i);

      await page.getByLabel('HTML').fill('<p>Hi {{name}}</p>');
      // A blank row between filled ones: an error about a later row still lands on that row.
      await page.getByRole('button', { name: 'Add variable' }).click();
      await page.getByRole('button', { name: 'Add variable' }).click();
      const fourth = page.getByRole('group', { name: 'Variable 4' });
      await fourth.getByLabel('Key').fill('1st');
      await page.getByRole('button', { name: 'Save template' }).click();
      assert.match(await errorOf(fourth, 'Key'), /Invalid variable key "1st"/);
      await fourth.getByRole('button', { name: /^Remove/ }).click();
      await page.getByRole('button', { name: 'Save template' }).click();
      await page.getByRole('status').filter({ hasText: 'Saved as a draft' }).waitFor();
      const list = (await call('GET', '/templates')).body!.data as Array<{
        html: string;
        variables: Array<{ key: string; type: string; fallback_value: unknown }>;
      }>;
      assert.equal(list[0]!.html, '<p>Hi {{name}}</p>');
      assert.deepEqual(
        list[0]!.variables.map(({ key, type, fallback_value }) => ({ key, type, fallback_value })),
        [
          { key: 'name', type: 'string', fallback_value: 'there' },
          { key: 'credits', type: 'number', fallback_value: 3 },
        ],
      );

      // Publishing makes this version the one sends use.
      await publication.getByRole('button', { name: 'Publish' }).click();
      await page.getByRole('status').filter({ hasText: 'Published.' }).waitFor();
      await publication.getByText('Published', { exact: true }).waitFor();
      assert.equal(await publication.getByRole('button', { name: 'Publish' }).isDisabled(), true);
      const published = (await call('GET', `/templates/${templateId}`)).body!;
      assert.deepEqual([published.status, published.has_unpublished_versions], ['published', false]);
      await page.getByLabel('Subject').fill('Welcome back, {{name}}');
      await page.getByRole('button', { name: 'Save template' }).click();
      await publication.getByText('Published, with unpublished changes').waitFor();

      // Duplicate opens the copy, a draft of its own.
      await publication.getByRole('button', { name: 'Duplicate' }).click();
      await page.getByRole('heading', { level: 1, name: 'Welcome (copy)' }).waitFor();
      await page.getByRole('region', { name: 'Publication' }).getByText('Draft', { exact: true }).waitFor();
      assert.equal(await page.getByLabel('Subject').inputValue(), 'Welcome back, {{name}}');
      await page.getByRole('button', { name: 'Delete template' }).click();
      await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Delete template' }).click();
      await page.getByRole('link', { name: 'Welcome', exact: true }).waitFor();
      await page.getByRole('cell', { name: 'Published, with unpublished changes' }).waitFor();

      await page.getByRole('link', { name: 'Welcome', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Welcome' }).waitFor();
      await page.getByRole('button', { name: 'Delete template' }).click();
      await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Delete template' }).click();
      await page.getByText('No templates yet').waitFor();
      assert.deepEqual(unexpected(problems), []);
    });
  });
});

describe('topics and contacts', () => {
  test('create a topic and a contact, subscribe the contact, edit and delete', async (t) => {
    await withPage(t, dashboard, async ({ page, problems }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, '/topics', 'Topics & contacts');
      await page.getByText('No topics yet').waitFor();
      await page.getByText('No contacts yet').waitFor();

      await page.getByLabel('Topic name').fill('Newsletter');
      await page.getByLabel('Description').fill('Monthly product news');
      await page.getByLabel('Contacts who made no choice are').selectOption('opt_out');
      await page.getByRole('button', { name: 'Add topic' }).click();
      await page.locator('td strong').getByText('Newsletter', { exact: true }).waitFor();

      await page.getByRole('button', { name: 'Edit Newsletter' }).click();
      const edit = page.getByRole('form', { name: 'Change “Newsletter”' });
      await edit.getByLabel('Topic name').fill('Monthly newsletter');
      await edit.getByRole('button', { name: 'Save topic' }).click();
      await page.locator('td strong').getByText('Monthly newsletter', { exact: true }).waitFor();

      await page.getByLabel('Email').fill('not an address');
      await page.getByRole('button', { name: 'Add contact' }).click();
      assert.ok((await errorOf(page, 'Email')).length > 0);
      await page.getByLabel('Email').fill('ada@example.org');
      await page.getByLabel('First name').fill('Ada');
      await page.getByRole('button', { name: 'Add contact' }).click();
      await page.getByRole('heading', { level: 1, name: 'ada@example.org' }).waitFor();

      const choice = page.getByLabel('Monthly newsletter');
      assert.equal(await choice.isChecked(), false); // opt_out topic, no choice made
      await choice.check();
      await waitFor(async () => (await choice.isEnabled()) && (await choice.isChecked()));
      const topics = await call('GET', '/contacts/ada@example.org/topics');
      assert.equal(topics.body!.data[0].subscription, 'opt_in');

      await page.getByLabel('Last name').fill('Lovelace');
      await page.getByRole('button', { name: 'Save contact' }).click();
      await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
      assert.equal((await call('GET', '/contacts/ada@example.org')).body!.last_name, 'Lovelace');

      await openPage(page, '/topics', 'Topics & contacts');
      await page.getByRole('link', { name: 'ada@example.org' }).waitFor();
      await docScreenshot(page, 'topics');
      await page.getByRole('link', { name: 'ada@example.org' }).click();
      await page.getByRole('heading', { level: 1, name: 'ada@example.org' }).waitFor();

      await page.getByRole('button', { name: 'Delete contact' }).click();
      await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Delete contact' }).click();
      await page.getByRole('heading', { level: 1, name: 'Topics & contacts' }).waitFor();
      await page.getByText('No contacts yet').waitFor();
      await page.getByRole('button', { name: 'Delete Monthly newsletter' }).click();
      await page
        .getByRole('group', { name: 'Confirm' })
        .getByRole('button', { name: /Delete/ })
        .click();
      await page.getByText('No topics yet').waitFor();
      assert.deepEqual(unexpected(problems), []);
    });
  });
});

describe('phone width', () => {
  test('the domains list and the API key form fit 390 px', async (t) => {
    await withPage(
      t,
      dashboard,
      async ({ page, problems }) => {
        await signIn(page, dashboard.user.email, dashboard.user.password);
        const width = () => page.evaluate<number>('document.documentElement.scrollWidth');
        await openPage(page, '/domains', 'Domains');
        await page.getByRole('link', { name: SENDING_DOMAIN }).waitFor();
        assert.ok((await width()) <= PHONE.width, 'the domains list fits');
        await openPage(page, '/api-keys', 'API keys');
        await page.getByRole('button', { name: 'Create key' }).click();
        await errorOf(page, 'Name');
        assert.ok(await page.getByRole('button', { name: 'Create key' }).isVisible());
        assert.ok((await width()) <= PHONE.width, 'the API key form fits');
        assert.deepEqual(unexpected(problems), []);
      },
      { viewport: PHONE },
    );
  });
});
