import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { ServiceError } from '../src/platform/errors.ts';
import { createTemplate, findTemplate, type TemplateView } from '../src/templates/templates.ts';
import { renderTemplate } from '../src/templates/render-template.ts';

describe('templates', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;

  before(async () => {
    t = await buildTestApp();
    org = await createTestOrganization(t.db, t.config, 'templates');
    other = await createTestOrganization(t.db, t.config, 'other');
  });

  after(async () => {
    await t?.close();
  });

  const create = (payload: object, key = org.fullKey) =>
    t.app.inject({ method: 'POST', url: '/templates', headers: bearer(key), payload });
  const get = (id: string, key = org.fullKey) =>
    t.app.inject({ method: 'GET', url: `/templates/${id}`, headers: bearer(key) });
  const list = (key = org.fullKey) => t.app.inject({ method: 'GET', url: '/templates', headers: bearer(key) });
  const patch = (id: string, payload: object, key = org.fullKey) =>
    t.app.inject({ method: 'PATCH', url: `/templates/${id}`, headers: bearer(key), payload });
  const remove = (id: string, key = org.fullKey) =>
    t.app.inject({ method: 'DELETE', url: `/templates/${id}`, headers: bearer(key) });

  async function created(payload: object, key = org.fullKey): Promise<string> {
    const response = await create(payload, key);
    assert.equal(response.statusCode, 201, response.body);
    return response.json().id;
  }

  async function read(id: string): Promise<TemplateView> {
    const response = await get(id);
    assert.equal(response.statusCode, 200, response.body);
    return response.json();
  }

  /** Asserts a 400 with the given error name and field. */
  function assertRefused(response: { statusCode: number; body: string }, name: string, field: string | undefined) {
    assert.equal(response.statusCode, 400, response.body);
    const body = JSON.parse(response.body);
    assert.equal(body.name, name, response.body);
    assert.equal(body.field, field, response.body);
    return body as { message: string };
  }

  /** Runs fn and asserts it rejects with an ServiceError of that name and field; returns its message. */
  async function assertApiError(fn: () => Promise<unknown>, name: string, field: string): Promise<string> {
    try {
      await fn();
    } catch (error) {
      assert.ok(error instanceof ServiceError, String(error));
      assert.equal(error.name, name, error.message);
      assert.equal(error.field, field, error.message);
      return error.message;
    }
    assert.fail(`expected ${name}`);
  }

  describe('the API', () => {
    test('create, read, update, delete', async () => {
      const response = await create({
        name: 'Welcome',
        subject: 'Welcome, {{name}}',
        html: '<p>Hello {{name}}, you have {{count}} messages</p>',
        text: 'Hello {{name}}',
        variables: [
          { key: 'name', type: 'string', fallback_value: 'friend' },
          { key: 'count', type: 'number' },
        ],
      });
      assert.equal(response.statusCode, 201, response.body);
      const { object, id } = response.json();
      assert.equal(object, 'template');
      assert.deepEqual(Object.keys(response.json()).sort(), ['id', 'object']);

      const template = await read(id);
      assert.deepEqual(
        { ...template, created_at: undefined, updated_at: undefined },
        {
          object: 'template',
          id,
          name: 'Welcome',
          subject: 'Welcome, {{name}}',
          html: '<p>Hello {{name}}, you have {{count}} messages</p>',
          text: 'Hello {{name}}',
          variables: [
            { key: 'name', type: 'string', fallback_value: 'friend' },
            { key: 'count', type: 'number', fallback_value: null },
          ],
          created_at: undefined,
          updated_at: undefined,
        },
      );
      assert.equal(new Date(template.created_at).toISOString(), template.created_at);
      assert.equal(template.updated_at, template.created_at);

      const updated = await patch(id, { name: 'Welcome v2' });
      assert.equal(updated.statusCode, 200, updated.body);
      assert.deepEqual(updated.json(), { object: 'template', id });
      assert.equal((await read(id)).name, 'Welcome v2');

      const deleted = await remove(id);
      assert.equal(deleted.statusCode, 200, deleted.body);
      assert.deepEqual(deleted.json(), { object: 'template', id, deleted: true });
      assert.equal((await get(id)).statusCode, 404);
      assert.equal((await remove(id)).statusCode, 404);
    });

    test('absent subject, html or text read as null, and so does an empty string', async () => {
      const id = await created({ name: 'Text only', text: 'Plain', html: '' });
      const template = await read(id);
      assert.equal(template.subject, null);
      assert.equal(template.html, null);
      assert.equal(template.text, 'Plain');
      assert.deepEqual(template.variables, []);
    });

    test('the list is newest first and holds only the caller organization’s templates', async () => {
      const owner = await createTestOrganization(t.db, t.config, 'lister');
      const first = await created({ name: 'first', text: '1' }, owner.fullKey);
      const second = await created({ name: 'second', text: '2' }, owner.fullKey);
      const third = await created({ name: 'third', text: '3' }, owner.fullKey);
      await created({ name: 'not theirs', text: 'x' }, other.fullKey);
      // Distinct creation times, whatever the clock's resolution.
      await t.db.query(
        `UPDATE templates SET created_at = now() - make_interval(mins => CASE id WHEN $1 THEN 3 WHEN $2 THEN 2 ELSE 1 END)
          WHERE id IN ($1, $2, $3)`,
        [first, second, third],
      );
      const response = await list(owner.fullKey);
      assert.equal(response.statusCode, 200, response.body);
      const body = response.json();
      assert.equal(body.object, 'list');
      assert.deepEqual(
        body.data.map((template: TemplateView) => template.name),
        ['third', 'second', 'first'],
      );
      assert.equal(body.data[0].object, 'template');
      assert.equal(body.data[0].text, '3');
    });

    test('PATCH changes only the fields it names and moves updated_at', async () => {
      const id = await created({
        name: 'Partial',
        subject: 'Hi {{name}}',
        html: '<b>{{name}}</b>',
        text: 'Hi {{name}}',
        variables: [{ key: 'name', type: 'string' }],
      });
      await t.db.query(
        `UPDATE templates SET created_at = now() - interval '1 hour', updated_at = now() - interval '1 hour'
          WHERE id = $1`,
        [id],
      );
      const before = await read(id);

      assert.equal((await patch(id, { subject: 'Hello {{name}}' })).statusCode, 200);
      const after = await read(id);
      assert.deepEqual(
        { ...after, subject: undefined, updated_at: undefined },
        { ...before, subject: undefined, updated_at: undefined },
      );
      assert.equal(after.subject, 'Hello {{name}}');
      assert.equal(after.created_at, before.created_at);
      assert.ok(after.updated_at > before.updated_at, `${after.updated_at} > ${before.updated_at}`);

      // null clears a field; variables are replaced as a whole.
      const cleared = await patch(id, {
        html: null,
        variables: [{ key: 'name', type: 'string', fallback_value: 'x' }],
      });
      assert.equal(cleared.statusCode, 200, cleared.body);
      const final = await read(id);
      assert.equal(final.html, null);
      assert.equal(final.text, 'Hi {{name}}');
      assert.deepEqual(final.variables, [{ key: 'name', type: 'string', fallback_value: 'x' }]);

      // An empty PATCH is valid and changes nothing but updated_at.
      assert.equal((await patch(id, {})).statusCode, 200);
      assert.equal((await read(id)).name, 'Partial');
    });

    test('PATCH that would leave neither html nor text is refused, and nothing changes', async () => {
      const id = await created({ name: 'Keep', html: '<p>x</p>' });
      assertRefused(await patch(id, { html: null, name: 'renamed' }), 'missing_required_field', 'html');
      const template = await read(id);
      assert.equal(template.html, '<p>x</p>');
      assert.equal(template.name, 'Keep');
      // Swapping html for text in one request is fine.
      assert.equal((await patch(id, { html: null, text: 'x' })).statusCode, 200);
    });

    test('PATCH applies the create checks', async () => {
      const id = await created({ name: 'Checked', text: 'x' });
      assertRefused(await patch(id, { html: '{{#if a}}' }), 'validation_error', 'html');
      assertRefused(
        await patch(id, { variables: [{ key: '1x', type: 'string' }] }),
        'validation_error',
        'variables.0.key',
      );
      assertRefused(await patch(id, { name: '' }), 'validation_error', 'name');
      assertRefused(await patch(id, { subject: 'a\nb' }), 'validation_error', 'subject');
      assertRefused(await patch(id, { nmae: 'typo' }), 'validation_error', 'nmae');
    });

    test('another organization’s template is 404 for GET, PATCH and DELETE, and survives', async () => {
      const id = await created({ name: 'Theirs', text: 'x' }, other.fullKey);
      for (const response of [await get(id), await patch(id, { name: 'mine now' }), await remove(id)]) {
        assert.equal(response.statusCode, 404, response.body);
        assert.equal(response.json().name, 'not_found');
      }
      const theirs = await t.app.inject({ method: 'GET', url: `/templates/${id}`, headers: bearer(other.fullKey) });
      assert.equal(theirs.json().name, 'Theirs');
    });

    test('a malformed or unknown id is 404', async () => {
      for (const id of ['not-a-uuid', '123', randomUUID()]) {
        for (const response of [await get(id), await patch(id, { name: 'x' }), await remove(id)]) {
          assert.equal(response.statusCode, 404, response.body);
          assert.equal(response.json().name, 'not_found');
        }
      }
    });

    test('a session may manage templates; a sending_access key may not', async () => {
      assert.equal((await create({ name: 'From the dashboard', text: 'x' }, org.session)).statusCode, 201);
      const refused = await create({ name: 'x', text: 'x' }, org.sendingKey);
      assert.equal(refused.statusCode, 401);
      assert.equal(refused.json().name, 'restricted_api_key');
    });

    describe('validation', () => {
      test('a missing name is missing_required_field; an empty or long one is refused', async () => {
        assertRefused(await create({ text: 'x' }), 'missing_required_field', 'name');
        assertRefused(await create({ name: '', text: 'x' }), 'validation_error', 'name');
        assertRefused(await create({ name: 'x'.repeat(201), text: 'x' }), 'validation_error', 'name');
        assert.equal((await create({ name: 'x'.repeat(200), text: 'x' })).statusCode, 201);
      });

      test('neither html nor text is missing_required_field naming html', async () => {
        const body = assertRefused(await create({ name: 'Empty', subject: 'Hi' }), 'missing_required_field', 'html');
        assert.match(body.message, /html or text/);
        assertRefused(await create({ name: 'Blank', html: '', text: null }), 'missing_required_field', 'html');
      });

      test('variable keys must be identifiers, unique, and at most 50', async () => {
        for (const key of ['1st', 'first-name', 'a b', '', 'é', '__proto__']) {
          assertRefused(
            await create({ name: 'Bad key', text: 'x', variables: [{ key, type: 'string' }] }),
            'validation_error',
            'variables.0.key',
          );
        }
        const duplicate = assertRefused(
          await create({
            name: 'Twice',
            text: 'x',
            variables: [
              { key: 'name', type: 'string' },
              { key: 'name', type: 'number' },
            ],
          }),
          'validation_error',
          'variables.1.key',
        );
        assert.match(duplicate.message, /Duplicate variable key: name/);
        const many = (n: number) => Array.from({ length: n }, (_, i) => ({ key: `v${i}`, type: 'string' }));
        assertRefused(await create({ name: 'Many', text: 'x', variables: many(51) }), 'validation_error', 'variables');
        assert.equal((await create({ name: 'Fifty', text: 'x', variables: many(50) })).statusCode, 201);
        assert.equal(
          (await create({ name: 'Fine', text: 'x', variables: [{ key: '_First_Name2', type: 'string' }] })).statusCode,
          201,
        );
      });

      test('a variable type other than string or number is refused', async () => {
        assertRefused(
          await create({ name: 'Type', text: 'x', variables: [{ key: 'flag', type: 'boolean' }] }),
          'validation_error',
          'variables.0.type',
        );
      });

      test('a fallback_value must be of the declared type', async () => {
        assertRefused(
          await create({ name: 'Fallback', text: 'x', variables: [{ key: 'n', type: 'number', fallback_value: '5' }] }),
          'validation_error',
          'variables.0.fallback_value',
        );
        assertRefused(
          await create({
            name: 'Fallback',
            text: 'x',
            variables: [
              { key: 'ok', type: 'string', fallback_value: 'x' },
              { key: 's', type: 'string', fallback_value: 5 },
            ],
          }),
          'validation_error',
          'variables.1.fallback_value',
        );
        // null is no fallback, as Resend's SDK sends it.
        const id = await created({
          name: 'Null fallback',
          text: 'x',
          variables: [{ key: 's', type: 'string', fallback_value: null }],
        });
        assert.deepEqual((await read(id)).variables, [{ key: 's', type: 'string', fallback_value: null }]);
      });

      test('a Handlebars syntax error in html or subject is validation_error naming the field', async () => {
        const html = assertRefused(
          await create({ name: 'Broken', html: '<p>{{#if vip}}VIP</p>' }),
          'validation_error',
          'html',
        );
        assert.match(html.message, /^Invalid Handlebars in html: Parse error on line 1/);
        const subject = assertRefused(
          await create({ name: 'Broken', subject: 'Hi {{name', text: 'x' }),
          'validation_error',
          'subject',
        );
        assert.match(subject.message, /^Invalid Handlebars in subject: Parse error/);
        assertRefused(await create({ name: 'Broken', text: '{{#if a}}{{/unless}}' }), 'validation_error', 'text');
      });

      test('partials, decorators and unknown helpers are refused when saved', async () => {
        for (const html of ['{{> footer}}', '{{#> layout}}x{{/layout}}', '{{#*inline "x"}}y{{/inline}}']) {
          assertRefused(await create({ name: 'Partial', html }), 'validation_error', 'html');
        }
        const helper = assertRefused(
          await create({ name: 'Helper', text: 'Due {{formatDate due "YYYY"}}' }),
          'validation_error',
          'text',
        );
        assert.match(helper.message, /Unknown helper "formatDate"/);
        assertRefused(await create({ name: 'Arity', html: '{{#each}}x{{/each}}' }), 'validation_error', 'html');
        // The built-in helpers are there.
        assert.equal(
          (
            await create({
              name: 'Builtins',
              html: '{{#if a}}A{{else if b}}B{{else}}C{{/if}}{{#unless a}}!{{/unless}}{{#with a}}{{this}}{{/with}}{{lookup this "a"}}',
            })
          ).statusCode,
          201,
        );
      });

      test('a source is bounded to 1000 expressions, nested or not', async () => {
        const nested = (n: number) => '{{#if a}}'.repeat(n) + 'x' + '{{/if}}'.repeat(n);
        const id = await created({ name: 'Deep', html: nested(500), variables: [{ key: 'a', type: 'number' }] });
        assert.equal((await renderTemplate(t.db, org.id, { id, variables: { a: 1 } })).html, 'x');
        const deep = assertRefused(await create({ name: 'Deeper', html: nested(501) }), 'validation_error', 'html');
        assert.match(deep.message, /Too many Handlebars expressions in html/);
        assertRefused(await create({ name: 'Wide', text: '{{a}}'.repeat(1001) }), 'validation_error', 'text');
        assert.equal((await create({ name: 'Wide enough', text: '{{a}}'.repeat(1000) })).statusCode, 201);
      });

      test('a subject with a line break, or over 998 characters, is refused', async () => {
        assertRefused(
          await create({ name: 'CRLF', subject: 'Hi\r\nBcc: x@example.com', text: 'x' }),
          'validation_error',
          'subject',
        );
        assertRefused(
          await create({ name: 'Long', subject: 'x'.repeat(999), text: 'x' }),
          'validation_error',
          'subject',
        );
      });

      test('an unknown field is refused, at the top and in a variable', async () => {
        const body = assertRefused(await create({ name: 'Typo', text: 'x', htlm: '<p>' }), 'validation_error', 'htlm');
        assert.match(body.message, /Unknown field: htlm/);
        assertRefused(
          await create({ name: 'Typo', text: 'x', variables: [{ key: 'a', type: 'string', fallback: 'x' }] }),
          'validation_error',
          'variables.0.fallback',
        );
      });
    });
  });

  describe('renderTemplate', () => {
    const make = (fields: Parameters<typeof createTemplate>[2], organizationId = org.id) =>
      createTemplate(t.db, organizationId, fields).then(({ id }) => id);

    test('html is HTML-escaped; subject and text are not', async () => {
      const id = await make({
        name: 'Escaping',
        subject: 'Re: {{topic}}',
        html: '<p>{{topic}}</p><p>{{{topic}}}</p>',
        text: 'About {{topic}}',
        variables: [{ key: 'topic', type: 'string' }],
      });
      const topic = `<script>alert("x")</script> & 'Tom'`;
      const rendered = await renderTemplate(t.db, org.id, { id, variables: { topic } });
      assert.equal(
        rendered.html,
        `<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;Tom&#x27;</p><p>${topic}</p>`,
      );
      assert.equal(rendered.text, `About ${topic}`);
      assert.equal(rendered.subject, `Re: ${topic}`);
    });

    test('a template without subject or html renders those as null', async () => {
      const id = await make({ name: 'Text', text: 'Just text' });
      assert.deepEqual(await renderTemplate(t.db, org.id, { id }), { subject: null, html: null, text: 'Just text' });
    });

    test('fallback values fill what is not provided; numbers render as numbers', async () => {
      const id = await make({
        name: 'Fallbacks',
        subject: '{{count}} new for {{name}}',
        text: 'Hi {{name}}, {{count}} new, {{zero}} old, balance {{balance}}',
        variables: [
          { key: 'name', type: 'string', fallback_value: 'there' },
          { key: 'count', type: 'number', fallback_value: 1 },
          { key: 'zero', type: 'number' },
          { key: 'balance', type: 'number' },
        ],
      });
      const withFallbacks = await renderTemplate(t.db, org.id, { id, variables: { zero: 0, balance: -12.5 } });
      assert.equal(withFallbacks.text, 'Hi there, 1 new, 0 old, balance -12.5');
      assert.equal(withFallbacks.subject, '1 new for there');
      const provided = await renderTemplate(t.db, org.id, {
        id,
        variables: { name: 'Ada', count: 3, zero: 0, balance: 1e3 },
      });
      assert.equal(provided.text, 'Hi Ada, 3 new, 0 old, balance 1000');
      // An empty string is a value, not an absence.
      const empty = await renderTemplate(t.db, org.id, { id, variables: { name: '', zero: 0, balance: 0 } });
      assert.equal(empty.text, 'Hi , 1 new, 0 old, balance 0');
    });

    test('a declared variable with neither value nor fallback is validation_error naming it', async () => {
      const id = await make({
        name: 'Required',
        html: '<p>{{code}}</p>',
        variables: [
          { key: 'greeting', type: 'string', fallback_value: 'Hi' },
          { key: 'code', type: 'string' },
        ],
      });
      const message = await assertApiError(
        () => renderTemplate(t.db, org.id, { id, variables: { greeting: 'Hello' } }),
        'validation_error',
        'template.variables.code',
      );
      assert.equal(message, 'Missing template variable: code');
      await assertApiError(() => renderTemplate(t.db, org.id, { id }), 'validation_error', 'template.variables.code');
    });

    test('variables the template does not declare are refused, by name', async () => {
      const id = await make({
        name: 'Declared',
        text: 'Hi {{name}}',
        variables: [{ key: 'name', type: 'string', fallback_value: 'x' }],
      });
      const one = await assertApiError(
        () => renderTemplate(t.db, org.id, { id, variables: { nmae: 'Ada' } }),
        'validation_error',
        'template.variables.nmae',
      );
      assert.match(one, /nmae/);
      const two = await assertApiError(
        () => renderTemplate(t.db, org.id, { id, variables: { name: 'Ada', a: 1, b: 2 } }),
        'validation_error',
        'template.variables',
      );
      assert.match(two, /a, b/);
    });

    test('a value of the wrong type, an object or an array is validation_error naming the variable', async () => {
      const id = await make({
        name: 'Typed',
        text: '{{name}} {{count}}',
        variables: [
          { key: 'name', type: 'string', fallback_value: 'x' },
          { key: 'count', type: 'number', fallback_value: 1 },
        ],
      });
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ count: '3' }, 'count'],
        [{ name: 7 }, 'name'],
        [{ name: { toString: 'x' } }, 'name'],
        [{ name: ['a'] }, 'name'],
        [{ count: [1] }, 'count'],
        [{ name: null }, 'name'],
        [{ name: true }, 'name'],
        [{ count: Number.POSITIVE_INFINITY }, 'count'],
      ];
      for (const [variables, key] of cases) {
        const message = await assertApiError(
          () => renderTemplate(t.db, org.id, { id, variables }),
          'validation_error',
          `template.variables.${key}`,
        );
        assert.match(message, new RegExp(`^Template variable ${key} must be a (string|number)`));
      }
    });

    test('an unknown, malformed or other organization’s id is template_not_found', async () => {
      const theirs = await make({ name: 'Theirs', text: 'secret' }, other.id);
      for (const id of [randomUUID(), 'not-a-uuid', theirs]) {
        const message = await assertApiError(
          () => renderTemplate(t.db, org.id, { id }),
          'template_not_found',
          'template.id',
        );
        assert.equal(message, `Template ${id} not found`);
      }
      assert.equal((await renderTemplate(t.db, other.id, { id: theirs })).text, 'secret');
      assert.equal(await findTemplate(t.db, org.id, theirs), undefined);
    });

    test('prototype lookups render empty', async () => {
      const id = await make({
        name: 'Prototype',
        html: '[{{constructor}}][{{__proto__}}][{{constructor.constructor}}][{{name.constructor}}][{{toString}}]',
        text: '[{{lookup this "constructor"}}][{{name.__proto__}}][{{@root.constructor.name}}][{{hasOwnProperty}}]',
        subject: '[{{#with name}}{{constructor.name}}{{/with}}][{{name.length}}]',
        variables: [{ key: 'name', type: 'string', fallback_value: 'abc' }],
      });
      assert.deepEqual(await renderTemplate(t.db, org.id, { id }), {
        html: '[][][][][]',
        text: '[][][][]',
        subject: '[][3]',
      });
    });

    test('line breaks rendered into the subject become spaces; text keeps them', async () => {
      const id = await make({
        name: 'Injection',
        subject: 'Hello {{name}}',
        text: 'Hello {{name}}',
        variables: [{ key: 'name', type: 'string' }],
      });
      const rendered = await renderTemplate(t.db, org.id, {
        id,
        variables: { name: 'Ada\r\nBcc: victim@example.com\nX: y\rZ' },
      });
      assert.equal(rendered.subject, 'Hello Ada Bcc: victim@example.com X: y Z');
      assert.equal(rendered.text, 'Hello Ada\r\nBcc: victim@example.com\nX: y\rZ');
    });

    test('an update takes effect at the next render', async () => {
      const id = await make({ name: 'Live', text: 'v1' });
      assert.equal((await renderTemplate(t.db, org.id, { id })).text, 'v1');
      assert.equal((await patch(id, { text: 'v2' })).statusCode, 200);
      assert.equal((await renderTemplate(t.db, org.id, { id })).text, 'v2');
    });

    test('a runtime failure of Handlebars is a validation_error, not a 500', async () => {
      // Saved behind the checks' back, as a template written by an older version could be.
      const id = await make({ name: 'Stored', text: 'x' });
      await t.db.query(`UPDATE templates SET text = '{{#each}}x{{/each}}' WHERE id = $1`, [id]);
      const message = await assertApiError(() => renderTemplate(t.db, org.id, { id }), 'validation_error', 'template');
      assert.match(message, /could not be rendered \(text\): Must pass iterator to #each/);
    });
  });
});
