// What the dashboard's own features rest on, through the API: the email list's search by part of an
// address or subject, inline (cid:) images in a message's preview, and the connection settings the
// first-run examples are built from.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send, sendBatch } from './helpers/emails.ts';
import { embedInlineImages } from '../src/emails/email-preview.ts';

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;

before(async () => {
  t = await buildTestApp({ MAILROOM_PUBLIC_URL: 'https://mail.example.test' });
  org = await createTestOrganization(t.db, t.config, 'search');
  other = await createTestOrganization(t.db, t.config, 'search-other');
});
after(() => t.close());

const get = (url: string, token = org.fullKey) => t.app.inject({ method: 'GET', url, headers: bearer(token) });

describe('GET /emails?search=', () => {
  before(async () => {
    const res = await sendBatch(t.app, org.fullKey, [
      message(org, { subject: 'Your receipt', to: 'Alice <Alice.Smith@Example.com>' }),
      message(org, { subject: 'Welcome aboard', to: 'bob@example.org', cc: 'carol@shop.example' }),
      message(org, { subject: '100% off_today', to: 'dave@example.net', bcc: 'x_y@example.net' }),
      message(org, { subject: 'Password reset', to: 'erin@example.net' }),
    ]);
    assert.equal(res.statusCode, 200, res.body);
    // Another organization's message matches too, and must never be listed.
    assert.equal(
      (await send(t.app, other.fullKey, message(other, { subject: 'Your receipt', to: 'alice@example.com' })))
        .statusCode,
      200,
    );
  });

  const subjects = async (search: string, token = org.fullKey) => {
    const res = await get(`/emails?search=${encodeURIComponent(search)}`, token);
    assert.equal(res.statusCode, 200, res.body);
    return (res.json().data as Array<{ subject: string }>).map((e) => e.subject).sort();
  };

  test('part of a recipient address (to, cc or bcc), in any case', async () => {
    assert.deepEqual(await subjects('alice'), ['Your receipt']);
    assert.deepEqual(await subjects('ALICE.sm'), ['Your receipt']);
    assert.deepEqual(await subjects('example.com'), ['Your receipt']);
    assert.deepEqual(await subjects('shop.example'), ['Welcome aboard']); // cc
    assert.deepEqual(await subjects('example.net'), ['100% off_today', 'Password reset']);
    assert.deepEqual(await subjects('x_y@'), ['100% off_today']); // bcc
  });

  test('part of the subject, in any case', async () => {
    assert.deepEqual(await subjects('receipt'), ['Your receipt']);
    assert.deepEqual(await subjects('WELCOME'), ['Welcome aboard']);
    assert.deepEqual(await subjects('e'), ['100% off_today', 'Password reset', 'Welcome aboard', 'Your receipt']);
  });

  test('% and _ are themselves, not wildcards; a backslash too', async () => {
    assert.deepEqual(await subjects('100%'), ['100% off_today']);
    assert.deepEqual(await subjects('%'), ['100% off_today']);
    assert.deepEqual(await subjects('f_t'), ['100% off_today']);
    assert.deepEqual(await subjects('_'), ['100% off_today']); // only x_y and off_today have one
    assert.deepEqual(await subjects('a_i'), []); // "ali" would match with _ as a wildcard
    assert.deepEqual(await subjects('\\'), []);
    assert.deepEqual(await subjects('nothing like it'), []);
  });

  test("only the caller's organization; combined with the other filters and pages", async () => {
    assert.deepEqual(await subjects('receipt', other.fullKey), ['Your receipt']);
    const res = await get('/emails?search=example.net&limit=1');
    const first = res.json();
    assert.equal(first.data.length, 1);
    assert.equal(first.has_more, true);
    const next = (await get(`/emails?search=example.net&limit=1&after=${first.data[0].id}`)).json();
    assert.equal(next.data.length, 1);
    assert.equal(next.has_more, false);
    assert.notEqual(next.data[0].id, first.data[0].id);
    const both = (await get('/emails?search=example.net&recipient=erin@example.net')).json();
    assert.deepEqual(
      both.data.map((e: { subject: string }) => e.subject),
      ['Password reset'],
    );
  });

  test('an empty or too long search is a validation_error in the envelope', async () => {
    for (const url of ['/emails?search=', `/emails?search=${'a'.repeat(321)}`]) {
      const res = await get(url);
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().name, 'validation_error');
      assert.equal(res.json().statusCode, 400);
    }
  });
});

describe('preview: inline images', () => {
  const png = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
    'base64',
  );

  test('cid: references show the attachment as a data: URL; other references are left alone', async () => {
    const html = [
      '<img alt="logo" src="cid:logo@acme">',
      "<img alt='bracketed' src='cid:%3Clogo@acme%3E'>",
      '<td background=cid:logo@acme>',
      '<div style="background: url(cid:logo@acme)">',
      '<img alt="missing" src="cid:nothing">',
      '<img alt="not an image" src="cid:notes">',
      '<p>Write cid:logo@acme in prose</p>',
    ].join('\n');
    const res = await send(
      t.app,
      org.fullKey,
      message(org, {
        html,
        attachments: [
          { filename: 'logo.png', content: png.toString('base64'), content_id: 'logo@acme' },
          { filename: 'notes.txt', content: Buffer.from('hi').toString('base64'), content_id: 'notes' },
        ],
      }),
    );
    assert.equal(res.statusCode, 200, res.body);
    const link = (await get(`/emails/${res.json().id}/preview`)).json().html_url as string;
    const token = link.slice('https://mail.example.test/previews/'.length);
    const page = await t.app.inject({ method: 'GET', url: `/previews/${token}` });
    assert.equal(page.statusCode, 200);
    const data = `data:image/png;base64,${png.toString('base64')}`;
    assert.equal(
      page.body,
      [
        `<img alt="logo" src="${data}">`,
        `<img alt='bracketed' src='${data}'>`,
        `<td background=${data}>`,
        `<div style="background: url(${data})">`,
        '<img alt="missing" src="cid:nothing">',
        '<img alt="not an image" src="cid:notes">',
        '<p>Write cid:logo@acme in prose</p>',
      ].join('\n'),
    );
    // The policy is unchanged: data: images, nothing from the network.
    assert.match(String(page.headers['content-security-policy']), /img-src data:;/);
  });

  test('an image type that is not one is not embedded', () => {
    const html = '<img src="cid:a">';
    const images = [{ content_id: 'a', content_type: 'image/png;x=<script>', content: new Uint8Array([1]) }];
    assert.equal(embedInlineImages(html, images), html);
  });
});

describe('GET /connection-settings', () => {
  test("the public URL, and SMTP on the embedded default's 127.0.0.1:2587 (PGlite) or off (PostgreSQL)", async () => {
    const res = await get('/connection-settings', org.session);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.object, 'connection_settings');
    assert.equal(body.api_url, 'https://mail.example.test');
    assert.deepEqual(body.smtp.usernames, ['mailroom', 'resend']);
    if (t.db.kind === 'pglite') {
      assert.equal(body.smtp.host, '127.0.0.1');
      assert.deepEqual(body.smtp.listeners, [{ port: 2587, security: 'starttls' }]);
    } else {
      assert.equal(body.smtp.host, 'mail.example.test');
      assert.deepEqual(body.smtp.listeners, []);
    }
  });

  test('configured ports, on the public host', async () => {
    const configured = await buildTestApp({
      MAILROOM_PUBLIC_URL: 'https://mail.acme.example/',
      MAILROOM_SUBMISSION_PORT: '587',
      MAILROOM_SUBMISSIONS_PORT: '465',
    });
    try {
      const owner = await createTestOrganization(configured.db, configured.config, 'settings');
      const body = (
        await configured.app.inject({ method: 'GET', url: '/connection-settings', headers: bearer(owner.fullKey) })
      ).json();
      assert.equal(body.api_url, 'https://mail.acme.example');
      assert.equal(body.smtp.host, 'mail.acme.example');
      assert.deepEqual(body.smtp.listeners, [
        { port: 587, security: 'starttls' },
        { port: 465, security: 'tls' },
      ]);
    } finally {
      await configured.close();
    }
  });
});
