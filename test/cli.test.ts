// The operator CLI end to end, in child processes, against this file's own database; then the
// credentials it printed are used against the HTTP API on the same database.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../src/platform/config.ts';
import { openPGliteDirectory } from '../src/platform/db/pglite.ts';
import { buildApp } from '../src/app.ts';
import { databaseForProcesses, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import type { Database } from '../src/platform/db/database.ts';

let env: Record<string, string>;
let cleanup: () => Promise<void>;

before(async () => {
  ({ env, cleanup } = await databaseForProcesses('cli'));
});
after(() => cleanup());

const cli = async (...args: string[]) => {
  const res = await runCli([...args, '--json'], env);
  assert.equal(res.code, 0, `mailroom ${args.join(' ')}: ${res.stdout}${res.stderr}`);
  return res.json as Record<string, unknown>;
};

const openSame = (): Promise<Database> =>
  onPostgres ? Promise.resolve(openPostgres(env.DATABASE_URL!, 2)) : openPGliteDirectory(env.MAILROOM_DATA_DIR!);

test('every command, in order, with --json; the results work over HTTP', async () => {
  assert.ok(Array.isArray((await cli('migrate')).applied));

  const org = await cli('org', 'create', '--name', 'Acme', '--monthly-quota', '5000', '--rate-limit', '7');
  assert.deepEqual(Object.keys(org).sort(), ['id', 'monthly_quota', 'name', 'rate_limit']);
  assert.equal(org.name, 'Acme');
  assert.equal(org.monthly_quota, 5000);
  assert.equal(org.rate_limit, 7);
  const orgId = org.id as string;

  const domain = await cli('domain', 'add', '--org', orgId, 'acme.example');
  assert.equal(domain.name, 'acme.example');
  assert.equal(domain.status, 'pending');
  assert.ok(Array.isArray(domain.records) && domain.records.length > 0);

  const trusted = await cli('domain', 'verify', '--org', orgId, 'acme.example', '--trust');
  assert.equal(trusted.status, 'verified');

  const receiving = await cli('domain', 'receiving', '--org', orgId, 'acme.example', 'on');
  assert.deepEqual(receiving.capabilities, { sending: 'enabled', receiving: 'enabled' });
  assert.ok((receiving.records as { record: string }[]).some((record) => record.record === 'Receiving'));
  const notReceiving = await cli('domain', 'receiving', '--org', orgId, 'acme.example', 'off');
  assert.deepEqual(notReceiving.capabilities, { sending: 'enabled', receiving: 'disabled' });

  const key = await cli('key', 'create', '--org', orgId, '--name', 'deploy', '--permission', 'full_access');
  assert.match(key.token as string, /^mr_/);
  assert.equal(key.permission, 'full_access');
  assert.equal(key.domain_id, null);

  const limited = await cli(
    'key',
    'create',
    '--org',
    orgId,
    '--name',
    'web',
    '--permission',
    'sending_access',
    '--domain',
    'acme.example',
  );
  assert.equal(limited.permission, 'sending_access');
  assert.match(limited.domain_id as string, /^[0-9a-f-]{36}$/);
  const keys = (await cli('key', 'list', '--org', orgId)).data as Array<{ id: string; domain_id: string | null }>;
  assert.equal(keys.find((k) => k.id === limited.id)?.domain_id, limited.domain_id);

  const user = await cli(
    'user',
    'create',
    '--org',
    orgId,
    '--email',
    'ops@acme.example',
    '--password',
    'a long enough password',
  );
  assert.deepEqual(Object.keys(user).sort(), ['email', 'id']);

  const session = await cli('session', 'create', '--org', orgId, '--email', 'ops@acme.example');
  assert.match(session.token as string, /^mrs_/);
  assert.ok(new Date(session.expires_at as string).getTime() > Date.now());

  const generated = await cli('user', 'create', '--org', orgId, '--email', 'dev@acme.example');
  assert.equal(typeof generated.password, 'string');

  // The CLI's output is the API's input.
  const db = await openSame();
  try {
    const app = await buildApp({ db, config: loadConfig({}), logger: false });
    for (const token of [key.token, session.token]) {
      const res = await app.inject({ method: 'GET', url: '/domains', headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(
        res.json().data.map((d: { name: string; status: string }) => [d.name, d.status]),
        [['acme.example', 'verified']],
      );
    }
    const login = await app.inject({
      method: 'POST',
      url: '/auth/login',
      payload: { email: 'dev@acme.example', password: generated.password },
    });
    assert.equal(login.statusCode, 200);
    await app.close();
  } finally {
    await db.close();
  }
});

test('without --json each command prints a readable line', async () => {
  const res = await runCli(['org', 'create', '--name', 'Readable'], env);
  assert.equal(res.code, 0, res.stderr);
  assert.match(res.stdout, /^organization [0-9a-f-]{36} "Readable"/);
});

test('usage mistakes and unknown ids fail clearly, with a JSON error under --json', async () => {
  const cases: Array<[string[], RegExp]> = [
    [['org', 'create'], /--name is required/],
    [['org', 'create', '--name', 'X', '--rate-limit', 'fast'], /--rate-limit takes a whole number/],
    [
      ['key', 'create', '--org', '00000000-0000-0000-0000-000000000000', '--name', 'k', '--permission', 'full_access'],
      /organization .* not found/,
    ],
    [['key', 'create', '--org', 'x', '--name', 'k', '--permission', 'root'], /full_access or sending_access/],
    [
      ['key', 'create', '--org', 'x', '--name', 'k', '--permission', 'full_access', '--domain', 'a.example'],
      /--domain limits a sending_access key/,
    ],
    [['domain', 'add', '--org', 'x'], /usage: mailroom domain add/],
    [['domain', 'receiving', '--org', 'x', 'a.example', 'maybe'], /say on or off, not "maybe"/],
    [['frobnicate'], /unknown command/],
    [['org', 'create', '--name', 'X', '--bogus'], /bogus/],
  ];
  for (const [args, message] of cases) {
    const res = await runCli([...args, '--json'], env);
    assert.notEqual(res.code, 0, args.join(' '));
    const error = res.json?.error as { name: string; message: string } | undefined;
    assert.ok(error, `no JSON error for ${args.join(' ')}: ${res.stdout} ${res.stderr}`);
    assert.match(error.message, message);
  }
  const plain = await runCli(['org', 'create'], env);
  assert.match(plain.stderr, /--name is required/);
});

test('a bad setting stops the command with a message naming the variable', async () => {
  const res = await runCli(['migrate'], { ...env, PORT: 'eighty' });
  assert.equal(res.code, 1);
  assert.match(res.stderr, /PORT: expected a whole number/);
});
