import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { ServiceError } from '../src/platform/errors.ts';
import { Resend } from 'resend';
import { createTemplate, findTemplate, getTemplate, type TemplateView } from '../src/templates/templates.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { migrateBefore, openTestDatabase } from './helpers/database.ts';
import { renderTemplate } from '../src/templates/render-template.ts';
import { publishTemplate } from '../src/templates/template-versions.ts';
import { responseProblems } from './helpers/resend-openapi.ts';

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

  /**
   * Calls a template route; every successful answer must validate against Resend's OpenAPI document
   * for the operation (with the SDK's types where the two disagree: test/helpers/resend-openapi.ts).
   */
  async function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, key: string, payload?: object) {
    const response = await t.app.inject({ method, url, headers: bearer(key), ...(payload ? { payload } : {}) });
    if (response.statusCode < 300) {
      assert.deepEqual(responseProblems(method, url, response.statusCode, response.json()), [], `${method} ${url}`);
    }
    return response;
  }
  const create = (payload: object, key = org.fullKey) => call('POST', '/templates', key, payload);
  const get = (id: string, key = org.fullKey) => call('GET', `/templates/${id}`, key);
  const list = (key = org.fullKey) => call('GET', '/templates', key);
  const patch = (id: string, payload: object, key = org.fullKey) => call('PATCH', `/templates/${id}`, key, payload);
  const remove = (id: string, key = org.fullKey) => call('DELETE', `/templates/${id}`, key);
  const publish = (id: string, key = org.fullKey) => call('POST', `/templates/${id}/publish`, key);
  const duplicate = (id: string, key = org.fullKey) => call('POST', `/templates/${id}/duplicate`, key);

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
      const dated = { created_at: template.created_at, updated_at: template.created_at };
      assert.deepEqual(
        { ...template, created_at: undefined, updated_at: undefined },
        {
          object: 'template',
          id,
          current_version_id: template.current_version_id,
          name: 'Welcome',
          alias: null,
          from: null,
          reply_to: null,
          subject: 'Welcome, {{name}}',
          html: '<p>Hello {{name}}, you have {{count}} messages</p>',
          text: 'Hello {{name}}',
          variables: [
            { key: 'name', type: 'string', fallback_value: 'friend', ...dated },
            { key: 'count', type: 'number', fallback_value: null, ...dated },
          ],
          status: 'draft',
          published_at: null,
          has_unpublished_versions: true,
          created_at: undefined,
          updated_at: undefined,
        },
      );
      assert.match(template.current_version_id, /^[0-9a-f-]{36}$/);
      assert.notEqual(template.current_version_id, id);
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

    test('absent subject or text read as null, absent html as "" (Resend types html a string); so does an empty string', async () => {
      const id = await created({ name: 'Text only', text: 'Plain', html: '' });
      const template = await read(id);
      assert.equal(template.subject, null);
      assert.equal(template.html, '');
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
      assert.equal(body.has_more, false);
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
      assert.equal(final.html, '');
      assert.equal(final.text, 'Hi {{name}}');
      assert.deepEqual(
        final.variables.map(({ key, type, fallback_value }) => ({ key, type, fallback_value })),
        [{ key: 'name', type: 'string', fallback_value: 'x' }],
      );
      // The declaration changed: it keeps its creation date and is updated now.
      assert.equal(final.variables[0]!.created_at, before.variables[0]!.created_at);
      assert.equal(final.variables[0]!.updated_at, final.updated_at);

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

      test('a variable type other than Resend’s five is refused', async () => {
        assertRefused(
          await create({ name: 'Type', text: 'x', variables: [{ key: 'when', type: 'date' }] }),
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
        assert.deepEqual(
          (await read(id)).variables.map(({ key, type, fallback_value }) => ({ key, type, fallback_value })),
          [{ key: 's', type: 'string', fallback_value: null }],
        );
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
        assert.equal((await publish(id)).statusCode, 200);
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

  describe('versions: drafts, publish, duplicate', () => {
    const sendWith = (template: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      t.app.inject({
        method: 'POST',
        url: '/emails',
        headers: bearer(org.fullKey),
        payload: { from: `Acme <hello@${org.domain}>`, to: 'ann@example.com', template, ...extra },
      });
    const sentEmail = async (response: { statusCode: number; body: string }) => {
      assert.equal(response.statusCode, 200, response.body);
      const id = JSON.parse(response.body).id;
      return (await t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(org.fullKey) })).json();
    };

    test('a new template is a draft that sends refuse until it is published', async () => {
      const id = await created({ name: 'Draft', subject: 'Hi', html: '<p>v1</p>' });
      const draft = await read(id);
      assert.equal(draft.status, 'draft');
      assert.equal(draft.published_at, null);
      assert.equal(draft.has_unpublished_versions, true);

      const refused = assertRefused(await sendWith({ id }), 'template_not_found', 'template.id');
      assert.match(refused.message, /has never been published: publish it first/);
      assert.equal(
        (await t.db.query('SELECT 1 FROM emails WHERE template @> $1::jsonb', [JSON.stringify({ id })])).rowCount,
        0,
      );

      const published = await publish(id);
      assert.equal(published.statusCode, 200, published.body);
      assert.deepEqual(published.json(), { object: 'template', id });
      const after = await read(id);
      assert.equal(after.status, 'published');
      assert.equal(after.has_unpublished_versions, false);
      assert.equal(after.current_version_id, draft.current_version_id);
      assert.ok(after.published_at !== null && after.published_at >= draft.created_at, String(after.published_at));
      assert.equal((await sentEmail(await sendWith({ id }))).html, '<p>v1</p>');
    });

    test('an edit after publishing is a new draft version: sends keep the published one until it is published', async () => {
      const id = await created({ name: 'Versioned', subject: 'Hi', html: '<p>v1</p>' });
      await publish(id);
      const first = await read(id);

      // Renaming labels the template and starts no version.
      assert.equal((await patch(id, { name: 'Versioned, renamed' })).statusCode, 200);
      assert.equal((await read(id)).has_unpublished_versions, false);

      assert.equal((await patch(id, { html: '<p>v2</p>' })).statusCode, 200);
      const edited = await read(id);
      assert.equal(edited.status, 'published');
      assert.equal(edited.has_unpublished_versions, true);
      assert.notEqual(edited.current_version_id, first.current_version_id);
      assert.equal(edited.published_at, first.published_at);
      assert.equal(edited.html, '<p>v2</p>', 'the template reads as the version being edited');
      assert.equal((await sentEmail(await sendWith({ id }))).html, '<p>v1</p>');

      // A second edit changes the same draft.
      assert.equal((await patch(id, { html: '<p>v2b</p>' })).statusCode, 200);
      assert.equal((await read(id)).current_version_id, edited.current_version_id);

      assert.equal((await publish(id)).statusCode, 200);
      const second = await read(id);
      assert.equal(second.has_unpublished_versions, false);
      assert.equal(second.current_version_id, edited.current_version_id);
      assert.ok(second.published_at! > first.published_at!, `${second.published_at} > ${first.published_at}`);
      assert.equal((await sentEmail(await sendWith({ id }))).html, '<p>v2b</p>');

      // Publishing what is published changes nothing.
      assert.equal((await publish(id)).statusCode, 200);
      assert.equal((await read(id)).published_at, second.published_at);
      const versions = await t.db.query<{ number: number; html: string }>(
        'SELECT number, html FROM template_versions WHERE template_id = $1 ORDER BY number',
        [id],
      );
      assert.deepEqual(
        versions.rows.map((row) => [row.number, row.html]),
        [
          [1, '<p>v1</p>'],
          [2, '<p>v2b</p>'],
        ],
      );
    });

    test('duplicate copies the version being edited into a new draft without the alias', async () => {
      const id = await created({
        name: 'Original',
        alias: 'original-dup',
        from: 'Acme <hello@example.org>',
        reply_to: ['help@example.org'],
        subject: 'S {{n}}',
        html: '<p>{{n}}</p>',
        text: 'T',
        variables: [{ key: 'n', type: 'number', fallback_value: 1 }],
      });
      await publish(id);
      await patch(id, { text: 'T2' });
      const response = await duplicate(id);
      assert.equal(response.statusCode, 200, response.body);
      const copyId = response.json().id;
      assert.deepEqual(response.json(), { object: 'template', id: copyId });
      assert.notEqual(copyId, id);
      const [original, copy] = [await read(id), await read(copyId)];
      assert.equal(copy.name, 'Original (copy)');
      assert.equal(copy.alias, null);
      assert.equal(copy.status, 'draft');
      assert.equal(copy.published_at, null);
      for (const field of ['from', 'reply_to', 'subject', 'html', 'text'] as const) {
        assert.deepEqual(copy[field], original[field], field);
      }
      const declared = (template: TemplateView) =>
        template.variables.map(({ key, type, fallback_value }) => ({ key, type, fallback_value }));
      assert.deepEqual(declared(copy), declared(original));
      assert.equal(copy.text, 'T2');
      assert.deepEqual(
        copy.variables.map((variable) => [variable.created_at, variable.updated_at]),
        [[copy.created_at, copy.created_at]],
      );
      // By alias too; a long name stays within 200 characters.
      const long = await created({ name: 'x'.repeat(200), alias: 'long-name', text: 'x' });
      const copied = await duplicate('long-name');
      assert.equal(copied.statusCode, 200, copied.body);
      const longCopy = await read(copied.json().id);
      assert.equal(longCopy.name.length, 200);
      assert.ok(longCopy.name.endsWith(' (copy)'));
      assert.notEqual(copied.json().id, long);
      assert.equal((await duplicate(randomUUID())).statusCode, 404);
    });

    test('publish and duplicate of another organization’s template, or an unknown one, are 404', async () => {
      const theirs = await created({ name: 'Theirs', alias: 'theirs', text: 'x' }, other.fullKey);
      for (const id of [theirs, 'theirs', randomUUID()]) {
        for (const response of [await publish(id), await duplicate(id)]) {
          assert.equal(response.statusCode, 404, response.body);
          assert.equal(response.json().name, 'not_found');
        }
      }
      const untouched = await t.app.inject({
        method: 'GET',
        url: `/templates/${theirs}`,
        headers: bearer(other.fullKey),
      });
      assert.equal(untouched.json().status, 'draft');
    });

    test('publishing is template.updated and duplicating template.created; a publish that changes nothing is no event', async () => {
      const owner = await createTestOrganization(t.db, t.config, 'events');
      // An endpoint of the organization subscribed to everything: each event is one delivery row.
      await t.db.query(
        `INSERT INTO webhook_endpoints (organization_id, url, signing_secret) VALUES ($1, 'http://127.0.0.1:9/hook', 'whsec_test')`,
        [owner.id],
      );
      const id = await created({ name: 'Evented', text: 'x' }, owner.fullKey);
      assert.equal((await publish(id, owner.fullKey)).statusCode, 200);
      assert.equal((await publish(id, owner.fullKey)).statusCode, 200);
      assert.equal((await duplicate(id, owner.fullKey)).statusCode, 200);
      const { rows } = await t.db.query<{ type: string; name: string }>(
        `SELECT event_type AS type, payload->'data'->>'name' AS name FROM webhook_deliveries
          WHERE organization_id = $1 ORDER BY created_at, payload->>'created_at'`,
        [owner.id],
      );
      assert.deepEqual(
        rows.map((row) => [row.type, row.name]),
        [
          ['template.created', 'Evented'],
          ['template.updated', 'Evented'],
          ['template.created', 'Evented (copy)'],
        ],
      );
    });

    test('deleting a template deletes its versions', async () => {
      const id = await created({ name: 'Gone', text: 'x' });
      await publish(id);
      await patch(id, { text: 'y' });
      await publish(id);
      assert.equal((await remove(id)).statusCode, 200);
      const left = await t.db.query('SELECT 1 FROM template_versions WHERE template_id = $1', [id]);
      assert.equal(left.rowCount, 0);
    });
  });

  describe('aliases', () => {
    test('an alias names the template wherever its id does: read, update, publish, send, delete', async () => {
      const id = await created({
        name: 'Aliased',
        alias: 'order-shipped',
        subject: 'Shipped',
        text: 'Your {{item}}',
        variables: [{ key: 'item', type: 'string' }],
      });
      assert.equal((await read('order-shipped')).id, id);
      assert.equal((await read(id)).alias, 'order-shipped');
      assert.equal((await patch('order-shipped', { subject: 'Shipped!' })).json().id, id);
      assert.equal((await publish('order-shipped')).json().id, id);
      const sent = await t.app.inject({
        method: 'POST',
        url: '/emails',
        headers: bearer(org.fullKey),
        payload: {
          from: `hello@${org.domain}`,
          to: 'ann@example.com',
          template: { id: 'order-shipped', variables: { item: 'book' } },
        },
      });
      assert.equal(sent.statusCode, 200, sent.body);
      const email = (
        await t.app.inject({ method: 'GET', url: `/emails/${sent.json().id}`, headers: bearer(org.fullKey) })
      ).json();
      assert.deepEqual([email.subject, email.text], ['Shipped!', 'Your book']);
      const deleted = await remove('order-shipped');
      assert.deepEqual(deleted.json(), { object: 'template', id, deleted: true });
      assert.equal((await get('order-shipped')).statusCode, 404);
    });

    test('an alias is unique per organization: 409 conflict; another organization may use it', async () => {
      await created({ name: 'First', alias: 'welcome-mail', text: 'x' });
      const taken = await create({ name: 'Second', alias: 'welcome-mail', text: 'x' });
      assert.equal(taken.statusCode, 409, taken.body);
      assert.equal(taken.json().name, 'conflict');
      assert.equal(taken.json().field, 'alias');
      const second = await created({ name: 'Second', text: 'x' });
      const renamed = await patch(second, { alias: 'welcome-mail' });
      assert.equal(renamed.statusCode, 409, renamed.body);
      assert.equal((await read(second)).alias, null);
      assert.equal((await create({ name: 'Theirs', alias: 'welcome-mail', text: 'x' }, other.fullKey)).statusCode, 201);
      // Cleared with null (or ''), the alias is free again.
      const first = (await read('welcome-mail')).id;
      assert.equal((await patch(first, { alias: null })).statusCode, 200);
      assert.equal((await patch(second, { alias: 'welcome-mail' })).statusCode, 200);
      assert.equal((await read('welcome-mail')).id, second);
    });

    test('an alias is letters, digits, ".", "_" and "-", never shaped like an id', async () => {
      for (const alias of ['has space', '-leading', 'a/b', 'x'.repeat(101), randomUUID(), 'é']) {
        assertRefused(await create({ name: 'Bad alias', alias, text: 'x' }), 'validation_error', 'alias');
      }
      assert.equal((await create({ name: 'Good alias', alias: 'Order_2.v-1', text: 'x' })).statusCode, 201);
    });
  });

  describe('sender defaults: from and reply_to', () => {
    test('stored in canonical form; a bad address is refused naming its field', async () => {
      const id = await created({
        name: 'Sender',
        from: ' Acme  <HELLO@Example.ORG>',
        reply_to: 'help@example.org',
        text: 'x',
      });
      const template = await read(id);
      assert.equal(template.from, 'Acme <HELLO@example.org>');
      assert.deepEqual(template.reply_to, ['help@example.org']);
      assertRefused(await create({ name: 'Bad', from: 'not an address', text: 'x' }), 'validation_error', 'from');
      assertRefused(
        await create({ name: 'Bad', reply_to: ['a@example.org', 'nope'], text: 'x' }),
        'validation_error',
        'reply_to.1',
      );
      assert.equal((await patch(id, { from: null, reply_to: null })).statusCode, 200);
      const cleared = await read(id);
      assert.deepEqual([cleared.from, cleared.reply_to], [null, null]);
    });

    test('a send without from, subject or reply_to takes the published version’s; its own take precedence', async () => {
      const id = await created({
        name: 'Defaults',
        from: `Shop <shop@${org.domain}>`,
        reply_to: [`help@${org.domain}`],
        subject: 'From the template',
        text: 'Hello',
      });
      await publish(id);
      // A later draft's sender is not used until published.
      await patch(id, { from: `Draft <draft@${org.domain}>` });
      const send = (payload: object) =>
        t.app.inject({
          method: 'POST',
          url: '/emails',
          headers: bearer(org.fullKey),
          payload: { to: 'ann@example.com', template: { id }, ...payload },
        });
      const read = async (response: { statusCode: number; body: string }) => {
        assert.equal(response.statusCode, 200, response.body);
        return (
          await t.app.inject({
            method: 'GET',
            url: `/emails/${JSON.parse(response.body).id}`,
            headers: bearer(org.fullKey),
          })
        ).json();
      };
      const plain = await read(await send({}));
      assert.deepEqual(
        [plain.from, plain.reply_to, plain.subject],
        [`Shop <shop@${org.domain}>`, [`help@${org.domain}`], 'From the template'],
      );
      const own = await read(await send({ from: `me@${org.domain}`, reply_to: `me@${org.domain}`, subject: 'Mine' }));
      assert.deepEqual([own.from, own.reply_to, own.subject], [`me@${org.domain}`, [`me@${org.domain}`], 'Mine']);

      // Without a from of its own or the template's, a send is refused, naming from.
      const bare = await created({ name: 'No sender', subject: 'x', text: 'x' });
      await publish(bare);
      const refused = assertRefused(
        await t.app.inject({
          method: 'POST',
          url: '/emails',
          headers: bearer(org.fullKey),
          payload: { to: 'ann@example.com', template: { id: bare } },
        }),
        'missing_required_field',
        'from',
      );
      assert.match(refused.message, /the template has no default from/);
      // A template's from on a domain that is not the organization's is refused at send time.
      const foreign = await created({ name: 'Foreign', from: 'x@not-ours.example', subject: 'x', text: 'x' });
      await publish(foreign);
      assertRefused(
        await t.app.inject({
          method: 'POST',
          url: '/emails',
          headers: bearer(org.fullKey),
          payload: { to: 'ann@example.com', template: { id: foreign } },
        }),
        'invalid_from_address',
        'from',
      );
    });
  });

  describe('variables of Resend’s other types', () => {
    test('boolean, object and list variables, with fallbacks of their type, render with Handlebars', async () => {
      const id = await created({
        name: 'Typed',
        html: '{{#if vip}}VIP {{/if}}{{user.name}}:{{#each items}} {{this}}{{/each}}',
        variables: [
          { key: 'vip', type: 'boolean', fallback_value: false },
          { key: 'user', type: 'object', fallback_value: { name: 'Ann' } },
          { key: 'items', type: 'list', fallback_value: ['a', 'b'] },
        ],
      });
      const template = await read(id);
      assert.deepEqual(
        template.variables.map(({ key, type, fallback_value }) => [key, type, fallback_value]),
        [
          ['vip', 'boolean', false],
          ['user', 'object', { name: 'Ann' }],
          ['items', 'list', ['a', 'b']],
        ],
      );
      await publish(id);
      assert.equal((await renderTemplate(t.db, org.id, { id })).html, 'Ann: a b');
      assert.equal(
        (await renderTemplate(t.db, org.id, { id, variables: { vip: true, user: { name: 'Bo' }, items: ['c'] } })).html,
        'VIP Bo: c',
      );
      for (const [key, value] of [
        ['vip', 'yes'],
        ['user', ['x']],
        ['items', { a: 1 }],
      ] as const) {
        await assertApiError(
          () => renderTemplate(t.db, org.id, { id, variables: { [key]: value } }),
          'validation_error',
          `template.variables.${key}`,
        );
      }
      for (const [type, fallback_value] of [
        ['boolean', 'true'],
        ['object', [1]],
        ['list', {}],
      ] as const) {
        assertRefused(
          await create({ name: 'Bad fallback', text: 'x', variables: [{ key: 'v', type, fallback_value }] }),
          'validation_error',
          'variables.0.fallback_value',
        );
      }
    });
  });

  describe('renderTemplate', () => {
    /** A template, published so that sends may use it. */
    const make = async (fields: Parameters<typeof createTemplate>[2], organizationId = org.id) => {
      const { id } = await createTemplate(t.db, organizationId, fields);
      await publishTemplate(t.db, organizationId, id);
      return id;
    };

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
      assert.deepEqual(await renderTemplate(t.db, org.id, { id }), {
        subject: null,
        html: null,
        text: 'Just text',
      });
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

    test('an update takes effect when it is published, not when it is saved', async () => {
      const id = await make({ name: 'Live', text: 'v1' });
      assert.equal((await renderTemplate(t.db, org.id, { id })).text, 'v1');
      assert.equal((await patch(id, { text: 'v2' })).statusCode, 200);
      assert.equal((await renderTemplate(t.db, org.id, { id })).text, 'v1');
      await publishTemplate(t.db, org.id, id);
      assert.equal((await renderTemplate(t.db, org.id, { id })).text, 'v2');
    });

    test('a runtime failure of Handlebars is a validation_error, not a 500', async () => {
      // Saved behind the checks' back, as a template written by an older version could be.
      const id = await make({ name: 'Stored', text: 'x' });
      await t.db.query(`UPDATE template_versions SET text = '{{#each}}x{{/each}}' WHERE template_id = $1`, [id]);
      const message = await assertApiError(() => renderTemplate(t.db, org.id, { id }), 'validation_error', 'template');
      assert.match(message, /could not be rendered \(text\): Must pass iterator to #each/);
    });
  });
});

describe('templates made before versions', () => {
  test('become their own published version 1, so that sends with them go on unchanged', async () => {
    const { db, close } = await openTestDatabase({ migrated: false });
    try {
      // The database as it was before 0026: every earlier migration applied, then a template stored.
      await migrateBefore(db, 26);
      const organizationId = (
        await db.query<{ id: string }>(
          "INSERT INTO organizations (name, monthly_quota, rate_limit) VALUES ('o', 100, 10) RETURNING id",
        )
      ).rows[0]!.id;
      const id = (
        await db.query<{ id: string }>(
          `INSERT INTO templates (organization_id, name, subject, text, variables, updated_at)
           VALUES ($1, 'Old', 'Hi {{name}}', 'Hello {{name}}', '[{"key": "name", "type": "string"}]',
                   '2025-01-02T03:04:05Z')
           RETURNING id`,
          [organizationId],
        )
      ).rows[0]!.id;

      await migrate(db);
      const template = await getTemplate(db, organizationId, id);
      assert.equal(template.status, 'published');
      assert.equal(template.has_unpublished_versions, false);
      assert.equal(template.published_at, '2025-01-02T03:04:05.000Z');
      assert.equal(template.html, '');
      assert.deepEqual(
        template.variables.map(({ key, created_at }) => [key, created_at]),
        [['name', template.created_at]],
      );
      assert.deepEqual(await renderTemplate(db, organizationId, { id, variables: { name: 'Ann' } }), {
        subject: 'Hi Ann',
        html: null,
        text: 'Hello Ann',
      });
      const versions = await db.query<{ id: string; number: number }>(
        'SELECT id, number FROM template_versions WHERE template_id = $1',
        [id],
      );
      assert.deepEqual(versions.rows, [{ id: template.current_version_id, number: 1 }]);
    } finally {
      await close();
    }
  });
});

describe('the unmodified Resend SDK', () => {
  let t: TestApp;
  let org: TestOrganization;
  let resend: Resend;

  before(async () => {
    t = await buildTestApp();
    org = await createTestOrganization(t.db, t.config, 'sdk-templates');
    resend = new Resend(org.fullKey, { baseUrl: await t.app.listen({ port: 0, host: '127.0.0.1' }) });
  });
  after(() => t?.close());

  test('create, publish, get, list, update, duplicate, remove; a send by alias', async () => {
    const created = await resend.templates
      .create({
        name: 'order-confirmation',
        alias: 'order-confirmation',
        from: `Store <store@${org.domain}>`,
        replyTo: `help@${org.domain}`,
        subject: 'Thanks for your order!',
        html: '<p>Name: {{{PRODUCT}}}</p><p>Total: {{{PRICE}}}</p>',
        variables: [
          { key: 'PRODUCT', type: 'string', fallbackValue: 'item' },
          { key: 'PRICE', type: 'number', fallbackValue: 20 },
        ],
      })
      .publish();
    assert.equal(created.error, null, JSON.stringify(created.error));
    const id = created.data!.id;

    const got = await resend.templates.get('order-confirmation');
    assert.equal(got.error, null, JSON.stringify(got.error));
    assert.equal(got.data!.id, id);
    assert.equal(got.data!.status, 'published');
    assert.equal(got.data!.from, `Store <store@${org.domain}>`);
    assert.deepEqual(got.data!.reply_to, [`help@${org.domain}`]);
    assert.deepEqual(
      got.data!.variables!.map((variable) => [variable.key, variable.fallback_value]),
      [
        ['PRODUCT', 'item'],
        ['PRICE', 20],
      ],
    );

    const sent = await resend.emails.send({
      to: 'ann@example.com',
      template: { id: 'order-confirmation', variables: { PRODUCT: 'Vintage Macintosh', PRICE: 499 } },
    });
    assert.equal(sent.error, null, JSON.stringify(sent.error));
    const email = await resend.emails.get(sent.data!.id);
    assert.equal(email.data!.html, '<p>Name: Vintage Macintosh</p><p>Total: 499</p>');
    assert.equal(email.data!.from, `Store <store@${org.domain}>`);

    const updated = await resend.templates.update(id, { subject: 'Thanks again!', text: null });
    assert.equal(updated.error, null, JSON.stringify(updated.error));
    assert.equal((await resend.templates.get(id)).data!.has_unpublished_versions, true);
    const published = await resend.templates.publish(id);
    assert.deepEqual(published.data, { object: 'template', id });

    const copy = await resend.templates.duplicate(id);
    assert.equal(copy.error, null, JSON.stringify(copy.error));
    const listed = await resend.templates.list({ limit: 10 });
    assert.equal(listed.error, null, JSON.stringify(listed.error));
    assert.deepEqual(
      listed.data!.data.map((item) => [item.id, item.status, item.alias]),
      [
        [copy.data!.id, 'draft', null],
        [id, 'published', 'order-confirmation'],
      ],
    );
    assert.equal(listed.data!.has_more, false);

    for (const target of [copy.data!.id, 'order-confirmation']) {
      const removed = await resend.templates.remove(target);
      assert.equal(removed.error, null, JSON.stringify(removed.error));
      assert.equal(removed.data!.deleted, true);
    }
    const gone = await resend.templates.get(id);
    assert.equal(gone.error?.name, 'not_found');
  });
});
