// The dashboard's receiving pages in a real browser against a real server, every peer real and on
// loopback: mail is delivered over SMTP to the server's inbound listener, its sender's authentication
// checked against records on a loopback DNS server (SPF, a DKIM key, DMARC) and scanned by a real
// rspamd. The domain page's receiving switch shows the MX record to publish; the Received list shows the
// messages and its search narrows it, the quarantine holds the spam alone; a message's page shows the
// authentication results, the spam verdict and a link to the sent message it answers; a route made in
// the editor is listed, a bad regular expression is refused under its field with the API's words, and
// the route's page changes it (a webhook action with an endpoint of the organization's) and deletes it.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTransport } from 'nodemailer';
import type { Locator, Page } from 'playwright-core';
import {
  PHONE,
  docScreenshot,
  openPage,
  signIn,
  startDashboard,
  waitUntilLoaded,
  withPage,
  type Dashboard,
} from './helpers/browser.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { startRspamd, type Rspamd } from './helpers/rspamd.ts';
import { freePort } from './helpers/server-process.ts';
import { waitFor } from './helpers/wait.ts';

const DOMAIN = 'receiving.example';
const SENDER_DOMAIN = 'sender.example';
const LISTENER_HOST = 'mx.mailroom.test';
const GTUBE = 'XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X';

let dashboard: Dashboard;
let dns: DnsServer;
let rspamd: Rspamd;
let inboundPort: number;
let dataDir: string;
let key = '';

// The sender's DKIM key, published at mail._domainkey.sender.example.
const dkimKeys = generateKeyPairSync('rsa', { modulusLength: 2048 });
const dkimPrivateKey = dkimKeys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const dkimRecord = `v=DKIM1; k=rsa; p=${dkimKeys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
/** A TXT record's character-strings: at most 255 octets each. */
const chunks = (value: string) => value.match(/.{1,255}/g)!;

before(async () => {
  dns = await startDnsServer(
    new Map([
      [SENDER_DOMAIN, { txt: [['v=spf1 ip4:127.0.0.1 -all']] }],
      [`_dmarc.${SENDER_DOMAIN}`, { txt: [['v=DMARC1; p=reject']] }],
      [`mail._domainkey.${SENDER_DOMAIN}`, { txt: [chunks(dkimRecord)] }],
      // A webhook endpoint's host must resolve (to a public address) for the endpoint to be added.
      ['hooks.example.com', { a: ['93.184.215.14'] }],
    ]),
  );
  rspamd = await startRspamd();
  inboundPort = await freePort();
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-receiving-dashboard-'));
  dashboard = await startDashboard({
    env: {
      MAILROOM_TRANSPORT: 'capture',
      // PostgreSQL's captured files need a directory (startSendingDashboard does the same).
      ...(process.env.DATABASE_URL ? { MAILROOM_DATA_DIR: dataDir } : {}),
      MAILROOM_INBOUND_PORT: String(inboundPort),
      MAILROOM_HELO_NAME: LISTENER_HOST,
      MAILROOM_DNS_SERVERS: dns.address,
      MAILROOM_RSPAMD_URL: rspamd.url,
    },
    async prepare(cli, org) {
      await cli('domain', 'add', '--org', org, DOMAIN);
      await cli('domain', 'verify', '--org', org, DOMAIN, '--trust');
      key = (await cli('key', 'create', '--org', org, '--name', 'test', '--permission', 'full_access')).token as string;
    },
  });
});
after(async () => {
  await dashboard?.close();
  await rspamd?.stop();
  await dns?.close();
  await rm(dataDir, { recursive: true, force: true });
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers read field by field
async function api(method: string, route: string, body?: unknown): Promise<Record<string, any>> {
  const res = await fetch(`${dashboard.base}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  assert.ok(res.ok, `${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const unexpected = (problems: string[]) =>
  problems.filter((problem) => !/Failed to load resource: the server responded with a status of 4\d\d/.test(problem));

/** The text of the field error tied to a labelled control (through aria-describedby). */
async function errorOf(page: Page | Locator, label: string): Promise<string> {
  const control = page.getByLabel(label, { exact: true });
  await waitFor(async () => (await control.getAttribute('aria-invalid')) === 'true');
  const ids = (await control.getAttribute('aria-describedby'))!.split(' ');
  return (await page.locator(`[id="${ids.at(-1)}"]`).textContent()) ?? '';
}

/** Delivers a message over SMTP to the server's inbound listener, as a sending MTA would. */
async function deliver(message: Record<string, unknown>, envelope: { from: string; to: string[] }) {
  const transport = createTransport({
    host: '127.0.0.1',
    port: inboundPort,
    secure: false,
    ignoreTLS: true,
    name: `client.${SENDER_DOMAIN}`,
  });
  try {
    await transport.sendMail({ ...message, envelope });
  } finally {
    transport.close();
  }
}

let domainId = '';
let sentId = '';

/** Opens a page at phone width and checks that it is no wider than the screen. */
async function fitsPhone(t: TestContext, address: string, heading: string, screenshot?: string) {
  await withPage(
    t,
    dashboard,
    async ({ page }) => {
      await signIn(page, dashboard.user.email, dashboard.user.password);
      await openPage(page, address, heading);
      await waitUntilLoaded(page);
      const [scrollWidth, innerWidth] = await page.evaluate<[number, number]>(
        '[document.documentElement.scrollWidth, window.innerWidth]',
      );
      assert.ok(scrollWidth <= innerWidth, `${address} is ${scrollWidth}px wide in a ${innerWidth}px window`);
      if (screenshot) await docScreenshot(page, screenshot);
    },
    { viewport: PHONE },
  );
}

test('the domain page’s receiving switch turns receiving on and shows the MX record to publish', async (t) => {
  domainId = ((await api('GET', '/domains')).data as Array<{ id: string }>)[0]!.id;
  await withPage(t, dashboard, async ({ page, problems }) => {
    await signIn(page, dashboard.user.email, dashboard.user.password);
    await openPage(page, `/domains/${domainId}`, DOMAIN);
    const receiving = page.getByLabel(`Receive mail at ${DOMAIN}`);
    assert.equal(await receiving.isChecked(), false);
    const records = page.getByRole('region', { name: `DNS records for ${DOMAIN}` });
    const receivingRow = records.getByRole('row').filter({ has: page.getByRole('cell', { name: /^Receiving/ }) });
    assert.equal(await receivingRow.count(), 0, 'no MX before receiving is on');

    // Saved at once; the box follows the domain as read back.
    await receiving.click();
    const mx = page.locator('.receiving-mx');
    await mx.getByText(LISTENER_HOST, { exact: true }).waitFor();
    assert.match((await mx.textContent()) ?? '', /MX \(priority 10\)/);
    await waitFor(async () => (await receiving.isEnabled()) && (await receiving.isChecked()));
    // The same record in the DNS table, with its status.
    await receivingRow.getByText(LISTENER_HOST, { exact: true }).waitFor();
    assert.match((await receivingRow.textContent()) ?? '', /MX.*priority 10/);
    assert.match((await receivingRow.textContent()) ?? '', /Not checked|Not found|Pending|Verified/);
    assert.equal((await api('GET', `/domains/${domainId}`)).capabilities.receiving, 'enabled');
    // Reply tracking is the domain's other switch there.
    const replies = page.getByLabel('Track replies', { exact: false });
    assert.equal(await replies.isChecked(), false);
    await replies.click();
    await waitFor(async () => (await replies.isEnabled()) && (await replies.isChecked()));
    assert.equal((await api('GET', `/domains/${domainId}`)).reply_tracking, true);
    await page.locator('#receiving-title').scrollIntoViewIfNeeded();
    await docScreenshot(page, 'domain-receiving');
    assert.deepEqual(unexpected(problems), []);
  });
  await fitsPhone(t, `/domains/${domainId}`, DOMAIN);
});

test('Received lists the messages delivered to the listener, and the search narrows the list', async (t) => {
  await api('PATCH', `/domains/${domainId}`, { capabilities: { receiving: 'enabled' } });
  const sent = await api('POST', '/emails', {
    from: `Acme Support <support@${DOMAIN}>`,
    to: `ann@${SENDER_DOMAIN}`,
    subject: 'Your order has shipped',
    text: 'It is on its way.',
  });
  sentId = sent.id as string;
  const messageId = (await api('GET', `/emails/${sentId}`)).message_id as string;
  assert.ok(messageId, 'the sent message has its Message-ID');

  await deliver(
    {
      from: `Ann Sender <ann@${SENDER_DOMAIN}>`,
      to: `support@${DOMAIN}`,
      subject: 'Re: Your order has shipped',
      inReplyTo: messageId,
      references: [messageId],
      text: `Thanks, it arrived today.\n\nOn Monday, Acme Support wrote:\n> It is on its way.\n`,
      html: '<style>p { margin: 0 }</style><p style="color: #b42318">Thanks, <b>it arrived today</b>.</p><blockquote>It is on its way.</blockquote>',
      attachments: [{ filename: 'receipt.txt', content: 'Paid in full\n' }],
      dkim: { domainName: SENDER_DOMAIN, keySelector: 'mail', privateKey: dkimPrivateKey },
    },
    { from: `ann@${SENDER_DOMAIN}`, to: [`support@${DOMAIN}`] },
  );
  await deliver(
    { from: 'Bob <bob@billing.test>', to: `accounts@${DOMAIN}`, subject: 'Invoice 42', text: 'Please find it below.' },
    { from: 'bob@billing.test', to: [`accounts@${DOMAIN}`] },
  );
  // Sent to a list: no recipient of ours in its headers, only in the envelope.
  await deliver(
    { from: 'Carol <carol@news.test>', to: 'subscribers@news.test', subject: 'Newsletter', text: 'News.' },
    { from: 'carol@news.test', to: [`archive@${DOMAIN}`] },
  );
  // GTUBE, the spam filters' test string: rspamd rejects it, so it is kept in quarantine.
  await deliver(
    {
      from: 'Mallory <mallory@spam.test>',
      to: `accounts@${DOMAIN}`,
      subject: 'You have won',
      text: `Claim it now.\n\n${GTUBE}\n`,
    },
    { from: 'mallory@spam.test', to: [`accounts@${DOMAIN}`] },
  );

  await withPage(t, dashboard, async ({ page, problems }) => {
    await signIn(page, dashboard.user.email, dashboard.user.password);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Received' }).click();
    await page.getByRole('heading', { level: 1, name: 'Received' }).waitFor();
    const table = page.getByRole('region', { name: 'Received emails, newest first' });
    await table.getByRole('link', { name: 'Re: Your order has shipped' }).waitFor();
    await table.getByRole('link', { name: 'Invoice 42' }).waitFor();
    await table.getByRole('row').filter({ hasText: 'Invoice 42' }).getByText('bob@billing.test').waitFor();
    const newsletter = table.getByRole('row').filter({ hasText: 'Newsletter' });
    await newsletter.getByText(`for archive@${DOMAIN}`).waitFor();
    assert.match((await newsletter.textContent()) ?? '', /subscribers@news\.test/);
    // A recipient the headers name is not repeated.
    assert.equal(await table.getByText(`for support@${DOMAIN}`).count(), 0);
    assert.equal(await table.getByRole('link', { name: 'You have won' }).count(), 0, 'quarantined: not listed');
    await docScreenshot(page, 'received');

    await page.getByLabel('Search', { exact: true }).fill('invoice');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const matching = page.getByRole('region', { name: 'Received emails matching the search, newest first' });
    await matching.getByRole('link', { name: 'Invoice 42' }).waitFor();
    await waitUntilLoaded(page);
    assert.equal(await matching.getByRole('link', { name: 'Re: Your order has shipped' }).count(), 0);
    assert.match(page.url(), /#\/received\?search=invoice$/);

    // A recipient's address narrows it too; one nothing matches says so.
    await page.getByLabel('Search', { exact: true }).fill(`support@${DOMAIN}`);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await matching.getByRole('link', { name: 'Re: Your order has shipped' }).waitFor();
    await waitUntilLoaded(page);
    assert.equal(await matching.getByRole('link', { name: 'Invoice 42' }).count(), 0);
    await page.getByLabel('Search', { exact: true }).fill('nothing-like-this');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No received emails match these filters').waitFor();

    // The quarantine holds the spam alone; its page says why.
    await page.getByRole('button', { name: 'Clear filters' }).first().click();
    await page.getByLabel('Show', { exact: true }).selectOption('true');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const quarantine = page.getByRole('region', { name: 'Quarantined emails, newest first' });
    await quarantine.getByRole('link', { name: 'You have won' }).waitFor();
    assert.equal(await quarantine.getByRole('row').count(), 2, 'a header row and the spam');
    await quarantine.getByRole('link', { name: 'You have won' }).click();
    await page.getByRole('heading', { level: 1, name: 'You have won' }).waitFor();
    const verdict = page.locator('.detail-row').filter({ hasText: 'Spam verdict' });
    assert.match((await verdict.textContent()) ?? '', /Spam verdict\s*Spam score \d+/);
    assert.match(
      (await page.locator('.detail-row').filter({ hasText: 'Quarantined' }).textContent()) ?? '',
      /Yes: kept out of the received list/,
    );
    assert.deepEqual(unexpected(problems), []);
  });

  await fitsPhone(t, '/received', 'Received');
});

test('a received message’s page shows the sender’s authentication, the spam verdict and the sent message it answers', async (t) => {
  const list = await api('GET', '/emails/receiving?search=shipped');
  const id = (list.data as Array<{ id: string }>)[0]!.id;
  await withPage(t, dashboard, async ({ page, problems }) => {
    await signIn(page, dashboard.user.email, dashboard.user.password);
    await openPage(page, '/received', 'Received');
    await page.getByRole('link', { name: 'Re: Your order has shipped' }).click();
    await page.getByRole('heading', { level: 1, name: 'Re: Your order has shipped' }).waitFor();
    assert.match(page.url(), new RegExp(`#/received/${id}$`));
    await waitUntilLoaded(page);

    const details = page.getByRole('region', { name: 'Details' });
    assert.match((await details.textContent()) ?? '', new RegExp(`ann@${SENDER_DOMAIN}`));
    assert.match((await details.textContent()) ?? '', new RegExp(`support@${DOMAIN}`));

    const checks = page.getByRole('region', { name: 'Sender authentication results' });
    const result = async (check: string) =>
      (await checks
        .getByRole('row')
        .filter({ has: page.getByRole('cell', { name: check, exact: true }) })
        .textContent()) ?? '';
    assert.match(await result('SPF'), new RegExp(`SPF\\s*pass\\s*${SENDER_DOMAIN}`));
    assert.match(await result('DKIM'), new RegExp(`DKIM\\s*pass\\s*${SENDER_DOMAIN} \\(selector mail\\)`));
    assert.match(await result('DMARC'), new RegExp(`DMARC\\s*pass\\s*${SENDER_DOMAIN} \\(policy reject\\)`));
    assert.match(await result('ARC'), /ARC\s*none/);
    await docScreenshot(page, 'received-email');

    const verdict = page.locator('.detail-row').filter({ hasText: 'Spam verdict' });
    assert.match((await verdict.textContent()) ?? '', /Not spam score -?\d+(\.\d+)?/);
    assert.match((await page.locator('.detail-row').filter({ hasText: 'Quarantined' }).textContent()) ?? '', /No$/);

    // The reply without its quoted history, the text, the HTML in a sandboxed frame, the attachment.
    assert.equal(
      (await page.getByLabel('The reply without its quoted history').textContent())?.trim(),
      'Thanks, it arrived today.',
    );
    const frame = page.locator('iframe.preview-frame');
    assert.equal(await frame.getAttribute('sandbox'), '');
    // Loaded from a signed preview link served under the message's own policy, so its styles apply.
    assert.ok((await frame.getAttribute('src'))!.startsWith('/previews/'));
    await page.frameLocator('iframe.preview-frame').getByText('it arrived today').waitFor();
    const attachment = page.getByRole('link', { name: 'receipt.txt' });
    const download = await fetch(new URL((await attachment.getAttribute('href'))!, dashboard.base));
    assert.equal(await download.text(), 'Paid in full\n');
    const raw = page.getByRole('link', { name: 'Download the raw message (.eml)' });
    const source = await (await fetch(new URL((await raw.getAttribute('href'))!, dashboard.base))).text();
    assert.match(source, /Subject: Re: Your order has shipped/);

    // The sent message it answers, on the sent message's own page.
    await page.getByRole('link', { name: 'The sent message it answers' }).click();
    await page.getByRole('heading', { level: 1, name: 'Your order has shipped' }).waitFor();
    assert.match(page.url(), new RegExp(`#/emails/${sentId}$`));
    // The sandboxed frame's own console lines (its scripts blocked, the test's listener among them). A
    // violation by the dashboard itself is still caught: the page's listener reports "CSP violation: …".
    const fromFrame = /previews|sandboxed|Refused to|allow-scripts/;
    assert.deepEqual(
      unexpected(problems).filter((problem) => !fromFrame.test(problem)),
      [],
    );
  });
  await fitsPhone(t, `/received/${id}`, 'Re: Your order has shipped', 'received-email-phone');
});

test('inbound routes: a route made in the editor is listed, and a bad pattern is refused under its field', async (t) => {
  const endpoint = await api('POST', '/webhooks', {
    endpoint: 'https://hooks.example.com/mailroom',
    events: ['email.received'],
  });
  await withPage(t, dashboard, async ({ page, problems }) => {
    await signIn(page, dashboard.user.email, dashboard.user.password);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Inbound routes' }).click();
    await page.getByRole('heading', { level: 1, name: 'Inbound routes' }).waitFor();
    await page.getByText('No inbound routes yet').waitFor();

    await page.getByLabel('Description', { exact: true }).fill('Support to the help desk');
    await page.getByLabel('Priority', { exact: true }).fill('5');
    await page.getByLabel('Match', { exact: true }).selectOption('exact');
    await page.getByLabel('Recipient pattern').fill(`support@${DOMAIN}`);
    await page.getByLabel('Action 1', { exact: true }).selectOption('forward');
    await page.getByLabel('Action 1: forward to').fill('desk@example.com');
    await page.getByRole('button', { name: 'Add an action' }).click();
    await page.getByLabel('Action 2', { exact: true }).selectOption('store');
    await page.getByLabel('Stop here', { exact: false }).check();
    await page.getByRole('button', { name: 'Add route' }).click();

    const table = page.getByRole('region', { name: 'Inbound routes, in the order they are tried' });
    const row = table.getByRole('row').filter({ hasText: 'Support to the help desk' });
    await row.waitFor();
    await page.getByRole('status').filter({ hasText: 'Added the route Support to the help desk.' }).waitFor();
    assert.match((await row.textContent()) ?? '', /forward to desk@example\.com; store/);
    assert.match((await row.textContent()) ?? '', /then stop/);
    const routes = (await api('GET', '/inbound-routes')).data as Array<Record<string, unknown>>;
    assert.equal(routes.length, 1);
    assert.deepEqual(routes[0]!.match, { recipient: `support@${DOMAIN}`, recipient_kind: 'exact' });
    assert.deepEqual(routes[0]!.actions, [{ type: 'forward', to: ['desk@example.com'] }, { type: 'store' }]);
    assert.equal(routes[0]!.priority, 5);
    assert.equal(routes[0]!.stop, true);
    // The form is empty again for the next route.
    assert.equal(await page.getByLabel('Description', { exact: true }).inputValue(), '');
    await page.evaluate('window.scrollTo(0, 0)');
    await docScreenshot(page, 'inbound-routes');

    // A regular expression that does not compile: the API's words, under the pattern's field.
    await page.getByLabel('Match', { exact: true }).selectOption('regex');
    await page.getByLabel('Recipient pattern').fill('^(support|help@');
    await page.getByRole('button', { name: 'Add route' }).click();
    const message = await errorOf(page, 'Recipient pattern');
    assert.match(message, /not a valid regular expression/);
    assert.equal(await page.getByRole('alert').count(), 0, 'the error is under its field, not in a banner');
    assert.equal(((await api('GET', '/inbound-routes')).data as unknown[]).length, 1, 'nothing was added');
    // Fixing the field clears its error.
    await page.getByLabel('Recipient pattern').fill(`^(support|help)@${DOMAIN.replace('.', '\\.')}$`);
    assert.equal(await page.getByLabel('Recipient pattern').getAttribute('aria-invalid'), null);

    // The route's own page changes it.
    await row.getByRole('link', { name: 'Support to the help desk' }).click();
    await page.getByRole('heading', { level: 1, name: 'Support to the help desk' }).waitFor();
    // A webhook action, its endpoint chosen from the organization's.
    await page.getByRole('button', { name: 'Add an action' }).click();
    await page.getByLabel('Action 3', { exact: true }).selectOption('webhook');
    await page.getByLabel('Action 3: webhook endpoint').selectOption({ label: endpoint.endpoint as string });
    await page.getByLabel('Enabled', { exact: true }).uncheck();
    await page.getByRole('button', { name: 'Save route' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    const changed = ((await api('GET', '/inbound-routes')).data as Array<Record<string, unknown>>)[0]!;
    assert.equal(changed.enabled, false);
    assert.deepEqual(changed.actions, [
      { type: 'forward', to: ['desk@example.com'] },
      { type: 'store' },
      { type: 'webhook', endpoint_id: endpoint.id },
    ]);

    // Deleted there, asked twice; the list is empty again.
    await page.getByRole('button', { name: 'Delete route' }).click();
    await page.getByRole('group', { name: 'Confirm' }).getByRole('button', { name: 'Delete route' }).click();
    await page.getByRole('heading', { level: 1, name: 'Inbound routes' }).waitFor();
    await page.getByText('No inbound routes yet').waitFor();
    assert.deepEqual((await api('GET', '/inbound-routes')).data, []);
    assert.deepEqual(unexpected(problems), []);
  });
  await fitsPhone(t, '/inbound-routes', 'Inbound routes');
});
