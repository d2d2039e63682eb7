// Errors that say what to do: each 400 below names what would have been accepted (the allowed values of
// an enum, an array for several addresses, both forms of tags, how to publish a template), through the
// real app on its own database.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { bearer, buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message } from './helpers/emails.ts';

let t: TestApp;
let org: TestOrganization;
let domainId: string;
let draftTemplateId: string;

before(async () => {
  t = await buildTestApp();
  org = await createTestOrganization(t.db, t.config, 'errors');
  domainId = (await call('GET', '/domains')).json().data[0].id;
  const draft = await call('POST', '/templates', { name: 'Never published', subject: 'Hi', html: '<p>Hi</p>' });
  assert.equal(draft.statusCode, 201, draft.body);
  draftTemplateId = draft.json().id;
});
after(() => t.close());

function call(method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) {
  return t.app.inject({
    method: method as 'GET',
    url,
    headers: { ...bearer(org.fullKey), ...headers },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
}

interface Case {
  what: string;
  request: () => Promise<{ statusCode: number; json(): Record<string, unknown>; body: string }>;
  name: string;
  field: string;
  /** The message exactly, a pattern, or a function giving it once the setup has run. */
  message: string | RegExp | (() => string);
}

const cases: Case[] = [
  // A value outside an enum (a union of constants) names the allowed values, wherever the schema is.
  {
    what: 'a query parameter enum: granularity',
    request: () => call('GET', '/emails/metrics?granularity=hour'),
    name: 'validation_error',
    field: 'granularity',
    message: 'Query parameter granularity must be one of: hourly, daily, weekly, monthly',
  },
  {
    what: 'a body enum: permission',
    request: () => call('POST', '/api-keys', { name: 'x', permission: 'admin' }),
    name: 'validation_error',
    field: 'permission',
    message: 'permission must be one of: full_access, sending_access',
  },
  {
    what: 'an enum given a value of another type',
    request: () => call('POST', '/api-keys', { name: 'x', permission: 1 }),
    name: 'validation_error',
    field: 'permission',
    message: 'permission must be one of: full_access, sending_access',
  },
  {
    what: "a domain's tls",
    request: () => call('PATCH', `/domains/${domainId}`, { tls: 'always' }),
    name: 'validation_error',
    field: 'tls',
    message: 'tls must be one of: opportunistic, enforced',
  },
  {
    what: "a topic's default_subscription",
    request: () => call('POST', '/topics', { name: 'News', default_subscription: 'maybe' }),
    name: 'validation_error',
    field: 'default_subscription',
    message: 'default_subscription must be one of: opt_in, opt_out',
  },
  {
    what: "a template variable's type, inside an array",
    request: () => call('POST', '/templates', { name: 'x', html: 'x', variables: [{ key: 'A', type: 'date' }] }),
    name: 'validation_error',
    field: 'variables.0.type',
    message: 'variables.0.type must be one of: string, number, boolean, object, list',
  },
  {
    what: "the suppression list's origin filter",
    request: () => call('GET', '/suppressions?origin=spam'),
    name: 'validation_error',
    field: 'origin',
    message: 'Query parameter origin must be one of: bounce, complaint, manual',
  },
  {
    what: "a contact property's type",
    request: () => call('POST', '/contact-properties', { key: 'plan', type: 'date' }),
    name: 'validation_error',
    field: 'type',
    message: 'type must be one of: string, number',
  },

  // Several addresses in one string: pass an array.
  ...(['to', 'cc', 'bcc', 'reply_to'] as const).map((field): Case => ({
    what: `${field} as a comma-separated string`,
    request: () => call('POST', '/emails', message(org, { [field]: 'a@example.com, b@example.com' })),
    name: 'validation_error',
    field,
    message: `${field} holds several addresses in one string: pass an array of addresses instead, one per item: ["a@example.com","b@example.com"]`,
  })),
  {
    what: 'addresses separated by semicolons, one with a display name, in an array item',
    request: () =>
      call('POST', '/emails', message(org, { to: ['c@example.com', 'a@example.com; Bob <b@example.com>'] })),
    name: 'validation_error',
    field: 'to.1',
    message: /^to\.1 holds several addresses in one string: pass an array of addresses instead/,
  },
  {
    what: 'to of neither form',
    request: () => call('POST', '/emails', message(org, { to: 5 })),
    name: 'validation_error',
    field: 'to',
    message: /^to must be an address or an array of addresses/,
  },

  // tags names both of its forms.
  ...(['promo', 5] as const).map((tags): Case => ({
    what: `tags: ${JSON.stringify(tags)}`,
    request: () => call('POST', '/emails', message(org, { tags })),
    name: 'validation_error',
    field: 'tags',
    message:
      'tags must be an object of name → value, e.g. {"category": "receipt"}, or an array of { name, value }, ' +
      'e.g. [{"name": "category", "value": "receipt"}]',
  })),
  {
    what: 'a tag of the array form without its value: what is missing there',
    request: () => call('POST', '/emails', message(org, { tags: [{ name: 'category' }] })),
    name: 'missing_required_field',
    field: 'tags.0.value',
    message: 'Missing required field: tags.0.value',
  },

  // A template never published: say so, and how to publish it (also when the send counts on its from).
  ...[{}, { from: undefined }].map((extra): Case => ({
    what: `a template never published${'from' in extra ? ', without a from of the send' : ''}`,
    request: () =>
      call(
        'POST',
        '/emails',
        message(org, { text: undefined, subject: undefined, template: { id: draftTemplateId }, ...extra }),
      ),
    name: 'template_not_found',
    field: 'template.id',
    message: () =>
      `Template ${draftTemplateId} has never been published: publish it first with ` +
      `POST /templates/${draftTemplateId}/publish, or Publish on its page in the dashboard`,
  })),
];

for (const { what, request, name, field, message: expected } of cases) {
  test(what, async () => {
    const res = await request();
    assert.equal(res.statusCode, 400, res.body);
    const body = res.json();
    assert.deepEqual([body.statusCode, body.name, body.field], [400, name, field]);
    if (expected instanceof RegExp) assert.match(String(body.message), expected);
    else assert.equal(body.message, typeof expected === 'function' ? expected() : expected);
  });
}

test('a comma inside a display name is still one address', async () => {
  const res = await call('POST', '/emails', message(org, { to: '"Doe, Jane" <jane@example.com>' }));
  assert.equal(res.statusCode, 200, res.body);
  const unquoted = await call('POST', '/emails', message(org, { to: 'Doe, Jane <jane@example.com>' }));
  assert.equal(unquoted.statusCode, 200, unquoted.body);
});
