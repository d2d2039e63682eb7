// One table, every route: who may call it and what each kind of caller gets. A route added to the app
// without a row here fails the last test, so every later route joins this table.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import type { Access } from '../src/platform/http/app-types.ts';
import { message } from './helpers/emails.ts';
import { existsSync } from 'node:fs';
import { DASHBOARD_DIST } from '../src/dashboard/dashboard-routes.ts';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { capturedMessagePath } from '../src/delivery/transports/capture.ts';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { receiveMessage } from '../src/receiving/receive-message.ts';

interface Row {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** `:own` is replaced with an id of the caller's organization made by `fixture`, `:other` with one of another organization. */
  url: string;
  access: Access;
  /** Status for a caller who may use the route (the request is valid). */
  ok: number;
  body?: (org: TestOrganization) => unknown;
  /** Makes the resource the url names, for the given organization; returns its id. */
  fixture?: (t: TestApp, org: TestOrganization) => Promise<string>;
  /** The route as registered, when its parameter is not `:id` (`/contacts/:id_or_email`). */
  registered?: string;
  /** For a public route taking a signed link token: makes one (replaces `:token`). */
  token?: (t: TestApp, org: TestOrganization) => Promise<string>;
  /** The route never parses its body (any body gets `ok`). */
  bodyUnread?: true;
}

/** A fixture that creates a resource of the organization with POST and returns its id. */
const created =
  (url: string, payload: (org: TestOrganization) => object) =>
  async (t: TestApp, org: TestOrganization): Promise<string> => {
    const res = await t.app.inject({ method: 'POST', url, headers: bearer(org.fullKey), payload: payload(org) });
    return res.json().id as string;
  };

const domainFixture = created('/domains', () => ({ name: `d${Math.random().toString(36).slice(2)}.example.test` }));
const apiKeyFixture = created('/api-keys', () => ({ name: 'fixture' }));
const templateFixture = created('/templates', () => ({
  name: 'fixture',
  html: '<p>{{name}}</p>',
  variables: [{ key: 'name', type: 'string' }],
}));
/** A message scheduled an hour ahead, so that it can still be cancelled and rescheduled. */
const emailFixture = created('/emails', (org) =>
  message(org, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() }),
);
/** A webhook endpoint on loopback (allowed by the test's MAILROOM_WEBHOOK_ALLOW_CIDRS), and one delivery of it. */
const webhookFixture = created('/webhooks', () => ({ endpoint: 'http://127.0.0.1:9/hook', events: [] }));
const deliveryFixture = async (t: TestApp, org: TestOrganization) => {
  const endpoint = await webhookFixture(t, org);
  await t.app.inject({ method: 'POST', url: '/emails', headers: bearer(org.fullKey), payload: message(org) });
  const { rows } = await t.db.query<{ id: string }>('SELECT id FROM webhook_deliveries WHERE endpoint_id = $1', [
    endpoint,
  ]);
  return `${endpoint}/deliveries/${rows[0]!.id}`;
};
/** The same delivery as Resend's SDK names it: `<endpoint id>/events/<delivery id>`. */
const eventFixture = async (t: TestApp, org: TestOrganization) =>
  (await deliveryFixture(t, org)).replace('/deliveries/', '/events/');

/** A message sent with one attachment: `<email id>/attachments/<attachment id>`. */
const attachmentFixture = async (t: TestApp, org: TestOrganization) => {
  const res = await t.app.inject({
    method: 'POST',
    url: '/emails',
    headers: bearer(org.fullKey),
    payload: message(org, { attachments: [{ filename: 'a.txt', content: Buffer.from('a').toString('base64') }] }),
  });
  const emailId = res.json().id as string;
  const { rows } = await t.db.query<{ id: string }>('SELECT id FROM email_attachments WHERE email_id = $1', [emailId]);
  return `${emailId}/attachments/${rows[0]!.id}`;
};
const attachmentToken = async (t: TestApp, org: TestOrganization) => {
  const [, attachmentId] = (await attachmentFixture(t, org)).split('/attachments/');
  return t.app.signer.sign('attachment', { a: attachmentId, o: org.id, x: Math.floor(Date.now() / 1000) + 3600 });
};

/** A message received for the organization, with one attachment: `<received id>/attachments/<attachment id>`. */
const receivedFixture = async (t: TestApp, org: TestOrganization) => {
  const raw = await new MailComposer({
    from: 'someone@outside.example',
    to: `inbox@${org.domain}`,
    subject: `Received ${unique()}`,
    text: 'Hello',
    attachments: [{ filename: 'a.txt', content: 'a' }],
  })
    .compile()
    .build();
  const { rows: domains } = await t.db.query<{ id: string }>('SELECT id FROM domains WHERE organization_id = $1', [
    org.id,
  ]);
  const { ids } = await receiveMessage(
    { db: t.db, signer: t.app.signer, log: { info: () => {}, warn: () => {}, error: () => {} } },
    {
      raw,
      mailFrom: 'someone@outside.example',
      recipients: [{ address: `inbox@${org.domain}`, organizationId: org.id, domainId: domains[0]!.id }],
      clientAddress: '192.0.2.1',
      helo: 'outside.example',
      tls: false,
    },
  );
  const { rows } = await t.db.query<{ id: string }>(
    'SELECT id FROM received_attachments WHERE received_email_id = $1',
    [ids[0]],
  );
  return `${ids[0]}/attachments/${rows[0]!.id}`;
};
const receivedEmailFixture = async (t: TestApp, org: TestOrganization) =>
  (await receivedFixture(t, org)).split('/attachments/')[0]!;
const receivedFileToken = async (t: TestApp, org: TestOrganization) =>
  t.app.signer.sign('received-file', {
    r: await receivedEmailFixture(t, org),
    o: org.id,
    x: Math.floor(Date.now() / 1000) + 3600,
  });

/** A message with HTML, and the raw source the capture transport would have stored for it. */
const htmlEmailFixture = created('/emails', (org) => message(org, { html: '<p>Hi</p>' }));
const capturedFixture = async (t: TestApp, org: TestOrganization) => {
  const id = await htmlEmailFixture(t, org);
  const path = capturedMessagePath(t.config.dataDir, id);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, 'Subject: Hi\r\n\r\nHello\r\n');
  return id;
};
const previewToken = async (t: TestApp, org: TestOrganization) =>
  t.app.signer.sign('preview', {
    e: await htmlEmailFixture(t, org),
    o: org.id,
    x: Math.floor(Date.now() / 1000) + 3600,
  });

const unique = () => Math.random().toString(36).slice(2);
const topicFixture = created('/topics', () => ({ name: 'fixture', default_subscription: 'opt_in' }));
const contactFixture = created('/contacts', () => ({ email: `c${unique()}@example.com` }));
const contactPropertyFixture = created('/contact-properties', () => ({ key: `k${unique()}`, type: 'string' }));
const eventDefinitionFixture = created('/events', () => ({ name: `e${unique()}` }));
/** An automation: a trigger and a delay, naming nothing else of the organization's. */
const automationBody = () => ({
  name: 'fixture',
  steps: [
    { key: 'start', type: 'trigger', config: { event_name: 'signed_up' } },
    { key: 'pause', type: 'delay', config: { duration: '1 hour' } },
  ],
  connections: [{ from: 'start', to: 'pause', type: 'default' }],
});
const automationFixture = created('/automations', automationBody);
/** A run of an automation, written as the engine writes one: `<automation id>/runs/<run id>`. */
const automationRunFixture = async (t: TestApp, org: TestOrganization) => {
  const automationId = await automationFixture(t, org);
  const { rows } = await t.db.query<{ id: string }>(
    `INSERT INTO automation_runs (organization_id, automation_id, version, event_id, contact_id, contact_email)
     VALUES ($1, $2, 1, gen_random_uuid(), gen_random_uuid(), 'someone@example.com') RETURNING id`,
    [org.id, automationId],
  );
  return `${automationId}/runs/${rows[0]!.id}`;
};
/** A contact import, uploaded as multipart/form-data (queued: no worker runs in this file). */
const contactImportFixture = async (t: TestApp, org: TestOrganization): Promise<string> => {
  const boundary = 'access-fixture';
  const res = await t.app.inject({
    method: 'POST',
    url: '/contacts/imports',
    headers: { ...bearer(org.fullKey), 'content-type': `multipart/form-data; boundary=${boundary}` },
    payload:
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.csv"\r\n` +
      `Content-Type: text/csv\r\n\r\nemail\r\na@example.com\r\n--${boundary}--\r\n`,
  });
  return res.json().id as string;
};
const segmentFixture = created('/segments', () => ({ name: 'fixture' }));
const inboundRouteFixture = created('/inbound-routes', () => ({ match: { recipient_kind: 'catch_all' } }));
/** A contact and a segment of the organization: `<contact id>/segments/<segment id>`, a member when `member`. */
const membershipFixture =
  (member: boolean) =>
  async (t: TestApp, org: TestOrganization): Promise<string> => {
    const segmentId = await segmentFixture(t, org);
    const contactId = await created('/contacts', () => ({
      email: `m${unique()}@example.com`,
      segments: member ? [segmentId] : [],
    }))(t, org);
    return `${contactId}/segments/${segmentId}`;
  };
/** A contact created in an audience (a segment): `<audience id>/contacts/<contact id>`. */
const audienceContactFixture = async (t: TestApp, org: TestOrganization): Promise<string> => {
  const audienceId = await segmentFixture(t, org);
  const contactId = await created(`/audiences/${audienceId}/contacts`, () => ({ email: `u${unique()}@example.com` }))(
    t,
    org,
  );
  return `${audienceId}/contacts/${contactId}`;
};
/** Each test organization's segment that broadcasts are sent to (made in `before`, by organization id). */
const broadcastSegments = new Map<string, string>();
const broadcastBody = (org: TestOrganization, extra: Record<string, unknown> = {}) => ({
  segment_id: broadcastSegments.get(org.id),
  from: `news@${org.domain}`,
  subject: 'Hi',
  html: '<p>Hi</p>',
  ...extra,
});
/** A broadcast: a draft, scheduled (`later`), being sent (`now`: no fan-out worker runs here) or paused. */
const broadcastFixture =
  (state: 'draft' | 'later' | 'now' | 'paused' = 'draft') =>
  async (t: TestApp, org: TestOrganization): Promise<string> => {
    const send =
      state === 'draft' ? {} : state === 'later' ? { send: true, scheduled_at: 'in 1 hour' } : { send: true };
    const id = await created('/broadcasts', () => broadcastBody(org, send))(t, org);
    if (state === 'paused') {
      await t.app.inject({ method: 'POST', url: `/broadcasts/${id}/pause`, headers: bearer(org.fullKey), payload: {} });
    }
    return id;
  };
/** A suppression is named by its id or its address; the table uses the id. */
/** An entry of the organization's request log: a request made with its key, written at once. */
const logFixture = async (t: TestApp, org: TestOrganization) => {
  await t.app.inject({ method: 'GET', url: '/domains', headers: bearer(org.fullKey) });
  await t.app.requestLog.flush();
  const { rows } = await t.db.query<{ id: string }>(
    'SELECT id FROM request_logs WHERE organization_id = $1 ORDER BY created_at DESC LIMIT 1',
    [org.id],
  );
  return rows[0]!.id;
};
const suppressionFixture = async (t: TestApp, org: TestOrganization) => {
  const res = await t.app.inject({
    method: 'POST',
    url: '/suppressions',
    headers: bearer(org.fullKey),
    payload: { email: `s${unique()}@example.com` },
  });
  return res.json().id as string;
};
/** Signed links as a sent message carries them, for a message of the organization. */
const unsubscribeToken = async (t: TestApp, org: TestOrganization) =>
  t.app.signer.sign('unsubscribe', {
    o: org.id,
    a: 'someone@example.com',
    t: await topicFixture(t, org),
    e: await emailFixture(t, org),
  });
/** The link of a topic send to a contact, for the preference page (which lists the contact's opt_in topics). */
const preferenceToken = async (t: TestApp, org: TestOrganization) => {
  const address = `p${unique()}@example.com`;
  await t.app.inject({ method: 'POST', url: '/contacts', headers: bearer(org.fullKey), payload: { email: address } });
  return t.app.signer.sign('unsubscribe', {
    o: org.id,
    a: address,
    t: await topicFixture(t, org),
    e: await emailFixture(t, org),
  });
};
const openToken = async (t: TestApp, org: TestOrganization) =>
  t.app.signer.sign('open', { e: await emailFixture(t, org), r: 'someone@example.com' });
const clickToken = async (t: TestApp, org: TestOrganization) =>
  t.app.signer.sign('click', { e: await emailFixture(t, org), r: 'someone@example.com', u: 'https://example.com/' });

export const ROUTES: Row[] = [
  { method: 'GET', url: '/healthz', access: 'public', ok: 200 },
  { method: 'GET', url: '/readyz', access: 'public', ok: 200 },
  { method: 'GET', url: '/metrics', access: 'public', ok: 200 },
  {
    method: 'POST',
    url: '/auth/login',
    access: 'public',
    ok: 200,
    body: (org) => ({ email: org.userEmail, password: org.password }),
  },
  { method: 'POST', url: '/auth/logout', access: 'session', ok: 200 },
  { method: 'POST', url: '/api-keys', access: 'full', ok: 201, body: () => ({ name: 'new key' }) },
  { method: 'GET', url: '/api-keys', access: 'full', ok: 200 },
  {
    method: 'PATCH',
    url: '/api-keys/:own',
    access: 'full',
    ok: 200,
    body: () => ({ name: 'renamed key' }),
    fixture: apiKeyFixture,
  },
  { method: 'DELETE', url: '/api-keys/:own', access: 'full', ok: 200, fixture: apiKeyFixture },
  {
    method: 'POST',
    url: '/domains',
    access: 'full',
    ok: 201,
    body: () => ({ name: `n${Math.random().toString(36).slice(2)}.example.test` }),
  },
  { method: 'GET', url: '/domains', access: 'full', ok: 200 },
  { method: 'GET', url: '/domains/:own', access: 'full', ok: 200, fixture: domainFixture },
  {
    method: 'PATCH',
    url: '/domains/:own',
    access: 'full',
    ok: 200,
    body: () => ({ open_tracking: false, click_tracking: true }),
    fixture: domainFixture,
  },
  { method: 'DELETE', url: '/domains/:own', access: 'full', ok: 200, fixture: domainFixture },
  { method: 'POST', url: '/domains/:own/verify', access: 'full', ok: 200, fixture: domainFixture },
  { method: 'GET', url: '/domains/:own/dmarc', access: 'full', ok: 200, fixture: domainFixture },
  { method: 'POST', url: '/domains/:own/check', access: 'full', ok: 200, fixture: domainFixture },
  { method: 'GET', url: '/domains/:own/health', access: 'full', ok: 200, fixture: domainFixture },
  {
    method: 'POST',
    url: '/templates',
    access: 'full',
    ok: 201,
    body: () => ({ name: 'new template', subject: 'Hi {{name}}', text: 'Hello {{name}}' }),
  },
  { method: 'GET', url: '/templates', access: 'full', ok: 200 },
  { method: 'GET', url: '/templates/:own', access: 'full', ok: 200, fixture: templateFixture },
  {
    method: 'PATCH',
    url: '/templates/:own',
    access: 'full',
    ok: 200,
    body: () => ({ name: 'renamed' }),
    fixture: templateFixture,
  },
  { method: 'DELETE', url: '/templates/:own', access: 'full', ok: 200, fixture: templateFixture },
  { method: 'POST', url: '/templates/:own/publish', access: 'full', ok: 200, fixture: templateFixture },
  { method: 'POST', url: '/templates/:own/duplicate', access: 'full', ok: 200, fixture: templateFixture },
  { method: 'GET', url: '/openapi.json', access: 'public', ok: 200 },
  // The dashboard's page (503 with a message saying how to build it when web/dist is missing) and files.
  { method: 'GET', url: '/', access: 'public', ok: existsSync(join(DASHBOARD_DIST, 'index.html')) ? 200 : 503 },
  { method: 'GET', url: '/assets/not-built.js', registered: '/assets/:file', access: 'public', ok: 404 },
  { method: 'GET', url: '/guide', access: 'public', ok: 200 },
  { method: 'GET', url: '/guide/style.css', access: 'public', ok: 200 },
  { method: 'GET', url: '/guide/webhooks', registered: '/guide/:page', access: 'public', ok: 200 },
  {
    method: 'GET',
    url: '/guide/screenshots/search.png',
    registered: '/guide/screenshots/:file',
    access: 'public',
    ok: 200,
  },
  { method: 'POST', url: '/emails', access: 'send', ok: 200, body: (org) => message(org) },
  { method: 'POST', url: '/emails/batch', access: 'send', ok: 200, body: (org) => [message(org), message(org)] },
  { method: 'GET', url: '/emails/:own', access: 'full', ok: 200, fixture: emailFixture },
  { method: 'GET', url: '/emails/:own/events', access: 'full', ok: 200, fixture: emailFixture },
  { method: 'POST', url: '/emails/:own/cancel', access: 'full', ok: 200, fixture: emailFixture },
  {
    method: 'PATCH',
    url: '/emails/:own',
    access: 'full',
    ok: 200,
    body: () => ({ scheduled_at: new Date(Date.now() + 7200_000).toISOString() }),
    fixture: emailFixture,
  },
  { method: 'GET', url: '/emails', access: 'full', ok: 200 },
  { method: 'GET', url: '/connection-settings', access: 'full', ok: 200 },
  { method: 'GET', url: '/emails/:own/attachments', access: 'full', ok: 200, fixture: emailFixture },
  {
    method: 'GET',
    url: '/emails/:own',
    registered: '/emails/:id/attachments/:attachment_id',
    access: 'full',
    ok: 200,
    fixture: attachmentFixture,
  },
  { method: 'GET', url: '/attachments/:token', access: 'public', ok: 200, token: attachmentToken },
  { method: 'GET', url: '/emails/:own/raw', access: 'full', ok: 200, fixture: capturedFixture },
  // Received mail (Resend's emails.receiving): read as sent mail is.
  { method: 'GET', url: '/emails/receiving', access: 'full', ok: 200 },
  { method: 'GET', url: '/emails/receiving/:own', access: 'full', ok: 200, fixture: receivedEmailFixture },
  {
    method: 'GET',
    url: '/emails/receiving/:own/attachments',
    access: 'full',
    ok: 200,
    fixture: receivedEmailFixture,
  },
  {
    method: 'GET',
    url: '/emails/receiving/:own',
    registered: '/emails/receiving/:id/attachments/:attachment_id',
    access: 'full',
    ok: 200,
    fixture: receivedFixture,
  },
  { method: 'GET', url: '/emails/receiving/files/:token', access: 'public', ok: 200, token: receivedFileToken },
  {
    method: 'GET',
    url: '/emails/receiving/:own/preview',
    access: 'full',
    ok: 200,
    fixture: receivedEmailFixture,
  },
  { method: 'GET', url: '/emails/:own/preview', access: 'full', ok: 200, fixture: htmlEmailFixture },
  { method: 'GET', url: '/previews/:token', access: 'public', ok: 200, token: previewToken },
  { method: 'GET', url: '/overview', access: 'full', ok: 200 },
  { method: 'GET', url: '/emails/metrics', access: 'full', ok: 200 },
  {
    method: 'POST',
    url: '/templates/render',
    access: 'full',
    ok: 200,
    body: () => ({ subject: 'Hi {{name}}', html: '<p>{{name}}</p>', text: 'Hello', variables: { name: 'Ann' } }),
  },
  { method: 'POST', url: '/webhooks', access: 'full', ok: 201, body: () => ({ endpoint: 'http://127.0.0.1:9/hook' }) },
  { method: 'GET', url: '/webhooks', access: 'session', ok: 200 },
  { method: 'GET', url: '/webhooks/:own', access: 'full', ok: 200, fixture: webhookFixture },
  {
    method: 'PATCH',
    url: '/webhooks/:own',
    access: 'full',
    ok: 200,
    body: () => ({ status: 'disabled' }),
    fixture: webhookFixture,
  },
  { method: 'DELETE', url: '/webhooks/:own', access: 'session', ok: 200, fixture: webhookFixture },
  { method: 'POST', url: '/webhooks/:own/signing-secret/rotate', access: 'session', ok: 200, fixture: webhookFixture },
  { method: 'GET', url: '/webhooks/:own/deliveries', access: 'session', ok: 200, fixture: webhookFixture },
  { method: 'POST', url: '/webhooks/:own/replay', access: 'session', ok: 200, fixture: deliveryFixture },
  {
    method: 'POST',
    url: '/webhooks/:own/test',
    access: 'session',
    ok: 200,
    body: () => ({ type: 'email.delivered' }),
    fixture: webhookFixture,
  },
  {
    method: 'POST',
    url: '/webhooks/:own/deliveries/replay',
    access: 'session',
    ok: 200,
    body: () => ({ since: '2020-01-01T00:00:00Z' }),
    fixture: webhookFixture,
  },
  { method: 'GET', url: '/webhooks/:own/events', access: 'session', ok: 200, fixture: webhookFixture },
  {
    method: 'GET',
    url: '/webhooks/:own',
    registered: '/webhooks/:id/events/:event_id',
    access: 'session',
    ok: 200,
    fixture: eventFixture,
  },
  {
    method: 'GET',
    url: '/webhooks/:own/attempts',
    registered: '/webhooks/:id/events/:event_id/attempts',
    access: 'session',
    ok: 200,
    fixture: eventFixture,
  },
  {
    method: 'POST',
    url: '/webhooks/:own/replay',
    registered: '/webhooks/:id/events/:event_id/replay',
    access: 'session',
    ok: 200,
    fixture: eventFixture,
  },
  {
    method: 'POST',
    url: '/topics',
    access: 'full',
    ok: 201,
    body: () => ({ name: 'news', default_subscription: 'opt_out' }),
  },
  { method: 'GET', url: '/topics', access: 'full', ok: 200 },
  { method: 'GET', url: '/topics/:own', access: 'full', ok: 200, fixture: topicFixture },
  { method: 'PATCH', url: '/topics/:own', access: 'full', ok: 200, body: () => ({ name: 'x' }), fixture: topicFixture },
  { method: 'DELETE', url: '/topics/:own', access: 'full', ok: 200, fixture: topicFixture },
  { method: 'POST', url: '/contacts', access: 'full', ok: 201, body: () => ({ email: `n${unique()}@example.com` }) },
  { method: 'GET', url: '/contacts', access: 'full', ok: 200 },
  ...(['GET', 'PATCH', 'DELETE'] as const).map((method): Row => ({
    method,
    url: '/contacts/:own',
    registered: '/contacts/:id_or_email',
    access: 'full',
    ok: 200,
    ...(method === 'PATCH' ? { body: () => ({ first_name: 'x' }) } : {}),
    fixture: contactFixture,
  })),
  {
    method: 'GET',
    url: '/contacts/:own/topics',
    registered: '/contacts/:id_or_email/topics',
    access: 'full',
    ok: 200,
    fixture: contactFixture,
  },
  // A body that is not multipart/form-data is a 400 (the upload itself is in contact-imports.test.ts).
  { method: 'POST', url: '/contacts/imports', access: 'full', ok: 400 },
  { method: 'GET', url: '/contacts/imports', access: 'full', ok: 200 },
  { method: 'GET', url: '/contacts/imports/:own', access: 'full', ok: 200, fixture: contactImportFixture },
  { method: 'GET', url: '/contacts/imports/:own/errors', access: 'full', ok: 200, fixture: contactImportFixture },
  {
    method: 'PATCH',
    url: '/contacts/:own/topics',
    registered: '/contacts/:id_or_email/topics',
    access: 'full',
    ok: 200,
    body: () => [],
    fixture: contactFixture,
  },
  {
    method: 'POST',
    url: '/contact-properties',
    access: 'full',
    ok: 201,
    body: () => ({ key: `k${unique()}`, type: 'string', fallback_value: 'none' }),
  },
  { method: 'GET', url: '/contact-properties', access: 'full', ok: 200 },
  { method: 'GET', url: '/contact-properties/:own', access: 'full', ok: 200, fixture: contactPropertyFixture },
  {
    method: 'PATCH',
    url: '/contact-properties/:own',
    access: 'full',
    ok: 200,
    body: () => ({ fallback_value: 'x' }),
    fixture: contactPropertyFixture,
  },
  { method: 'DELETE', url: '/contact-properties/:own', access: 'full', ok: 200, fixture: contactPropertyFixture },
  {
    method: 'POST',
    url: '/events',
    access: 'full',
    ok: 201,
    body: () => ({ name: `e${unique()}`, schema: { plan: 'string' } }),
  },
  { method: 'GET', url: '/events', access: 'full', ok: 200 },
  ...(['GET', 'PATCH', 'DELETE'] as const).map((method): Row => ({
    method,
    url: '/events/:own',
    registered: '/events/:identifier',
    access: 'full',
    ok: 200,
    ...(method === 'PATCH' ? { body: () => ({ schema: { plan: 'string' } }) } : {}),
    fixture: eventDefinitionFixture,
  })),
  {
    method: 'POST',
    url: '/events/send',
    access: 'send',
    ok: 202,
    body: () => ({ event: 'signed_up', email: 'someone@example.com', payload: { plan: 'pro' } }),
  },
  { method: 'GET', url: '/received-events', access: 'full', ok: 200 },
  // Automations (Resend's, and Mailroom's step counts).
  { method: 'POST', url: '/automations', access: 'full', ok: 201, body: automationBody },
  { method: 'GET', url: '/automations', access: 'full', ok: 200 },
  { method: 'GET', url: '/automations/:own', access: 'full', ok: 200, fixture: automationFixture },
  {
    method: 'PATCH',
    url: '/automations/:own',
    access: 'full',
    ok: 200,
    body: () => ({ name: 'x' }),
    fixture: automationFixture,
  },
  { method: 'DELETE', url: '/automations/:own', access: 'full', ok: 200, fixture: automationFixture },
  { method: 'POST', url: '/automations/:own/duplicate', access: 'full', ok: 201, fixture: automationFixture },
  { method: 'POST', url: '/automations/:own/stop', access: 'full', ok: 200, fixture: automationFixture },
  { method: 'GET', url: '/automations/:own/runs', access: 'full', ok: 200, fixture: automationFixture },
  {
    method: 'GET',
    url: '/automations/:own',
    registered: '/automations/:id/runs/:run_id',
    access: 'full',
    ok: 200,
    fixture: automationRunFixture,
  },
  { method: 'GET', url: '/automations/:own/step-counts', access: 'full', ok: 200, fixture: automationFixture },
  { method: 'POST', url: '/segments', access: 'full', ok: 201, body: () => ({ name: 'members' }) },
  { method: 'GET', url: '/segments', access: 'full', ok: 200 },
  { method: 'GET', url: '/segments/:own', access: 'full', ok: 200, fixture: segmentFixture },
  {
    method: 'PATCH',
    url: '/segments/:own',
    access: 'full',
    ok: 200,
    body: () => ({ name: 'x' }),
    fixture: segmentFixture,
  },
  { method: 'DELETE', url: '/segments/:own', access: 'full', ok: 200, fixture: segmentFixture },
  {
    method: 'GET',
    url: '/segments/:own/contacts',
    registered: '/segments/:id/contacts',
    access: 'full',
    ok: 200,
    fixture: segmentFixture,
  },
  // Broadcasts (Resend's, and Mailroom's pause, resume, preview and test).
  { method: 'POST', url: '/broadcasts', access: 'full', ok: 201, body: (org) => broadcastBody(org) },
  { method: 'GET', url: '/broadcasts', access: 'full', ok: 200 },
  { method: 'GET', url: '/broadcasts/:own', access: 'full', ok: 200, fixture: broadcastFixture() },
  {
    method: 'PATCH',
    url: '/broadcasts/:own',
    access: 'full',
    ok: 200,
    body: () => ({ subject: 'Hello' }),
    fixture: broadcastFixture(),
  },
  { method: 'DELETE', url: '/broadcasts/:own', access: 'full', ok: 200, fixture: broadcastFixture() },
  {
    method: 'POST',
    url: '/broadcasts/:own/send',
    access: 'full',
    ok: 200,
    body: () => ({}),
    fixture: broadcastFixture(),
  },
  { method: 'POST', url: '/broadcasts/:own/cancel', access: 'full', ok: 200, fixture: broadcastFixture('later') },
  {
    method: 'POST',
    url: '/broadcasts/:own/pause',
    access: 'full',
    ok: 200,
    body: () => ({ reason: 'checking' }),
    fixture: broadcastFixture('now'),
  },
  { method: 'POST', url: '/broadcasts/:own/resume', access: 'full', ok: 200, fixture: broadcastFixture('paused') },
  {
    method: 'POST',
    url: '/broadcasts/:own/preview',
    access: 'full',
    ok: 200,
    body: () => ({ email: 'someone@example.com' }),
    fixture: broadcastFixture(),
  },
  {
    method: 'POST',
    url: '/broadcasts/:own/test',
    access: 'full',
    ok: 200,
    body: () => ({ to: 'someone@example.com' }),
    fixture: broadcastFixture(),
  },
  {
    method: 'GET',
    url: '/broadcasts/:own/recipients?type=sent',
    registered: '/broadcasts/:id/recipients',
    access: 'full',
    ok: 200,
    fixture: broadcastFixture(),
  },
  { method: 'GET', url: '/broadcasts/:own/clicked-links', access: 'full', ok: 200, fixture: broadcastFixture() },
  { method: 'POST', url: '/broadcasts/:own/duplicate', access: 'full', ok: 201, fixture: broadcastFixture() },
  // Inbound routes (Mailroom's own API).
  {
    method: 'POST',
    url: '/inbound-routes',
    access: 'full',
    ok: 201,
    body: () => ({ match: { recipient_kind: 'catch_all' } }),
  },
  { method: 'GET', url: '/inbound-routes', access: 'full', ok: 200 },
  { method: 'GET', url: '/inbound-routes/:own', access: 'full', ok: 200, fixture: inboundRouteFixture },
  {
    method: 'PATCH',
    url: '/inbound-routes/:own',
    access: 'full',
    ok: 200,
    body: () => ({ enabled: false }),
    fixture: inboundRouteFixture,
  },
  { method: 'DELETE', url: '/inbound-routes/:own', access: 'full', ok: 200, fixture: inboundRouteFixture },
  // Resend's older name for segments: the same rows.
  { method: 'POST', url: '/audiences', access: 'full', ok: 201, body: () => ({ name: 'members' }) },
  { method: 'GET', url: '/audiences', access: 'full', ok: 200 },
  { method: 'GET', url: '/audiences/:own', access: 'full', ok: 200, fixture: segmentFixture },
  { method: 'DELETE', url: '/audiences/:own', access: 'full', ok: 200, fixture: segmentFixture },
  {
    method: 'GET',
    url: '/audiences/:own/contacts',
    registered: '/audiences/:id/contacts',
    access: 'full',
    ok: 200,
    fixture: segmentFixture,
  },
  {
    method: 'POST',
    url: '/audiences/:own/contacts',
    registered: '/audiences/:id/contacts',
    access: 'full',
    ok: 201,
    body: () => ({ email: `a${unique()}@example.com` }),
    fixture: segmentFixture,
  },
  ...(['GET', 'PATCH', 'DELETE'] as const).map((method): Row => ({
    method,
    url: '/audiences/:own',
    registered: '/audiences/:id/contacts/:id_or_email',
    access: 'full',
    ok: 200,
    ...(method === 'PATCH' ? { body: () => ({ first_name: 'Ada' }) } : {}),
    fixture: audienceContactFixture,
  })),
  {
    method: 'GET',
    url: '/contacts/:own/segments',
    registered: '/contacts/:id_or_email/segments',
    access: 'full',
    ok: 200,
    fixture: contactFixture,
  },
  {
    method: 'POST',
    url: '/contacts/:own',
    registered: '/contacts/:id_or_email/segments/:segment_id',
    access: 'full',
    ok: 200,
    fixture: membershipFixture(false),
  },
  {
    method: 'DELETE',
    url: '/contacts/:own',
    registered: '/contacts/:id_or_email/segments/:segment_id',
    access: 'full',
    ok: 200,
    fixture: membershipFixture(true),
  },
  { method: 'GET', url: '/unsubscribe/:token', access: 'public', ok: 200, token: unsubscribeToken },
  // RFC 8058's one-click POST: the link is the request, whatever body a mail client sends is not read.
  { method: 'POST', url: '/unsubscribe/:token', access: 'public', ok: 200, token: unsubscribeToken, bodyUnread: true },
  // The preference page's choice: a form post, whose body is not read either.
  {
    method: 'POST',
    url: '/unsubscribe/:token/topics/:own/opt_out',
    registered: '/unsubscribe/:token/topics/:topic/:subscription',
    access: 'public',
    ok: 200,
    fixture: topicFixture,
    token: preferenceToken,
    bodyUnread: true,
  },
  { method: 'GET', url: '/t/o/:token', access: 'public', ok: 200, token: openToken },
  { method: 'GET', url: '/t/c/:token', access: 'public', ok: 302, token: clickToken },
  { method: 'GET', url: '/organization', access: 'full', ok: 200 },
  { method: 'PATCH', url: '/organization', access: 'full', ok: 200, body: () => ({ open_tracking: true }) },
  { method: 'GET', url: '/destinations', access: 'full', ok: 200 },
  { method: 'GET', url: '/sources', access: 'full', ok: 200 },
  { method: 'GET', url: '/pools', access: 'full', ok: 200 },
  { method: 'GET', url: '/suppressions', access: 'full', ok: 200 },
  {
    method: 'POST',
    url: '/suppressions',
    access: 'full',
    ok: 201,
    body: () => ({ email: `p${unique()}@example.com` }),
  },
  {
    method: 'POST',
    url: '/suppressions/batch/add',
    access: 'full',
    ok: 201,
    body: () => ({ emails: [`b${unique()}@example.com`, `c${unique()}@example.com`] }),
  },
  {
    method: 'POST',
    url: '/suppressions/batch/remove',
    access: 'full',
    ok: 200,
    body: () => ({ emails: [`r${unique()}@example.com`] }),
  },
  ...(['GET', 'DELETE'] as const).map((method): Row => ({
    method,
    url: '/suppressions/:own',
    registered: '/suppressions/:id_or_email',
    access: 'full',
    ok: 200,
    fixture: suppressionFixture,
  })),
  { method: 'GET', url: '/logs', access: 'full', ok: 200 },
  { method: 'GET', url: '/search?q=acme', registered: '/search', access: 'full', ok: 200 },
  { method: 'GET', url: '/logs/:own', access: 'full', ok: 200, fixture: logFixture },
];

/** The path of every string leaf of a JSON value. */
function stringPaths(value: unknown, path: Array<string | number> = []): Array<Array<string | number>> {
  if (typeof value === 'string') return [path];
  if (Array.isArray(value)) return value.flatMap((item, i) => stringPaths(item, [...path, i]));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([key, item]) => stringPaths(item, [...path, key]));
  }
  return [];
}

/** A copy of the value with the string at `path` replaced. */
function withString(value: unknown, path: Array<string | number>, replacement: string): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  const copy = (Array.isArray(value) ? [...value] : { ...(value as object) }) as Record<string | number, unknown>;
  copy[head!] = withString(copy[head!], rest, replacement);
  return copy;
}

// Who calls, and for each access level what they get: a status and an error name.
type Caller = 'none' | 'bad' | 'full' | 'sending' | 'session';
const EXPECTED: Record<Access, Record<Caller, [number, string] | 'ok'>> = {
  public: { none: 'ok', bad: 'ok', full: 'ok', sending: 'ok', session: 'ok' },
  send: { none: [401, 'missing_api_key'], bad: [401, 'invalid_api_key'], full: 'ok', sending: 'ok', session: 'ok' },
  full: {
    none: [401, 'missing_api_key'],
    bad: [401, 'invalid_api_key'],
    full: 'ok',
    sending: [401, 'restricted_api_key'],
    session: 'ok',
  },
  session: {
    none: [401, 'missing_api_key'],
    bad: [401, 'invalid_api_key'],
    full: [401, 'session_required'],
    sending: [401, 'session_required'],
    session: 'ok',
  },
};

describe('access to every route', () => {
  let t: TestApp;
  let orgs: { a: TestOrganization; b: TestOrganization };
  let dataDir: string;

  before(async () => {
    // Where GET /emails/:id/raw reads captured messages.
    dataDir = await mkdtemp(join(tmpdir(), 'mailroom-access-'));
    // Fast DNS failure: verify is called with nothing published.
    t = await buildTestApp({
      MAILROOM_DATA_DIR: dataDir,
      MAILROOM_DNS_SERVERS: '127.0.0.1:9',
      MAILROOM_DNS_TIMEOUT_MS: '200',
      MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    });
    orgs = {
      a: await createTestOrganization(t.db, t.config, 'a'),
      b: await createTestOrganization(t.db, t.config, 'b'),
    };
    for (const org of Object.values(orgs)) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/segments',
        headers: bearer(org.fullKey),
        payload: { name: 'to' },
      });
      broadcastSegments.set(org.id, res.json().id);
    }
  });
  after(async () => {
    await t.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const tokenOf = async (caller: Caller, org: TestOrganization): Promise<Record<string, string>> => {
    switch (caller) {
      case 'none':
        return {};
      case 'bad':
        return bearer('mr_' + 'x'.repeat(43));
      case 'full':
        return bearer(org.fullKey);
      case 'sending':
        return bearer(org.sendingKey);
      case 'session': {
        // A fresh session each time: /auth/logout ends the one it is called with.
        const res = await t.app.inject({
          method: 'POST',
          url: '/auth/login',
          payload: { email: org.userEmail, password: org.password },
        });
        return bearer(res.json().token);
      }
    }
  };

  for (const route of ROUTES) {
    for (const caller of ['none', 'bad', 'full', 'sending', 'session'] as const) {
      test(`${route.method} ${route.url} as ${caller}`, async () => {
        let url = route.fixture ? route.url.replace(':own', await route.fixture(t, orgs.a)) : route.url;
        if (route.token) url = url.replace(':token', await route.token(t, orgs.a));
        const res = await t.app.inject({
          method: route.method,
          url,
          headers: await tokenOf(caller, orgs.a),
          ...(route.body ? { payload: route.body(orgs.a) as object } : {}),
        });
        const expected = EXPECTED[route.access][caller];
        if (expected === 'ok') {
          assert.equal(res.statusCode, route.ok, res.body);
        } else {
          assert.equal(res.statusCode, expected[0], res.body);
          assert.deepEqual(
            { statusCode: res.json().statusCode, name: res.json().name },
            { statusCode: expected[0], name: expected[1] },
          );
        }
      });
    }

    if (route.fixture) {
      test(`${route.method} ${route.url} with another organization's id is 404`, async () => {
        const othersId = await route.fixture!(t, orgs.b);
        const allowed = (['full', 'sending', 'session'] as const).filter((c) => EXPECTED[route.access][c] === 'ok');
        for (const caller of allowed) {
          const res = await t.app.inject({
            method: route.method,
            url: route.url.replace(':own', othersId),
            headers: await tokenOf(caller, orgs.a),
            ...(route.body ? { payload: route.body(orgs.a) as object } : {}),
          });
          assert.equal(res.statusCode, 404, res.body);
          assert.equal(res.json().name, 'not_found');
        }
        // And it is still there for its owner.
        if (route.method !== 'DELETE') return;
        const owner = await t.app.inject({
          method: route.method,
          url: route.url.replace(':own', othersId),
          headers: await tokenOf(allowed[0]!, orgs.b),
        });
        assert.equal(owner.statusCode, route.ok, owner.body);
      });
    }
  }

  // Every string of every body, in turn, carrying what the database cannot store: refused by name.
  // (Routes whose bodies carry no string, only switches, are left out.)
  const sample = { id: 'org', domain: 'example.test', userEmail: 'u@example.test', password: 'p' } as TestOrganization;
  for (const route of ROUTES.filter((r) => r.body && stringPaths(r.body(sample)).length > 0)) {
    test(`${route.method} ${route.url}: U+0000 or an unpaired surrogate in any string is a 400 naming it`, async () => {
      const body = route.body!(orgs.a);
      const leaves = stringPaths(body);
      for (const [index, leaf] of leaves.entries()) {
        const bad = index % 2 === 0 ? 'a\u0000b' : 'a\ud800b';
        const url = route.fixture ? route.url.replace(':own', await route.fixture(t, orgs.a)) : route.url;
        const res = await t.app.inject({
          method: route.method,
          url,
          headers: await tokenOf(
            route.access === 'session' ? 'session' : route.access === 'public' ? 'none' : 'full',
            orgs.a,
          ),
          payload: withString(body, leaf, bad) as object,
        });
        assert.equal(res.statusCode, 400, `${leaf.join('.')}: ${res.body}`);
        assert.deepEqual([res.json().name, res.json().field], ['validation_error', leaf.join('.')]);
      }
    });
  }

  // Every route that takes a body, sent one nested 10,000 levels deep (as arrays, as objects, and as one
  // deep value in place of a string of a valid body): refused where it is parsed, never a 500.
  const DEPTH = 10_000;
  const deepBodies = (route: Row, org: TestOrganization): Array<[string, string]> => {
    const bodies: Array<[string, string]> = [
      ['arrays', '['.repeat(DEPTH) + ']'.repeat(DEPTH)],
      ['objects', '{"a":'.repeat(DEPTH) + '1' + '}'.repeat(DEPTH)],
    ];
    const body = route.body?.(org);
    const leaf = body === undefined ? undefined : stringPaths(body)[0];
    const inside = body === undefined ? undefined : leaf ? withString(body, leaf, 'DEEP') : { ...body, deep: 'DEEP' };
    if (inside !== undefined)
      bodies.push(['a deep value inside a valid body', JSON.stringify(inside).replace('"DEEP"', bodies[0]![1])]);
    return bodies;
  };
  for (const route of ROUTES.filter((r) => r.method !== 'GET')) {
    test(`${route.method} ${route.url}: a body nested ${DEPTH} levels deep is 400 validation_error`, async () => {
      for (const [shape, payload] of deepBodies(route, orgs.a)) {
        const url = route.fixture ? route.url.replace(':own', await route.fixture(t, orgs.a)) : route.url;
        const res = await t.app.inject({
          method: route.method,
          url: route.token ? url.replace(':token', await route.token(t, orgs.a)) : url,
          headers: {
            ...(await tokenOf(
              route.access === 'session' ? 'session' : route.access === 'public' ? 'none' : 'full',
              orgs.a,
            )),
            'content-type': 'application/json',
          },
          payload,
        });
        if (route.bodyUnread) {
          assert.equal(res.statusCode, route.ok, `${shape}: ${res.body}`);
          continue;
        }
        assert.equal(res.statusCode, 400, `${shape}: ${res.body}`);
        assert.equal(res.json().name, 'validation_error', shape);
        assert.match(res.json().message, /nested more than 64 levels/, shape);
      }
    });
  }

  // The limit's edge: MAX_JSON_DEPTH (64) levels is the deepest body that is parsed and reaches the
  // route's validation (its answer is the one the same mistake gets one level deep); 65 is refused for depth.
  test('POST /emails: a body nested exactly 64 levels deep gets the route validation answer, 65 the depth refusal', async () => {
    // The message's `to` as an address inside `arrays` arrays: the body's object is one more level.
    const body = (arrays: number) =>
      JSON.stringify(message(orgs.a, { to: 'DEEP' })).replace(
        '"DEEP"',
        `${'['.repeat(arrays)}"x@example.com"${']'.repeat(arrays)}`,
      );
    const post = (payload: string) =>
      t.app.inject({
        method: 'POST',
        url: '/emails',
        headers: { ...bearer(orgs.a.fullKey), 'content-type': 'application/json' },
        payload,
      });
    const shallow = await post(body(2));
    assert.equal(shallow.statusCode, 400, shallow.body);
    assert.equal(shallow.json().field, 'to.0', shallow.body);

    const atLimit = await post(body(63));
    assert.equal(atLimit.statusCode, 400, atLimit.body);
    assert.deepEqual(atLimit.json(), shallow.json());

    const overLimit = await post(body(64));
    assert.equal(overLimit.statusCode, 400, overLimit.body);
    assert.equal(overLimit.json().name, 'validation_error');
    assert.equal(overLimit.json().message, 'The JSON body is nested more than 64 levels deep (arrays and objects)');
  });

  test('every route of the app has a row in this table', () => {
    const declared = new Set(
      ROUTES.map(
        (r) =>
          `${r.method} ${r.registered ?? r.url.replace(':own/replay', ':id/deliveries/:delivery_id/replay').replace(':own', ':id')} ${r.access}`,
      ),
    );
    const registered = t.app.routeList.map((r) => `${r.method} ${r.url} ${r.access}`);
    const missing = registered.filter((route) => !declared.has(route));
    assert.deepEqual(missing, [], 'routes without a row (or with another access) in test/access.test.ts');
  });
});
