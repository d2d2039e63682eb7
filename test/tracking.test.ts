// Open and click tracking: how a recipient's copy of the HTML is rewritten (addTracking), then the pixel
// and the links fetched over real HTTP from the listening app, with what that records and emits; last,
// the switches of a domain overriding its organization's, with a real delivery worker and SMTP sink.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { createSigner } from '../src/platform/signing.ts';
import { buildApp } from '../src/app.ts';
import { publicBaseUrl } from '../src/platform/config.ts';
import { addTracking, readTrackingToken, type TrackingOptions } from '../src/tracking/tracking-links.ts';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { message, send } from './helpers/emails.ts';
import { freePort } from './helpers/server-process.ts';
import { withMethods } from './helpers/database.ts';
import { startTestDelivery, type TestDelivery } from './helpers/delivery.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

const signer = createSigner(Buffer.alloc(32, 7));
const BASE = 'https://mail.example.test';
const options = (extra: Partial<TrackingOptions> = {}): TrackingOptions => ({
  signer,
  baseUrl: BASE,
  emailId: '6d0c5a34-3a56-4c36-9a57-1f3f0e1b8f43',
  recipient: 'ann@example.com',
  opens: false,
  clicks: true,
  ...extra,
});

/** The URL a tracked href sends to: its click token read back; null when the href is not tracked. */
function destination(href: string, base = BASE): string | null {
  const prefix = `${base}/t/c/`;
  if (!href.startsWith(prefix)) return null;
  return readTrackingToken(signer, 'click', href.slice(prefix.length))?.url ?? null;
}

/** The href values of the <a> tags in (simple, test-made) HTML, attribute entities decoded. */
const hrefs = (html: string) =>
  [...html.matchAll(/<a\b[^>]*?\bhref="([^"]*)"/gi)].map((m) => m[1]!.replaceAll('&amp;', '&'));

describe('addTracking: links', () => {
  test('a double-quoted absolute link is replaced by a signed redirect to it', () => {
    const out = addTracking('<p><a href="https://shop.example.com/offer">Offer</a></p>', options());
    const [href] = hrefs(out);
    assert.ok(href?.startsWith(`${BASE}/t/c/`), out);
    assert.equal(destination(href!), 'https://shop.example.com/offer');
    assert.equal(out.replace(href!, 'X'), '<p><a href="X">Offer</a></p>');
    const target = readTrackingToken(signer, 'click', href!.slice(`${BASE}/t/c/`.length));
    assert.deepEqual(target, {
      emailId: options().emailId,
      recipient: 'ann@example.com',
      url: 'https://shop.example.com/offer',
    });
  });

  test('single-quoted, unquoted, upper-case and late href attributes are all rewritten', () => {
    // [input, the URL it links to, the output with the new value written as "X"]
    const cases: Array<[string, string, string]> = [
      [`<a href='http://a.example/1'>x</a>`, 'http://a.example/1', '<a href="X">x</a>'],
      ['<a href=https://b.example/2?x=1>x</a>', 'https://b.example/2?x=1', '<a href="X">x</a>'],
      ['<a href=https://b.example/path/>x</a>', 'https://b.example/path/', '<a href="X">x</a>'],
      ['<A HREF="HTTPS://C.EXAMPLE/3">x</A>', 'HTTPS://C.EXAMPLE/3', '<A HREF="X">x</A>'],
      [
        '<a\nclass="btn" title=\'a > b\' data-x="<a href=&quot;no&quot;>"  href = "https://d.example/4" >x</a>',
        'https://d.example/4',
        '<a\nclass="btn" title=\'a > b\' data-x="<a href=&quot;no&quot;>"  href = "X" >x</a>',
      ],
      ['<a target=_blank href="https://e.example/5"/>', 'https://e.example/5', '<a target=_blank href="X"/>'],
      ['<a href="  https://f.example/6\n">x</a>', 'https://f.example/6', '<a href="X">x</a>'],
      [
        '<a href="https://g.example/7" href="https://evil.example/">x</a>',
        'https://g.example/7',
        '<a href="X" href="https://evil.example/">x</a>',
      ],
    ];
    for (const [html, url, shape] of cases) {
      const out = addTracking(html, options());
      const value = /"(https:\/\/mail\.example\.test\/t\/c\/[^"]+)"/.exec(out)?.[1];
      assert.equal(destination(value ?? ''), url, `${html} → ${out}`);
      assert.equal(out.replace(`"${value}"`, '"X"'), shape);
    }
  });

  test('character references are decoded before the URL is read; the new value is escaped', () => {
    const html =
      '<a href="https://x.example/?a=1&amp;b=2&#38;c=3&#x26;d=4&copy=5&lt;&sol;">x</a>' +
      '<a href="https://x.example/caf&eacute;&#233;">y</a>';
    const out = addTracking(html, options({ baseUrl: 'https://mail.example.test/m&r' }));
    const links = hrefs(out);
    assert.equal(links.length, 2);
    assert.ok(out.includes('href="https://mail.example.test/m&amp;r/t/c/'), out);
    assert.equal(
      destination(links[0]!, 'https://mail.example.test/m&r'),
      'https://x.example/?a=1&b=2&c=3&d=4&copy=5</',
    );
    assert.equal(destination(links[1]!, 'https://mail.example.test/m&r'), 'https://x.example/café\u00e9');
  });

  test('a link whose URL uses a character reference it cannot read exactly is left as written', () => {
    const html = '<a href="https://x.example/&notin;">x</a>';
    assert.equal(addTracking(html, options()), html);
  });

  test('links that are not absolute http(s) URLs are left untouched', () => {
    const html = [
      '<a href="mailto:ann@example.com">mail</a>',
      '<a href="tel:+15550100">call</a>',
      '<a href="#top">top</a>',
      '<a href="/relative/path">rel</a>',
      '<a href="page.html">page</a>',
      '<a href="//cdn.example.com/x">protocol-relative</a>',
      '<a href="ftp://files.example.com/x">ftp</a>',
      '<a href="javascript:alert(1)">js</a>',
      '<a href="https://">broken</a>',
      '<a href="">empty</a>',
      '<a href>bare</a>',
      '<a name="anchor">no href</a>',
      '<abbr href="https://x.example/">not a link element</abbr>',
      '<link href="https://x.example/style.css">',
    ].join('\n');
    assert.equal(addTracking(html, options()), html);
  });

  test('our own unsubscribe links are left untouched', () => {
    const html = `<a href="${BASE}/unsubscribe/abc.def">Unsubscribe</a><a href="https://MAIL.example.test/unsubscribe/x">U</a>`;
    assert.equal(addTracking(html, options()), html);
  });

  test('markup inside comments, attribute values and raw-text elements is not a link; nothing is corrupted', () => {
    const html = [
      '<!-- <a href="https://hidden.example/"> -->',
      '<img alt="<a href=\'https://alt.example/\'>">',
      '<style>/* <a href="https://css.example/"> */ a { color: red }</style>',
      '<title><a href="https://title.example/"></title>',
      '<!-->',
      '<!DOCTYPE html><?xml version="1.0"?>',
      '<p>1 < 2 and <3</p>',
      '<a href="https://real.example/">real</a>',
    ].join('\n');
    const out = addTracking(html, options());
    const tracked = [...out.matchAll(/"(https:\/\/mail\.example\.test\/t\/c\/[^"]+)"/g)].map((m) => destination(m[1]!));
    assert.deepEqual(tracked, ['https://real.example/']);
    assert.equal(out.replace(/"https:\/\/mail\.example\.test\/t\/c\/[^"]+"/, '"https://real.example/"'), html);
  });

  test("links in Outlook's conditional comments are tracked too", () => {
    const html =
      '<!--[if mso]><a href="https://mso.example/">Outlook</a><![endif]--><!--[if !mso]><!--><p>x</p><!--<![endif]-->';
    const out = addTracking(html, options());
    const href = /<a href="([^"]+)"/.exec(out)?.[1];
    assert.equal(destination(href ?? ''), 'https://mso.example/');
    assert.ok(out.endsWith('<![endif]--><!--[if !mso]><!--><p>x</p><!--<![endif]-->'), out);
  });

  test("each recipient's copy carries their own tokens", () => {
    const html = '<a href="https://x.example/">x</a>';
    const ann = addTracking(html, options({ opens: true }));
    const bob = addTracking(html, options({ opens: true, recipient: 'bob@example.com' }));
    assert.notEqual(ann, bob);
    const token = hrefs(bob)[0]!.slice(`${BASE}/t/c/`.length);
    assert.equal(readTrackingToken(signer, 'click', token)?.recipient, 'bob@example.com');
  });
});

describe('addTracking: pixel', () => {
  const pixelOf = (html: string) =>
    /<img src="([^"]+\/t\/o\/[^"]+)" width="1" height="1" alt="" style="[^"]*" \/>/.exec(html);

  test('the pixel goes just before the last </body>, whatever its case', () => {
    const html = '<html><body><p>Hi</p></body><!-- </body> --></BODY ></html>';
    const out = addTracking(html, options({ opens: true, clicks: false }));
    const pixel = pixelOf(out);
    assert.ok(pixel, out);
    assert.equal(out.replace(pixel[0], ''), html);
    assert.ok(out.includes(`${pixel[0]}</BODY >`), out);
    const token = pixel[1]!.slice(`${BASE}/t/o/`.length);
    assert.deepEqual(readTrackingToken(signer, 'open', token), {
      emailId: options().emailId,
      recipient: 'ann@example.com',
    });
    assert.equal(readTrackingToken(signer, 'click', token), null, 'an open token is not a click token');
  });

  test('without </body> the pixel goes at the end', () => {
    const html = '<p>Hi <a href="https://x.example/">x</a></p>';
    const out = addTracking(html, options({ opens: true, clicks: false }));
    assert.ok(out.startsWith(html), 'links are left alone when only opens are tracked');
    assert.ok(pixelOf(out.slice(html.length)), out);
  });

  test('with opens and clicks both off, the HTML is returned unchanged', () => {
    const html = '<html><body><a href="https://x.example/">x</a></body></html>';
    assert.equal(addTracking(html, options({ opens: false, clicks: false })), html);
  });

  test('with clicks only, no pixel is added', () => {
    const out = addTracking('<body><a href="https://x.example/">x</a></body>', options());
    assert.equal(pixelOf(out), null);
    assert.ok(!out.includes('/t/o/'));
  });
});

describe('addTracking: hostile input', () => {
  const MB = 1024 * 1024;
  const inputs: Record<string, string> = {
    'an unterminated quoted href': '<a href="' + '&'.repeat(MB),
    'an unterminated unquoted href': '<a href=' + 'x'.repeat(MB),
    'a run of spaces in a tag': '<a ' + ' '.repeat(MB),
    'repeated tag openings': '<a '.repeat(MB / 3),
    'repeated quote openings': "<a b='".repeat(MB / 6),
    'repeated comment openings': '<!--'.repeat(MB / 4),
    'repeated conditional comments with unclosed style': '<!--[if x]><style>-->'.repeat(MB / 21),
    'repeated raw-text openings': '<title>'.repeat(MB / 7),
    'repeated end tags': '</body'.repeat(MB / 6),
    'a huge numeric reference': '<a href="https://x.example/&#' + '9'.repeat(MB) + '">x</a>',
    'a huge name reference': '<a href="https://x.example/&' + 'a'.repeat(MB) + '">x</a>',
    'spaces around a URL': '<a href="' + ' '.repeat(MB / 2) + 'https://x.example/' + ' '.repeat(MB / 2) + '">x</a>',
    'many links': '<a href="https://x.example/?q=1">x</a>'.repeat(MB / 36 / 4),
  };
  for (const [name, html] of Object.entries(inputs)) {
    test(`1 MB of ${name} is handled in linear time`, () => {
      const started = performance.now();
      const out = addTracking(html, options({ opens: true }));
      const elapsed = performance.now() - started;
      // Linear work on 1 MB takes well under a second; quadratic work would take hours. The bound is far
      // from both, so a loaded machine (CI runs two suites at once) does not fail it.
      assert.ok(elapsed < 30_000, `${name}: ${Math.round(elapsed)} ms`);
      assert.ok(out.includes(`${BASE}/t/o/`), 'the pixel was added');
    });
  }

  test('an over-long link is left as written rather than turned into a token the server would refuse', () => {
    const html = `<a href="https://x.example/${'a'.repeat(10_000)}">x</a>`;
    assert.equal(addTracking(html, options()), html);
  });
});

describe('readTrackingToken', () => {
  test('refuses tokens of the other kind, of other installations, and click URLs that are not http(s)', () => {
    const e = options().emailId;
    assert.equal(readTrackingToken(signer, 'click', signer.sign('open', { e, r: 'a@x', u: 'https://x/' })), null);
    assert.equal(readTrackingToken(signer, 'open', signer.sign('click', { e, r: 'a@x', u: 'https://x/' })), null);
    const other = createSigner(Buffer.alloc(32, 8));
    assert.equal(readTrackingToken(signer, 'open', other.sign('open', { e, r: 'a@x' })), null);
    for (const u of ['javascript:alert(1)', '//evil.example/', '/relative', 'data:text/html,x', 42, undefined]) {
      assert.equal(readTrackingToken(signer, 'click', signer.sign('click', { e, r: 'a@x', u })), null, String(u));
    }
    assert.equal(readTrackingToken(signer, 'open', signer.sign('open', { e, r: 7 })), null);
    assert.equal(readTrackingToken(signer, 'open', signer.sign('open', { r: 'a@x' })), null);
  });
});

describe('tracking over HTTP', () => {
  let t: TestApp;
  let org: TestOrganization;
  let base: string;
  let emailId: string;
  const html =
    '<html><body><p>Hi</p><a href="https://shop.example.com/offer?a=1&amp;b=2">Offer</a>' +
    '<a href="https://shop.example.com/help">Help</a><a href="mailto:help@example.com">Mail</a></body></html>';

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await buildTestApp({
      MAILROOM_PUBLIC_URL: `${base}/`,
      MAILROOM_TRANSPORT: 'capture',
      MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    });
    await t.app.listen({ port, host: '127.0.0.1' });
    org = await createTestOrganization(t.db, t.config, 'track');
    // New organizations start with tracking off; this is about tracking, so it is turned on.
    await t.app.inject({
      method: 'PATCH',
      url: '/organization',
      headers: bearer(org.fullKey),
      payload: { open_tracking: true, click_tracking: true },
    });
    await observeWebhookEvents(t.app, org);
    const res = await send(t.app, org.fullKey, message(org, { to: ['ann@example.com', 'Bob@Example.com'], html }));
    assert.equal(res.statusCode, 200, res.body);
    emailId = res.json().id;
  });
  after(() => t.close());

  function call(method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) {
    return t.app.inject({ method, url, headers: bearer(org.fullKey), ...(payload ? { payload } : {}) });
  }
  /** One recipient's copy, as the delivery worker makes it. */
  const copyFor = (recipient: string, id = emailId) => {
    const out = addTracking(html, {
      signer: t.app.signer,
      baseUrl: publicBaseUrl(t.config),
      emailId: id,
      recipient,
      opens: true,
      clicks: true,
    });
    const pixel = /<img src="([^"]+)"/.exec(out)?.[1] ?? '';
    const links = hrefs(out).filter((href) => href.includes('/t/c/'));
    assert.ok(pixel.startsWith(`${base}/t/o/`), out);
    assert.equal(links.length, 2, out);
    return { pixel, links, mailto: hrefs(out).find((href) => href.startsWith('mailto:')) };
  };
  type Event = { type: string; recipient?: string; data?: Record<string, unknown> };
  const engagement = async (id = emailId): Promise<Event[]> =>
    ((await call('GET', `/emails/${id}/events`)).json().data as Event[]).filter(
      (e) => e.type === 'opened' || e.type === 'clicked',
    );
  const webhookEvents = (type: string) => queuedEvents(t.db, org.id, type);
  const rawGet = (path: string) =>
    new Promise<{ status: number; location: string | undefined }>((resolve, reject) => {
      const url = new URL(base);
      const req = httpRequest({ host: url.hostname, port: url.port, path, method: 'GET' }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, location: res.headers.location }));
      });
      req.on('error', reject);
      req.end();
    });

  test('the pixel answers a 1×1 GIF and records one open for exactly that recipient', async () => {
    const { pixel, mailto } = copyFor('ann@example.com');
    assert.equal(mailto, 'mailto:help@example.com');
    for (let i = 0; i < 2; i++) {
      const res = await fetch(pixel, { headers: { 'user-agent': 'TestMail/1.0' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'image/gif');
      assert.equal(res.headers.get('cache-control'), 'no-store, private');
      const body = Buffer.from(await res.arrayBuffer());
      assert.equal(body.length, 43);
      assert.equal(body.subarray(0, 6).toString(), 'GIF89a');
    }
    const events = await engagement();
    assert.deepEqual(
      events.map((e) => [e.type, e.recipient, e.data]),
      [['opened', 'ann@example.com', { user_agent: 'TestMail/1.0' }]],
    );
    const opened = await webhookEvents('email.opened');
    assert.equal(opened.length, 1);
    assert.equal(opened[0]!.data.email_id, emailId);
    assert.equal(opened[0]!.data.recipient, 'ann@example.com');
  });

  test('a link redirects to its original URL and records one click per link', async () => {
    const { links } = copyFor('ann@example.com');
    for (let i = 0; i < 2; i++) {
      const res = await fetch(links[0]!, { redirect: 'manual' });
      assert.equal(res.status, 302);
      assert.equal(res.headers.get('location'), 'https://shop.example.com/offer?a=1&b=2');
      assert.equal(res.headers.get('cache-control'), 'no-store');
    }
    const second = await fetch(links[1]!, { redirect: 'manual' });
    assert.equal(second.status, 302);
    assert.equal(second.headers.get('location'), 'https://shop.example.com/help');

    const clicks = (await engagement()).filter((e) => e.type === 'clicked');
    assert.deepEqual(
      clicks.map((e) => [e.recipient, e.data]),
      [
        ['ann@example.com', { click: { link: 'https://shop.example.com/offer?a=1&b=2' } }],
        ['ann@example.com', { click: { link: 'https://shop.example.com/help' } }],
      ],
    );
    // The webhook's click is Resend's: the link, and the client that followed it (fetch's own User-Agent).
    const clicked = await webhookEvents('email.clicked');
    assert.deepEqual(
      clicked.map((event) => {
        const { timestamp, ...click } = event.data.click as Record<string, unknown>;
        assert.ok(!Number.isNaN(Date.parse(String(timestamp))));
        return [event.data.email_id, event.data.recipient, click];
      }),
      [
        [
          emailId,
          'ann@example.com',
          { link: 'https://shop.example.com/offer?a=1&b=2', ipAddress: '127.0.0.1', userAgent: 'node' },
        ],
        [
          emailId,
          'ann@example.com',
          { link: 'https://shop.example.com/help', ipAddress: '127.0.0.1', userAgent: 'node' },
        ],
      ],
    );
  });

  test('the recipient is matched without case and recorded as the message has it', async () => {
    const { pixel } = copyFor('BOB@EXAMPLE.COM');
    assert.equal((await fetch(pixel)).status, 200);
    const opens = (await engagement()).filter((e) => e.type === 'opened').map((e) => e.recipient);
    assert.deepEqual(opens, ['ann@example.com', 'Bob@example.com']);
  });

  test('forged, foreign and malformed tokens are refused and record nothing', async () => {
    const before = await engagement();
    const { pixel, links } = copyFor('ann@example.com');
    const openToken = pixel.slice(`${base}/t/o/`.length);
    const clickToken = links[0]!.slice(`${base}/t/c/`.length);
    const flip = (token: string, at: number) =>
      token.slice(0, at) + (token[at] === 'A' ? 'B' : 'A') + token.slice(at + 1);
    const dot = clickToken.indexOf('.');
    const other = createSigner(Buffer.alloc(32, 9));
    const e = emailId;
    // The very payload of the click token, with the tag of the open purpose.
    const crossPurpose = t.app.signer.sign('open', {
      e,
      r: 'ann@example.com',
      u: 'https://shop.example.com/offer?a=1&b=2',
    });
    assert.equal(crossPurpose.slice(0, dot), clickToken.slice(0, dot));
    const forgedClicks = [
      flip(clickToken, 3), // payload changed
      flip(clickToken, dot + 1), // tag changed
      crossPurpose,
      openToken, // a valid token for the other purpose
      other.sign('click', { e, r: 'ann@example.com', u: 'https://evil.example/' }),
      t.app.signer.sign('click', { e, r: 'ann@example.com', u: 'javascript:alert(1)' }),
      t.app.signer.sign('click', { e, r: 'ann@example.com', u: '//evil.example/' }),
      clickToken.slice(0, -3), // truncated
      clickToken.slice(0, dot),
      `${clickToken}.x`,
      'x'.repeat(8 * 1024),
      `${'x'.repeat(4000)}.${'y'.repeat(4000)}`,
    ];
    for (const token of forgedClicks) {
      const res = await fetch(`${base}/t/c/${token}`, { redirect: 'manual' });
      assert.equal(res.status, 404, token.slice(0, 80));
      assert.equal(res.headers.get('location'), null);
      const body = (await res.json()) as { name: string; statusCode: number };
      assert.equal(body.name, 'not_found');
      assert.equal(body.statusCode, 404);
    }
    const forgedOpens = [
      flip(openToken, 3),
      flip(openToken, openToken.indexOf('.') + 1),
      clickToken,
      other.sign('open', { e, r: 'ann@example.com' }),
      openToken.slice(0, -3),
      'x'.repeat(8 * 1024),
    ];
    for (const token of forgedOpens) {
      const res = await fetch(`${base}/t/o/${token}`);
      assert.equal(res.status, 404, token.slice(0, 80));
      assert.equal(((await res.json()) as { name: string }).name, 'not_found');
    }
    // 10 KB of junk is longer than the router takes in one path segment (app.ts): refused before routing,
    // as 400 or 404 depending on how that error is mapped, and never redirected.
    for (const kind of ['o', 'c']) {
      const res = await fetch(`${base}/t/${kind}/${'x'.repeat(10 * 1024)}`, { redirect: 'manual' });
      assert.ok([400, 404].includes(res.status), `10 KB junk: ${res.status}`);
      assert.equal(res.headers.get('location'), null);
      await res.arrayBuffer();
    }
    for (const kind of ['o', 'c']) {
      const res = await fetch(`${base}/t/${kind}/`, { redirect: 'manual' });
      assert.equal(res.status, 404, 'no token');
      await res.arrayBuffer();
    }
    assert.deepEqual(await engagement(), before);
  });

  test('a URL with non-ASCII characters redirects to its encoded form and is recorded as written', async () => {
    const url = 'https://例え.example/ü?q=ä';
    const token = t.app.signer.sign('click', { e: emailId, r: 'ann@example.com', u: url });
    const res = await fetch(`${base}/t/c/${token}`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), new URL(url).href);
    assert.match(res.headers.get('location')!, /^https:\/\/xn--[^/]+\/%C3%BC\?q=%C3%A4$/);
    const clicks = (await engagement()).filter((e) => e.type === 'clicked');
    assert.deepEqual(clicks.at(-1)?.data, { click: { link: url } });
  });

  test('nothing added to the tracking URL changes where it redirects', async () => {
    const { links } = copyFor('ann@example.com');
    const path = new URL(links[0]!).pathname;
    const withQuery = await fetch(`${links[0]}?u=https://evil.example/&url=https://evil.example/`, {
      redirect: 'manual',
    });
    assert.equal(withQuery.status, 302);
    assert.equal(withQuery.headers.get('location'), 'https://shop.example.com/offer?a=1&b=2');
    // Sent as written (fetch would resolve the dots itself).
    for (const suffix of ['/../', '/..', '/https://evil.example/', '%2F..%2F', '/', '%2Fevil']) {
      const res = await rawGet(`${path}${suffix}`);
      assert.equal(res.status, 404, suffix);
      assert.equal(res.location, undefined, suffix);
    }
    const resolved = await fetch(`${links[0]}/../`, { redirect: 'manual' });
    assert.equal(resolved.status, 404);
  });

  test('a HEAD request (a link checker) redirects but records nothing', async () => {
    const { links } = copyFor('bob@example.com');
    const res = await fetch(links[0]!, { method: 'HEAD', redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), 'https://shop.example.com/offer?a=1&b=2');
    assert.equal(
      (await engagement()).filter((e) => e.type === 'clicked' && e.recipient === 'Bob@example.com').length,
      0,
    );
  });

  test('a recipient not on the message, or a message that does not exist, gets the answer but records nothing', async () => {
    const before = await engagement();
    const mallory = copyFor('mallory@example.com');
    assert.equal((await fetch(mallory.pixel)).status, 200);
    const click = await fetch(mallory.links[0]!, { redirect: 'manual' });
    assert.equal(click.status, 302);
    assert.equal(click.headers.get('location'), 'https://shop.example.com/offer?a=1&b=2');
    assert.deepEqual(await engagement(), before);

    const ghost = copyFor('ann@example.com', '00000000-0000-4000-8000-000000000000');
    assert.equal((await fetch(ghost.pixel)).status, 200);
    assert.equal((await fetch(ghost.links[0]!, { redirect: 'manual' })).status, 302);
    const { rows } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM email_events WHERE email_id = $1',
      ['00000000-0000-4000-8000-000000000000'],
    );
    assert.equal(rows[0]!.n, 0);
  });

  test('with tracking turned off for the organization, links still work but nothing is recorded', async () => {
    const off = await call('PATCH', '/organization', { open_tracking: false, click_tracking: false });
    assert.equal(off.statusCode, 200, off.body);
    try {
      const before = await engagement();
      const { pixel, links } = copyFor('bob@example.com');
      assert.equal((await fetch(pixel)).status, 200);
      assert.equal((await fetch(links[1]!, { redirect: 'manual' })).status, 302);
      assert.deepEqual(await engagement(), before);
    } finally {
      await call('PATCH', '/organization', { open_tracking: true, click_tracking: true });
    }
    const { links } = copyFor('bob@example.com');
    assert.equal((await fetch(links[1]!, { redirect: 'manual' })).status, 302);
    const bobClicks = (await engagement()).filter((e) => e.type === 'clicked' && e.recipient === 'Bob@example.com');
    assert.equal(bobClicks.length, 1);
  });

  test('when the database fails, the reader still gets the redirect and the image', async () => {
    // The same database, except that every transaction fails.
    const failing = withMethods(t.db, { transaction: () => Promise.reject(new Error('database unavailable')) });
    const app = await buildApp({ db: failing, config: t.config, logger: false });
    try {
      const { pixel, links } = copyFor('ann@example.com');
      const click = await app.inject({ method: 'GET', url: new URL(links[0]!).pathname });
      assert.equal(click.statusCode, 302);
      assert.equal(click.headers.location, 'https://shop.example.com/offer?a=1&b=2');
      const open = await app.inject({ method: 'GET', url: new URL(pixel).pathname });
      assert.equal(open.statusCode, 200);
      assert.equal(open.headers['content-type'], 'image/gif');
    } finally {
      await app.close();
    }
  });
});

describe('tracking per domain', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let domainId: string;
  let sink: SmtpSink;
  let delivery: TestDelivery;
  let base: string;
  const html = '<html><body><p>Hi</p><a href="https://shop.example.com/offer">Offer</a></body></html>';

  before(async () => {
    sink = await startSmtpSink({ starttls: false });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await buildTestApp({
      MAILROOM_TRANSPORT: 'smtp',
      MAILROOM_SMTP_URL: sink.url,
      MAILROOM_PUBLIC_URL: base,
      MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    });
    await t.app.listen({ port, host: '127.0.0.1' });
    org = await createTestOrganization(t.db, t.config, 'perdomain');
    other = await createTestOrganization(t.db, t.config, 'otherdomain');
    await observeWebhookEvents(t.app, org);
    domainId = (await call('GET', '/domains')).json().data[0].id;
    delivery = await startTestDelivery(t);
  });
  after(async () => {
    await delivery?.stop();
    await t?.close();
    await sink?.close();
  });
  beforeEach(async () => {
    sink.reset();
    // Every test starts from the defaults: the organization tracks, the domain follows it.
    await call('PATCH', '/organization', { open_tracking: true, click_tracking: true });
    await t.db.query('UPDATE domains SET open_tracking = NULL, click_tracking = NULL WHERE id = $1', [domainId]);
  });

  function call(method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown, token = org.fullKey) {
    return t.app.inject({
      method,
      url,
      headers: bearer(token),
      ...(payload !== undefined ? { payload: payload as object } : {}),
    });
  }
  const patchDomain = (payload: unknown, id = domainId, token = org.fullKey) =>
    call('PATCH', `/domains/${id}`, payload, token);
  const shown = async () => {
    const res = await call('GET', `/domains/${domainId}`);
    assert.equal(res.statusCode, 200, res.body);
    const { open_tracking, click_tracking } = res.json();
    return { open_tracking, click_tracking };
  };
  const stored = async () =>
    (
      await t.db.query<{ open_tracking: boolean | null; click_tracking: boolean | null }>(
        'SELECT open_tracking, click_tracking FROM domains WHERE id = $1',
        [domainId],
      )
    ).rows[0];
  const updatedEvents = async () => (await queuedEvents(t.db, org.id, 'domain.updated', { id: domainId })).length;
  type Event = { type: string; recipient?: string };
  const timeline = async (id: string): Promise<Event[]> => (await call('GET', `/emails/${id}/events`)).json().data;
  /** Sends the HTML to the recipients and waits until each is delivered; returns the message's id. */
  const deliver = async (to: string[]) => {
    const res = await send(t.app, org.fullKey, message(org, { to, html }));
    assert.equal(res.statusCode, 200, res.body);
    const id = res.json().id as string;
    await waitFor(async () => (await timeline(id)).filter((e) => e.type === 'delivered').length === to.length);
    return id;
  };
  const receivedHtml = async (address: string) => {
    const found = sink.transactions.find((tx) => tx.rcptTo.includes(address));
    assert.ok(found, `a transaction to ${address}`);
    return String((await found.parse()).html);
  };
  const trackedUrls = (received: string) => ({
    pixel: /<img src="([^"]+\/t\/o\/[^"]+)"/.exec(received)?.[1],
    link: /<a href="([^"]+\/t\/c\/[^"]+)"/.exec(received)?.[1]?.replaceAll('&amp;', '&'),
  });
  const engagement = async (id: string) =>
    (await timeline(id)).filter((e) => e.type === 'opened' || e.type === 'clicked').map((e) => e.type);

  test("PATCH /domains/:id sets the domain's switches; GET shows the switches in force", async () => {
    assert.deepEqual(await shown(), { open_tracking: true, click_tracking: true }, "the organization's by default");
    const events = await updatedEvents();

    const res = await patchDomain({ open_tracking: false });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { object: 'domain', id: domainId });
    assert.deepEqual(await stored(), { open_tracking: false, click_tracking: null }, 'a switch not sent is unchanged');
    assert.deepEqual(await shown(), { open_tracking: false, click_tracking: true });
    assert.equal(await updatedEvents(), events + 1, 'domain.updated is emitted');

    // The organization's switches show through where the domain has none, and only there.
    await call('PATCH', '/organization', { open_tracking: true, click_tracking: false });
    assert.deepEqual(await shown(), { open_tracking: false, click_tracking: false });
    const listed = (await call('GET', '/domains')).json().data.find((d: { id: string }) => d.id === domainId);
    assert.deepEqual([listed.open_tracking, listed.click_tracking], [false, false], 'the list shows the same');

    // A dashboard session may change them too; null follows the organization again.
    const reset = await patchDomain({ open_tracking: null, click_tracking: true }, domainId, org.session);
    assert.equal(reset.statusCode, 200, reset.body);
    assert.deepEqual(await stored(), { open_tracking: null, click_tracking: true });
    assert.deepEqual(await shown(), { open_tracking: true, click_tracking: true });

    // What SDKs may send without a change: an empty body, or the capabilities every domain has (tls is a
    // setting of its own now, test/domain-tls.test.ts).
    const before = await updatedEvents();
    for (const payload of [{}, { capabilities: { sending: 'enabled', receiving: 'disabled' } }]) {
      const same = await patchDomain(payload);
      assert.equal(same.statusCode, 200, same.body);
      assert.deepEqual(same.json(), { object: 'domain', id: domainId });
    }
    assert.deepEqual(await stored(), { open_tracking: null, click_tracking: true });
    assert.equal(await updatedEvents(), before, 'no change, no event');
  });

  test('PATCH /domains/:id refuses bad bodies and ids with the error envelope', async () => {
    await patchDomain({ click_tracking: false });
    const refused: Array<[string, unknown, number, string]> = [
      ['a string', { open_tracking: 'false' }, 400, 'validation_error'],
      ['a number', { click_tracking: 0 }, 400, 'validation_error'],
      ['an unknown field', { open_tracking: true, name: 'renamed.example' }, 400, 'validation_error'],
      [
        'sending disabled (Mailroom sends from every domain)',
        { capabilities: { sending: 'disabled' } },
        400,
        'validation_error',
      ],
      ['an unknown capability', { capabilities: { inbound: 'enabled' } }, 400, 'validation_error'],
      ['a tracking_subdomain that is not one label', { tracking_subdomain: 'links.mail' }, 400, 'validation_error'],
      [
        'custom_return_path (set only when the domain is added)',
        { custom_return_path: 'send' },
        400,
        'validation_error',
      ],
      ['an unknown tls', { tls: 'required' }, 400, 'validation_error'],
      ['an array', [{ open_tracking: true }], 400, 'validation_error'],
    ];
    for (const [what, payload, status, name] of refused) {
      const res = await patchDomain(payload);
      assert.equal(res.statusCode, status, `${what}: ${res.body}`);
      const body = res.json();
      assert.equal(body.statusCode, status, what);
      assert.equal(body.name, name, what);
      assert.equal(typeof body.message, 'string', what);
    }

    const othersDomain = (await call('GET', '/domains', undefined, other.fullKey)).json().data[0].id;
    for (const id of ['not-a-uuid', '00000000-0000-4000-8000-000000000000', othersDomain]) {
      const res = await patchDomain({ open_tracking: false }, id);
      assert.equal(res.statusCode, 404, res.body);
      assert.deepEqual(
        { statusCode: res.json().statusCode, name: res.json().name },
        { statusCode: 404, name: 'not_found' },
      );
    }
    const sending = await patchDomain({ open_tracking: false }, domainId, org.sendingKey);
    assert.equal(sending.statusCode, 401);
    assert.equal(sending.json().name, 'restricted_api_key');

    assert.deepEqual(await stored(), { open_tracking: null, click_tracking: false }, 'nothing refused was stored');
    const theirs = await t.db.query('SELECT 1 FROM domains WHERE id = $1 AND open_tracking IS NULL', [othersDomain]);
    assert.equal(theirs.rows.length, 1, "the other organization's domain is untouched");
  });

  test('a domain with tracking off sends the HTML as written, though the organization tracks', async () => {
    await patchDomain({ open_tracking: false, click_tracking: false });
    await deliver(['d1@example.com', 'd2@example.com']);
    assert.equal(sink.transactions.length, 1, 'one transaction: no copy of its own for anyone');
    const received = await receivedHtml('d1@example.com');
    assert.ok(received.includes('href="https://shop.example.com/offer"'), received);
    assert.doesNotMatch(received, /\/t\/[oc]\//);
  });

  test('a domain with tracking on tracks, though the organization does not', async () => {
    await call('PATCH', '/organization', { open_tracking: false, click_tracking: false });
    await patchDomain({ open_tracking: true, click_tracking: true });
    const id = await deliver(['e1@example.com', 'e2@example.com']);
    assert.equal(sink.transactions.length, 2, 'one copy per recipient');
    const { pixel, link } = trackedUrls(await receivedHtml('e1@example.com'));
    assert.ok(pixel && link, 'pixel and tracked link');
    assert.ok(pixel.startsWith(`${base}/t/o/`) && link.startsWith(`${base}/t/c/`));

    // And opens and clicks are recorded, the organization's switches being off.
    assert.equal((await fetch(pixel)).status, 200);
    assert.equal((await fetch(link, { redirect: 'manual' })).status, 302);
    assert.deepEqual(await engagement(id), ['opened', 'clicked']);
  });

  test("an open or click is recorded only while the domain's switch in force is on", async () => {
    await patchDomain({ open_tracking: true, click_tracking: true });
    const id = await deliver(['f1@example.com']);
    const { pixel, link } = trackedUrls(await receivedHtml('f1@example.com'));
    assert.ok(pixel && link);

    // The domain turns opens off: the pixel still answers, and records nothing.
    await patchDomain({ open_tracking: false });
    assert.equal((await fetch(pixel)).status, 200);
    assert.deepEqual(await engagement(id), []);

    // Following the organization again, which tracks opens but not clicks.
    await call('PATCH', '/organization', { click_tracking: false });
    await patchDomain({ open_tracking: null, click_tracking: null });
    assert.equal((await fetch(link, { redirect: 'manual' })).status, 302);
    assert.equal((await fetch(pixel)).status, 200);
    assert.deepEqual(await engagement(id), ['opened']);
  });
});
