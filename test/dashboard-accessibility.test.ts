// Every page of the dashboard, with something on it, checked in a real browser for what a keyboard or
// screen-reader user needs: each form field has a label, each button and link a name, frames a title,
// no positive tabindex; and Tab alone reaches every button, link and field on the page. Then axe-core's
// WCAG 2.1 A and AA rules on every page, at desk and phone width, in the light and the dark theme.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import axe from 'axe-core';
import {
  DESKTOP,
  openPage,
  PHONE,
  signIn,
  startSendingDashboard,
  waitUntilLoaded,
  withPage,
  type Dashboard,
  type SendingDashboard,
} from './helpers/browser.ts';
import { seedDestinations } from './helpers/destinations.ts';
import { freePort } from './helpers/server-process.ts';
import { createTransport } from 'nodemailer';

const DOMAIN = 'a11y.example';
let dashboard: Dashboard;
let sending: SendingDashboard;
let api: SendingDashboard['api'];
let emailId = '';
let domainId = '';
let templateId = '';
let routeId = '';
let receivedId = '';
let broadcastId = '';
let importId = '';
let automationId = '';
let inboundPort = 0;

before(async () => {
  inboundPort = await freePort();
  sending = await startSendingDashboard(DOMAIN, {
    // The inbound listener, for a received message.
    env: { MAILROOM_INBOUND_PORT: String(inboundPort) },
    // Destinations with everything the page can show: a paused site with its reply and a hold of the
    // organization's domain (a link to its records), a throttled site with its last reply.
    prepare: (env, org) => {
      const later = new Date(Date.now() + 3600_000);
      return seedDestinations(env, {
        sites: [
          {
            site: 'google',
            connectionLimit: 1,
            pausedUntil: later,
            pauseReason: 'throttled',
            pauseReply: '421 4.7.0 Try again later, closing connection.',
            throttleReplies: 1,
            lastReply: { code: 421, text: '421 4.7.0 Try again later, closing connection.', at: new Date() },
          },
          {
            site: 'microsoft',
            connectionLimit: 2,
            connections: 1,
            lastReply: { code: 451, text: '451 4.7.500 Server busy. Please try again later', at: new Date() },
          },
        ],
        senderHolds: [{ site: 'google', senderDomain: DOMAIN, pausedUntil: later, reply: '550 5.7.26 DMARC' }],
        recipients: [{ organizationId: org, site: 'google', count: 1 }],
      });
    },
  });
  ({ dashboard, api } = sending);
  // Something on every page: a message, a domain, a template, a topic, a contact, a suppression, an
  // inbound route, a received message, a draft broadcast to a segment, a contact import (and, written
  // before the server started, destinations).
  emailId = (
    await api('POST', '/emails', {
      from: `Acme <hi@${DOMAIN}>`,
      to: 'reader@example.com',
      subject: 'Hello',
      html: '<p>Hello</p>',
    })
  ).id as string;
  domainId = ((await api('GET', '/domains')).data as Array<{ id: string }>)[0]!.id;
  templateId = (await api('POST', '/templates', { name: 'Welcome', subject: 'Hi {{name}}', html: '<p>{{name}}</p>' }))
    .id as string;
  await api('POST', '/topics', { name: 'News', default_subscription: 'opt_in' });
  await api('POST', '/contacts', { email: 'contact@example.com', first_name: 'Ada' });
  await api('POST', '/suppressions', { email: 'gone@example.com' });
  const segmentId = (await api('POST', '/segments', { name: 'Readers' })).id as string;
  broadcastId = (
    await api('POST', '/broadcasts', {
      name: 'Spring news',
      from: `Acme <news@${DOMAIN}>`,
      subject: 'Spring news',
      segment_id: segmentId,
      html: '<p>Hello {{{FIRST_NAME}}}, <a href="https://example.com/spring">read more</a></p>',
    })
  ).id as string;
  // An automation sending the template (published for it), and a declared event with a schema.
  await api('POST', `/templates/${templateId}/publish`);
  await api('POST', '/events', { name: 'user.signed_up', schema: { plan: 'string' } });
  automationId = (
    await api('POST', '/automations', {
      name: 'Welcome series',
      status: 'enabled',
      steps: [
        { key: 'start', type: 'trigger', config: { event_name: 'user.signed_up' } },
        { key: 'welcome', type: 'send_email', config: { template: { id: templateId } } },
        { key: 'wait', type: 'delay', config: { duration: '2 days' } },
      ],
      connections: [
        { from: 'start', to: 'welcome' },
        { from: 'welcome', to: 'wait' },
      ],
    })
  ).id as string;
  importId = await uploadImport('Email,First Name\r\nbea@example.com,Bea\r\nnot-an-address,Bad\r\n', segmentId);
  routeId = (
    await api('POST', '/inbound-routes', {
      description: 'Everything else',
      match: { recipient_kind: 'catch_all' },
      actions: [{ type: 'forward', to: ['desk@example.com'] }, { type: 'store' }],
    })
  ).id as string;
  // A received message, with an attachment and the route above applied to it.
  await api('PATCH', `/domains/${domainId}`, { capabilities: { receiving: 'enabled' } });
  const smtp = createTransport({ host: '127.0.0.1', port: inboundPort, secure: false, ignoreTLS: true });
  await smtp.sendMail({
    from: 'Ann <ann@sender.example>',
    to: `support@${DOMAIN}`,
    subject: 'A question',
    text: 'Hello, a question.',
    html: '<p>Hello, a question.</p>',
    attachments: [{ filename: 'notes.txt', content: 'notes' }],
  });
  smtp.close();
  receivedId = ((await api('GET', '/emails/receiving')).data as Array<{ id: string }>)[0]!.id;
});
after(() => sending?.close());

/** A contact import of `csv` through the API (multipart/form-data, as curl -F sends it); its id. */
async function uploadImport(csv: string, segmentId: string): Promise<string> {
  // The upload is multipart, which the JSON helper does not send: with a session of the dashboard's user.
  const login = await fetch(`${dashboard.base}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: dashboard.user.email, password: dashboard.user.password }),
  });
  const { token } = (await login.json()) as { token: string };
  const form = new FormData();
  form.append('file', new Blob([csv], { type: 'text/csv' }), 'contacts.csv');
  form.append('segments', JSON.stringify([{ id: segmentId }]));
  const res = await fetch(`${dashboard.base}/contacts/imports`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: form,
  });
  const body = (await res.json()) as { id: string };
  assert.equal(res.status, 201, JSON.stringify(body));
  return body.id;
}

// Run in the page (as a string: the tests are type-checked without the DOM's names). Marks every visible
// button, link and field with data-a11y and returns what lacks a name.
const AUDIT = `(() => {
  const visible = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const named = (el) => Boolean(
    (el.getAttribute('aria-label') || '').trim() ||
    (el.labels && [...el.labels].some((l) => l.textContent.trim())) ||
    (el.getAttribute('aria-labelledby') || '').split(/\\s+/).some((id) => id && document.getElementById(id)?.textContent.trim()) ||
    (el.textContent || '').trim() || (el.getAttribute('title') || '').trim() ||
    [...el.querySelectorAll('img[alt], svg title')].some((i) => (i.getAttribute('alt') || i.textContent || '').trim()));
  const problems = [];
  const describe = (el) => el.outerHTML.slice(0, 120);
  let n = 0;
  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
    if (!visible(el)) continue;
    el.dataset.a11y = String(n++);
    const labelled = (el.labels && el.labels.length > 0 && [...el.labels].some((l) => l.textContent.trim())) ||
      (el.getAttribute('aria-label') || '').trim() || el.getAttribute('aria-labelledby');
    if (!labelled) problems.push('field without a label: ' + describe(el));
  }
  for (const el of document.querySelectorAll('button, a[href], [role=button], summary')) {
    if (!visible(el)) continue;
    if (!named(el)) problems.push('control without a name: ' + describe(el));
    // A disabled button is named like any other, and rightly left out of the Tab order.
    if (!el.disabled) el.dataset.a11y = String(n++);
  }
  for (const el of document.querySelectorAll('iframe')) if (!(el.getAttribute('title') || '').trim()) problems.push('frame without a title: ' + describe(el));
  for (const el of document.querySelectorAll('img')) if (!el.hasAttribute('alt')) problems.push('image without alt: ' + describe(el));
  for (const el of document.querySelectorAll('[tabindex]')) if (Number(el.getAttribute('tabindex')) > 0) problems.push('positive tabindex: ' + describe(el));
  return { problems, controls: n };
})()`;

/** Presses Tab until focus has gone round the page; returns the marked controls it never reached. */
async function unreachedByTab(page: Page, controls: number): Promise<string[]> {
  const reached = new Set<string>();
  await page.evaluate('document.activeElement && document.activeElement.blur()');
  for (let i = 0; i < controls + 30 && reached.size < controls; i++) {
    await page.keyboard.press('Tab');
    const id = (await page.evaluate(
      'document.activeElement ? document.activeElement.dataset.a11y ?? "" : ""',
    )) as string;
    if (id) reached.add(id);
  }
  return (await page.evaluate(
    `[...document.querySelectorAll('[data-a11y]')].filter((el) => !${JSON.stringify([...reached])}.includes(el.dataset.a11y)).map((el) => el.outerHTML.slice(0, 120))`,
  )) as string[];
}

const PAGES: Array<[string, string | RegExp]> = [
  ['/', 'Overview'],
  ['/emails', 'Emails'],
  ['/emails/:email', 'Hello'],
  ['/received', 'Received'],
  ['/received/:received', 'A question'],
  ['/inbound-routes', 'Inbound routes'],
  ['/inbound-routes/:route', 'Everything else'],
  ['/domains', 'Domains'],
  ['/domains/:domain', DOMAIN],
  ['/api-keys', 'API keys'],
  ['/webhooks', 'Webhooks'],
  ['/templates', 'Templates'],
  ['/templates/:template', /Welcome|template/i],
  ['/templates/new', /template/i],
  ['/broadcasts', 'Broadcasts'],
  ['/broadcasts/new', 'New broadcast'],
  ['/broadcasts/:broadcast', 'Spring news'],
  ['/automations', 'Automations'],
  ['/automations/:automation', 'Welcome series'],
  ['/events', 'Events'],
  ['/topics', 'Topics & contacts'],
  ['/segments', 'Segments'],
  ['/contact-properties', 'Contact properties'],
  ['/imports', 'Contact imports'],
  ['/imports/:import', /^Contact import$/],
  ['/suppressions', 'Suppressions'],
  ['/destinations', 'Destinations'],
  ['/logs', 'Logs'],
  ['/settings', 'Settings'],
];

/** A page's address, its parameters filled with what `before` made. */
const addressOf = (template: string) =>
  template
    .replace(':email', emailId)
    .replace(':domain', domainId)
    .replace(':template', templateId)
    .replace(':route', routeId)
    .replace(':received', receivedId)
    .replace(':broadcast', broadcastId)
    .replace(':automation', automationId)
    .replace(':import', importId);

/** Opens every page in turn, its data loaded, and yields its address. */
async function* everyPage(page: Page): AsyncGenerator<string> {
  for (const [template, heading] of PAGES) {
    const address = addressOf(template);
    await openPage(page, address, heading);
    await waitUntilLoaded(page);
    yield address;
  }
}

test('every page: fields labelled, controls named, and Tab reaches every control', async (t) => {
  await withPage(t, dashboard, async ({ page, problems }) => {
    await signIn(page, dashboard.user.email, dashboard.user.password);
    // The audit sees what it looks for: an unnamed button, an unlabelled field and a positive tabindex.
    await openPage(page, '/settings', 'Settings');
    await page.evaluate(
      `document.querySelector('main').insertAdjacentHTML('beforeend', '<div id="bad"><button></button><input><a href="#x" tabindex="3">x</a></div>')`,
    );
    const planted = (await page.evaluate(AUDIT)) as { problems: string[] };
    assert.equal(planted.problems.length, 3, planted.problems.join('\n'));
    await page.evaluate(`document.getElementById('bad').remove()`);

    const findings: string[] = [];
    for await (const address of everyPage(page)) {
      const audit = (await page.evaluate(AUDIT)) as { problems: string[]; controls: number };
      assert.ok(audit.controls > 0, `${address}: no control found`);
      findings.push(...audit.problems.map((p) => `${address}: ${p}`));
      for (const missed of await unreachedByTab(page, audit.controls))
        findings.push(`${address}: not reached by Tab: ${missed}`);
    }
    assert.deepEqual(findings, []);
    assert.deepEqual(problems, []);
  });
});

// axe-core's WCAG 2.1 A and AA rules (contrast included), the serious and critical findings of each page.
const AXE_RUN = `axe.run(document, {
  runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
  resultTypes: ['violations'],
}).then((result) => result.violations
  .filter((v) => v.impact === 'serious' || v.impact === 'critical')
  .map((v) => v.id + ' (' + v.impact + '): ' + v.help + ': ' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')))`;

/** axe-core's serious and critical findings on the page as it is now (axe is loaded into the page once). */
async function axeFindings(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern.
  if ((await page.evaluate('typeof window.axe')) === 'undefined') await page.evaluate(axe.source);
  return (await page.evaluate(AXE_RUN)) as string[];
}

for (const [width, viewport] of [
  ['1280 px', DESKTOP],
  ['390 px', PHONE],
] as const) {
  for (const colorScheme of ['light', 'dark'] as const) {
    test(`axe-core: no serious or critical WCAG 2.1 A/AA violation on any page, ${width}, ${colorScheme} theme`, async (t) => {
      await withPage(
        t,
        dashboard,
        async ({ page, problems }) => {
          await signIn(page, dashboard.user.email, dashboard.user.password);
          // The theme asked for is the one shown.
          assert.equal(
            await page.evaluate('getComputedStyle(document.body).backgroundColor'),
            colorScheme === 'dark' ? 'rgb(13, 17, 23)' : 'rgb(246, 247, 249)',
          );
          // The check sees what it looks for: an image without a text alternative (critical).
          await openPage(page, '/settings', 'Settings');
          await page.evaluate(
            `document.querySelector('main').insertAdjacentHTML('beforeend', '<img id="bad" src="data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==">')`,
          );
          const planted = await axeFindings(page);
          assert.ok(
            planted.some((finding) => finding.startsWith('image-alt')),
            planted.join('\n'),
          );
          await page.evaluate(`document.getElementById('bad').remove()`);

          const findings: string[] = [];
          for await (const address of everyPage(page)) {
            findings.push(...(await axeFindings(page)).map((finding) => `${address}: ${finding}`));
          }
          assert.deepEqual(findings, []);
          assert.deepEqual(problems, []);
        },
        { viewport, colorScheme },
      );
    });
  }
}
