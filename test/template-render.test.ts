// POST /templates/render: template sources and values rendered exactly as a send renders a stored
// template, nothing stored; every mistake in the sources or values is a 400 naming its field.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, send } from './helpers/emails.ts';

let t: TestApp;
let org: TestOrganization;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config);
});
after(() => t.close());

const render = (payload: object, token = org.session) =>
  t.app.inject({ method: 'POST', url: '/templates/render', headers: bearer(token), payload });

const SOURCES = {
  subject: 'Receipt for {{name}}',
  html: '<p>Hello {{name}}, you paid {{amount}}.</p>{{#if note}}<p>{{note}}</p>{{/if}}',
  text: 'Hello {{name}}, you paid {{amount}}.',
};

test('renders as a send with the same template would: html escaped, subject and text not', async () => {
  const variables = { name: 'Ann <ann@example.com> & co', amount: 12.5 };
  const res = await render({ ...SOURCES, variables });
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(res.json(), {
    object: 'template_render',
    subject: 'Receipt for Ann <ann@example.com> & co',
    html: '<p>Hello Ann &lt;ann@example.com&gt; &amp; co, you paid 12.5.</p>',
    text: 'Hello Ann <ann@example.com> & co, you paid 12.5.',
  });

  // The same sources stored as a template and sent: the message carries the very same parts.
  const created = await t.app.inject({
    method: 'POST',
    url: '/templates',
    headers: bearer(org.fullKey),
    payload: {
      name: 'receipt',
      ...SOURCES,
      variables: [
        { key: 'name', type: 'string' },
        { key: 'amount', type: 'number' },
        { key: 'note', type: 'string', fallback_value: '' },
      ],
    },
  });
  assert.equal(created.statusCode, 201, created.body);
  // Sends use a template's published version.
  const published = await t.app.inject({
    method: 'POST',
    url: `/templates/${created.json().id}/publish`,
    headers: bearer(org.fullKey),
  });
  assert.equal(published.statusCode, 200, published.body);
  const { subject: _subject, text: _text, ...withoutParts } = message(org);
  const sent = await send(t.app, org.fullKey, { ...withoutParts, template: { id: created.json().id, variables } });
  assert.equal(sent.statusCode, 200, sent.body);
  const email = (
    await t.app.inject({ method: 'GET', url: `/emails/${sent.json().id}`, headers: bearer(org.fullKey) })
  ).json();
  assert.deepEqual(
    { subject: email.subject, html: email.html, text: email.text },
    { subject: res.json().subject, html: res.json().html, text: res.json().text },
  );
});

test('parts not given read null; a variable only tested may be left out; nothing is stored', async () => {
  const before = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM templates');
  const empty = await render({});
  assert.deepEqual(empty.json(), { object: 'template_render', subject: null, html: null, text: null });
  const onlyHtml = await render({ html: '{{#if vip}}VIP {{/if}}{{#unless vip}}Hi{{/unless}}' }, org.fullKey);
  assert.equal(onlyHtml.statusCode, 200, onlyHtml.body);
  assert.deepEqual(onlyHtml.json(), { object: 'template_render', subject: null, html: 'Hi', text: null });
  // Strict lookups inside a value are not a missing variable: rendered as a send renders them.
  const inside = await render({ text: '{{name.length}}', variables: { name: 'Ann' } });
  assert.equal(inside.statusCode, 200, inside.body);
  const after = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM templates');
  assert.equal(after.rows[0]!.n, before.rows[0]!.n);
});

test('mistakes are 400 validation_error naming the field, never 500', async () => {
  const cases: Array<[object, string, RegExp]> = [
    [{ ...SOURCES, variables: { amount: 1 } }, 'subject', /Missing template variable in subject: name/],
    [{ html: '<p>{{amount}}</p>', variables: { name: 'x' } }, 'html', /Missing template variable in html: amount/],
    [{ text: 'Hi {{name' }, 'text', /Invalid Handlebars in text/],
    [{ html: '{{#if}}x{{/if}}' }, 'html', /if takes exactly one argument/],
    [{ subject: '{{shout name}}', variables: { name: 'x' } }, 'subject', /Unknown helper "shout"/],
    [{ html: '{{> header}}' }, 'html', /Partials are not supported/],
    [{ subject: 'two\nlines' }, 'subject', /line breaks/],
    [{ text: 'x', variables: { '1st': 'a' } }, 'variables.1st', /Invalid variable key/],
  ];
  for (const [payload, field, message] of cases) {
    const res = await render(payload);
    assert.equal(res.statusCode, 400, `${JSON.stringify(payload)}: ${res.body}`);
    assert.equal(res.json().name, 'validation_error', res.body);
    assert.equal(res.json().field, field, res.body);
    assert.match(res.json().message, message);
  }
  // Values that are not strings or numbers, and fields that do not exist, are refused by the schema.
  for (const payload of [
    { text: '{{a}}', variables: { a: { nested: true } } },
    { text: 'x', name: 'n' },
  ]) {
    const res = await render(payload);
    assert.equal(res.statusCode, 400, res.body);
    assert.equal(res.json().name, 'validation_error');
  }
});

test('a sending_access key may not render', async () => {
  const res = await render({ text: 'x' }, org.sendingKey);
  assert.equal(res.statusCode, 401);
  assert.equal(res.json().name, 'restricted_api_key');
});
