import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';
import { subscribedAddresses } from '../src/contacts/subscriptions.ts';
import { unsubscribeUrl, type UnsubscribeTarget } from '../src/contacts/unsubscribe-link.ts';

// One-click unsubscribe over real HTTP on loopback: what a mail client's button does.
describe('one-click unsubscribe', () => {
  let t: TestApp;
  let org: TestOrganization;
  let baseUrl: string;

  before(async () => {
    t = await buildTestApp({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
    org = await createTestOrganization(t.db, t.config, 'unsub');
    await observeWebhookEvents(t.app, org);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as { port: number };
    baseUrl = `http://127.0.0.1:${port}`;
  });

  after(async () => {
    await t?.close();
  });

  async function api(method: string, url: string, payload?: object) {
    const response = await t.app.inject({ method: method as 'POST', url, headers: bearer(org.fullKey), payload });
    assert.ok(response.statusCode < 300, response.body);
    return response.json();
  }

  /** A topic, a contact with no choice for it, and the link a send of that topic to the contact carries. */
  async function setup(options: { name?: string; address?: string; defaultSubscription?: 'opt_in' | 'opt_out' } = {}) {
    const topicId = (
      await api('POST', '/topics', {
        name: options.name ?? 'Product news',
        default_subscription: options.defaultSubscription ?? 'opt_in',
      })
    ).id as string;
    const address = options.address ?? `reader-${randomUUID().slice(0, 8)}@example.com`;
    const contactId = (await api('POST', '/contacts', { email: address })).id as string;
    const target: UnsubscribeTarget = { organizationId: org.id, address, topicId, emailId: randomUUID() };
    return { topicId, contactId, address, target, url: unsubscribeUrl(t.app.signer, baseUrl, target) };
  }

  const oneClick = (url: string) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=One-Click',
    });

  async function choice(contactId: string, topicId: string): Promise<string | undefined> {
    const { rows } = await t.db.query<{ subscription: string }>(
      'SELECT subscription FROM contact_topics WHERE contact_id = $1 AND topic_id = $2',
      [contactId, topicId],
    );
    return rows[0]?.subscription;
  }

  const unsubscribedEvents = (contactId: string) =>
    queuedEvents(t.db, org.id, 'contact.unsubscribed', { id: contactId });

  const isSubscribed = async (topicId: string, address: string) =>
    (await subscribedAddresses(t.db, org.id, topicId, [address])).has(address.toLowerCase());

  test('a one-click POST opts the contact out of the topic, once, with one contact.unsubscribed', async () => {
    const { topicId, contactId, address, target, url } = await setup({ name: 'Product news' });
    assert.ok(url.startsWith(`${baseUrl}/unsubscribe/`));
    assert.equal(await isSubscribed(topicId, address), true);

    const response = await oneClick(url);
    assert.equal(response.status, 200, await response.clone().text());
    assert.match(response.headers.get('content-type') ?? '', /^text\/html; charset=utf-8/);
    assert.equal(response.headers.get('cache-control'), 'no-store');
    assert.match(await response.text(), /You are unsubscribed from <strong>Product news<\/strong>/);

    assert.equal(await choice(contactId, topicId), 'opt_out');
    assert.equal(await isSubscribed(topicId, address), false);
    const events = await unsubscribedEvents(contactId);
    assert.equal(events.length, 1);
    const { created_at: contactCreatedAt, ...unsubscribed } = events[0]!.data;
    assert.deepEqual(unsubscribed, { id: contactId, email: address, topic_id: topicId, email_id: target.emailId });
    assert.ok(!Number.isNaN(Date.parse(String(contactCreatedAt))), "the contact's creation time");

    // The second click (clients retry) is a 200 and changes nothing.
    const again = await oneClick(url);
    assert.equal(again.status, 200);
    assert.equal(await choice(contactId, topicId), 'opt_out');
    assert.equal((await unsubscribedEvents(contactId)).length, 1);
  });

  test('a contact who had opted in is opted out; the address matches without case', async () => {
    const { topicId, contactId, address } = await setup({ defaultSubscription: 'opt_out' });
    await api('PATCH', `/contacts/${contactId}`, { topics: [{ id: topicId, subscription: 'opt_in' }] });
    assert.equal(await isSubscribed(topicId, address), true);
    const target = { organizationId: org.id, address: address.toUpperCase(), topicId, emailId: randomUUID() };
    assert.equal((await oneClick(unsubscribeUrl(t.app.signer, baseUrl, target))).status, 200);
    assert.equal(await choice(contactId, topicId), 'opt_out');
    assert.equal(await isSubscribed(topicId, address), false);
    assert.equal((await unsubscribedEvents(contactId)).length, 1);
  });

  test('a multipart/form-data POST works too, and so does any other body or none', async () => {
    const multipart = await setup();
    const form = new FormData();
    form.append('List-Unsubscribe', 'One-Click');
    const response = await fetch(multipart.url, { method: 'POST', body: form });
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(await choice(multipart.contactId, multipart.topicId), 'opt_out');

    for (const init of [
      {},
      { headers: { 'content-type': 'application/json' }, body: '{not json' },
      { headers: { 'content-type': 'text/plain' }, body: 'List-Unsubscribe=One-Click' },
      { headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array([0, 1, 2]) },
    ]) {
      const other = await setup();
      const answer = await fetch(other.url, { method: 'POST', ...init });
      assert.equal(answer.status, 200, `${JSON.stringify(init.headers)}: ${await answer.text()}`);
      assert.equal(await choice(other.contactId, other.topicId), 'opt_out');
    }
  });

  test('the form parsers stay with these routes: the rest of the API still takes JSON only', async () => {
    const response = await fetch(`${baseUrl}/topics`, {
      method: 'POST',
      headers: { ...bearer(org.fullKey), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=Form&default_subscription=opt_in',
    });
    assert.equal(response.status, 400);
    assert.equal(((await response.json()) as { name: string }).name, 'validation_error');
  });

  test('GET shows a confirmation form naming the topic, and unsubscribes nobody', async () => {
    const { topicId, contactId, address, url } = await setup({ name: 'Tips & <tricks> "weekly"' });
    const response = await fetch(url);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('cache-control'), 'no-store');
    assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
    const html = await response.text();
    assert.match(html, /<form method="post">/);
    assert.match(html, /name="List-Unsubscribe" value="One-Click"/);
    assert.ok(html.includes('Tips &#38; &#60;tricks&#62; &#34;weekly&#34;'), html);
    assert.ok(!html.includes('<tricks>'), 'the topic name is escaped');
    assert.ok(html.includes(address));

    assert.equal(await choice(contactId, topicId), undefined);
    assert.equal(await isSubscribed(topicId, address), true);
    assert.equal((await unsubscribedEvents(contactId)).length, 0);

    // The page's form, submitted as a browser would, does unsubscribe.
    const submitted = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=One-Click',
    });
    assert.equal(submitted.status, 200);
    assert.ok((await submitted.text()).includes('Tips &#38; &#60;tricks&#62; &#34;weekly&#34;'));
    assert.equal(await isSubscribed(topicId, address), false);
  });

  test('a token with one character changed, or signed for another purpose, is 404 and changes nothing', async () => {
    const { topicId, contactId, address, target, url } = await setup();
    const token = url.slice(`${baseUrl}/unsubscribe/`.length);
    // A character of the signed body, so that the change cannot fall in the tag's unused bits.
    const tampered = `${token.slice(0, 5)}${token[5] === 'A' ? 'B' : 'A'}${token.slice(6)}`;
    const forOpen = t.app.signer.sign('open', {
      o: target.organizationId,
      a: target.address,
      t: target.topicId,
      e: target.emailId,
    });
    for (const bad of [tampered, forOpen, 'garbage', `${token}x`]) {
      for (const method of ['GET', 'POST']) {
        const response = await fetch(`${baseUrl}/unsubscribe/${bad}`, {
          method,
          ...(method === 'POST' && {
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: 'List-Unsubscribe=One-Click',
          }),
        });
        assert.equal(response.status, 404, `${method} ${bad}`);
        assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
        const body = (await response.json()) as { statusCode: number; name: string };
        assert.equal(body.statusCode, 404);
        assert.equal(body.name, 'not_found');
      }
    }
    assert.equal(await choice(contactId, topicId), undefined);
    assert.equal(await isSubscribed(topicId, address), true);
  });

  test('an address that is no longer a contact, or a deleted topic: 200 and nothing changes', async () => {
    const gone = await setup();
    await api('DELETE', `/contacts/${gone.contactId}`);
    const response = await oneClick(gone.url);
    assert.equal(response.status, 200);
    assert.match(await response.text(), /You are unsubscribed/);
    const { rows } = await t.db.query('SELECT 1 FROM contact_topics WHERE topic_id = $1', [gone.topicId]);
    assert.equal(rows.length, 0);

    const deleted = await setup();
    await api('DELETE', `/topics/${deleted.topicId}`);
    const answer = await oneClick(deleted.url);
    assert.equal(answer.status, 200);
    assert.match(await answer.text(), /You are unsubscribed from this list/);
    assert.equal(await choice(deleted.contactId, deleted.topicId), undefined);
    assert.equal((await unsubscribedEvents(deleted.contactId)).length, 0);
    assert.equal((await fetch(deleted.url)).status, 200);
  });

  test('the link reaches only its own organization’s contact', async () => {
    const other = await createTestOrganization(t.db, t.config, 'elsewhere');
    const { topicId, address } = await setup();
    const theirs = await t.app.inject({
      method: 'POST',
      url: '/contacts',
      headers: bearer(other.fullKey),
      payload: { email: address },
    });
    assert.equal(theirs.statusCode, 201);
    // A link claiming the other organization, with this organization's topic: no contact of theirs is touched.
    const url = unsubscribeUrl(t.app.signer, baseUrl, {
      organizationId: other.id,
      address,
      topicId,
      emailId: randomUUID(),
    });
    assert.equal((await oneClick(url)).status, 200);
    const { rows } = await t.db.query('SELECT 1 FROM contact_topics WHERE contact_id = $1', [theirs.json().id]);
    assert.equal(rows.length, 0);
    assert.equal(await isSubscribed(topicId, address), true);
  });

  describe('the preference page', () => {
    let prefs: TestOrganization;
    const manage = async (method: string, url: string, payload?: object) => {
      const response = await t.app.inject({ method: method as 'POST', url, headers: bearer(prefs.fullKey), payload });
      assert.ok(response.statusCode < 300, response.body);
      return response.json();
    };
    const topic = async (name: string, default_subscription: string, visibility?: string) =>
      (await manage('POST', '/topics', { name, default_subscription, ...(visibility ? { visibility } : {}) }))
        .id as string;

    /** The forms of the preference list: the button's words and the URL it posts to, resolved as a browser does. */
    function forms(html: string, pageUrl: string) {
      return [...html.matchAll(/<form method="post" action="([^"]+)"><button type="submit">([^<]+)<\/button>/g)].map(
        ([, action, words]) => ({ words: words!, url: new URL(action!.replaceAll('&#38;', '&'), pageUrl).href }),
      );
    }
    const post = (url: string) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' });

    let ids: Record<string, string>;
    let contactId: string;
    let address: string;
    let url: string;

    before(async () => {
      prefs = await createTestOrganization(t.db, t.config, 'prefs');
      await observeWebhookEvents(t.app, prefs);
      ids = {
        message: await topic('Release notes', 'opt_out'), // private, the message's own: always listed
        open: await topic('Open news', 'opt_out', 'public'), // public: listed, not subscribed
        members: await topic('Members', 'opt_out', 'private'), // private, the contact opted in: listed
        hidden: await topic('Hidden', 'opt_out'), // private, not subscribed: not listed
        defaulted: await topic('Digest', 'opt_in'), // private, subscribed by default: listed
      };
      address = `prefs-${randomUUID().slice(0, 8)}@example.com`;
      contactId = (await manage('POST', '/contacts', { email: address })).id as string;
      await manage('PATCH', `/contacts/${contactId}`, { topics: [{ id: ids.members, subscription: 'opt_in' }] });
      url = unsubscribeUrl(t.app.signer, baseUrl, {
        organizationId: prefs.id,
        address,
        topicId: ids.message!,
        emailId: randomUUID(),
      });
    });

    const subscriptionOf = async (topicId: string) =>
      (await subscribedAddresses(t.db, prefs.id, topicId, [address])).has(address);

    test('lists the message’s topic, the public topics and the private ones the contact is subscribed to', async () => {
      const response = await fetch(url);
      assert.equal(response.status, 200);
      const html = await response.text();
      // The one-click form is still there, first.
      assert.ok(html.indexOf('value="One-Click"') < html.indexOf('Your subscriptions'), html);
      assert.deepEqual(
        forms(html, url).map((form) => form.words),
        ['Subscribe to Release notes', 'Subscribe to Open news', 'Unsubscribe from Members', 'Unsubscribe from Digest'],
      );
      assert.ok(!html.includes('Hidden'), 'a private topic the contact is not subscribed to is not shown');
      for (const form of forms(html, url)) assert.ok(form.url.startsWith(`${url}/topics/`), form.url);
    });

    test('its buttons opt in and out, form post by form post, and the page says so', async () => {
      const first = forms(await (await fetch(url)).text(), url);
      const subscribe = first.find((form) => form.words === 'Subscribe to Open news')!;
      const answer = await post(subscribe.url);
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get('cache-control'), 'no-store');
      const html = await answer.text();
      assert.match(html, /Subscribed to <strong>Open news<\/strong>\./);
      assert.equal(await subscriptionOf(ids.open!), true);

      // The answer's own forms post back to the right place (its URL is deeper than the page's).
      const again = forms(html, subscribe.url);
      const leave = again.find((form) => form.words === 'Unsubscribe from Members')!;
      assert.ok(leave.url.startsWith(`${url}/topics/`), leave.url);
      const left = await post(leave.url);
      assert.equal(left.status, 200);
      const after = await left.text();
      assert.match(after, /Unsubscribed from <strong>Members<\/strong>\./);
      assert.equal(await subscriptionOf(ids.members!), false);
      // A private topic left is no longer listed; the public one just joined is, as subscribed.
      assert.ok(!after.includes('Unsubscribe from Members') && !after.includes('Subscribe to Members'), after);
      assert.ok(after.includes('Unsubscribe from Open news'), after);
      // Leaving a topic on the page is an unsubscribe like the one-click one: contact.unsubscribed.
      const events = await queuedEvents(t.db, prefs.id, 'contact.unsubscribed', { id: contactId });
      assert.deepEqual(
        events.map((event) => event.data.topic_id),
        [ids.members],
      );
    });

    test('a topic the page does not list, or another organization’s, is 404 and changes nothing', async () => {
      const elsewhere = (await api('POST', '/topics', { name: 'Not theirs', default_subscription: 'opt_out' }))
        .id as string;
      for (const topicId of [ids.hidden!, elsewhere, randomUUID(), 'not-a-uuid']) {
        const response = await post(`${url}/topics/${topicId}/opt_in`);
        assert.equal(response.status, 404, topicId);
        assert.equal(((await response.json()) as { name: string }).name, 'not_found');
      }
      assert.equal(await subscriptionOf(ids.hidden!), false);
      const bad = await post(`${url}/topics/${ids.open}/maybe`);
      assert.equal(bad.status, 400);
      const forged = await post(`${baseUrl}/unsubscribe/garbage/topics/${ids.open}/opt_out`);
      assert.equal(forged.status, 404);
    });

    test('the one-click POST still unsubscribes from the message’s topic alone, and shows the list', async () => {
      await post(
        forms(await (await fetch(url)).text(), url).find((f) => f.words === 'Subscribe to Release notes')!.url,
      );
      assert.equal(await subscriptionOf(ids.message!), true);
      const response = await oneClick(url);
      assert.equal(response.status, 200);
      const html = await response.text();
      assert.match(html, /You are unsubscribed from <strong>Release notes<\/strong>/);
      assert.ok(html.includes('Subscribe to Release notes'), html);
      assert.equal(await subscriptionOf(ids.message!), false);
      assert.equal(await subscriptionOf(ids.defaulted!), true);
    });

    test('an address that is not a contact gets the one-click form and no list', async () => {
      const stranger = unsubscribeUrl(t.app.signer, baseUrl, {
        organizationId: prefs.id,
        address: 'stranger@example.com',
        topicId: ids.message!,
        emailId: randomUUID(),
      });
      const html = await (await fetch(stranger)).text();
      assert.match(html, /value="One-Click"/);
      assert.ok(!html.includes('Your subscriptions'), html);
      assert.equal((await post(`${stranger}/topics/${ids.open}/opt_in`)).status, 404);
    });
  });
});
