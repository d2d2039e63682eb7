// `mailroom serve` as a real process: the first start of an empty embedded database prints, once, a
// dashboard user whose email and password sign in; and the request log, at its most verbose, never
// carries a session token.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { databaseForProcesses, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startServerProcess, type ServerProcess } from './helpers/server-process.ts';
import { dashboardUrl } from '../src/tenancy/dev-bootstrap.ts';

let env: Record<string, string>;
let cleanup: () => Promise<void>;

before(async () => {
  const data = await databaseForProcesses('dashboard');
  // trace: every request is logged, with Fastify's request and response serializers.
  env = { ...data.env, MAILROOM_LOG_LEVEL: 'trace' };
  cleanup = data.cleanup;
});
after(() => cleanup());

async function stop(server: ServerProcess): Promise<void> {
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0, server.output());
}

async function login(base: string, email: string, password: string) {
  return fetch(`${base}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
}

test('first start prints the dashboard and a user that signs in; the second prints nothing; no token is logged', async () => {
  const first = await startServerProcess(env);
  let email: string;
  let password: string;
  try {
    const printed = first.output();
    if (onPostgres) {
      // Never on PostgreSQL: the operator creates organizations and users with the CLI.
      assert.doesNotMatch(printed, /dashboard|password/);
      const org = (await runCli(['org', 'create', '--name', 'P', '--json'], env)).json!;
      email = 'owner@pg.example.test';
      password = 'a long enough password';
      const user = await runCli(
        ['user', 'create', '--org', String(org.id), '--email', email, '--password', password, '--json'],
        env,
      );
      assert.equal(user.code, 0, user.stderr);
    } else {
      const port = new URL(first.base).port;
      assert.match(printed, new RegExp(`^  dashboard +http://127\\.0\\.0\\.1:${port}/$`, 'm'), printed);
      email = /^ {2}user +(\S+)$/m.exec(printed)?.[1] ?? '';
      password = /^ {2}password +(\S+)$/m.exec(printed)?.[1] ?? '';
      assert.equal(email, 'admin@example.test', printed);
      assert.match(password, /^[A-Za-z0-9_-]{16,}$/, 'crypto-random, URL-safe, at least 16 characters');
      assert.ok(printed.indexOf('full_access key') < printed.indexOf('dashboard'), 'printed with the keys');
    }

    const signedIn = await login(first.base, email, password);
    assert.equal(signedIn.status, 200);
    const session = (await signedIn.json()) as { object: string; token: string; expires_at: string };
    assert.equal(session.object, 'session');
    assert.match(session.token, /^mrs_/);
    const auth = { authorization: `Bearer ${session.token}` };

    // The session works on the dashboard's routes, and errors answered to it are logged too.
    assert.equal((await fetch(`${first.base}/overview`, { headers: auth })).status, 200);
    assert.equal(
      (await fetch(`${first.base}/emails/00000000-0000-4000-8000-000000000000/raw`, { headers: auth })).status,
      404,
    );
    const badRender = await fetch(`${first.base}/templates/render`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ html: '{{#if}}' }),
    });
    assert.equal(badRender.status, 400);
    assert.equal((await fetch(`${first.base}/auth/logout`, { method: 'POST', headers: auth })).status, 200);
    // A session that has ended (logged out, or expired: the same look-up) answers 401 invalid_api_key.
    const ended = await fetch(`${first.base}/overview`, { headers: auth });
    assert.equal(ended.status, 401);
    const refusal = (await ended.json()) as { name: string; message: string };
    assert.equal(refusal.name, 'invalid_api_key');
    assert.match(refusal.message, /Session token is invalid or has expired/);

    await stop(first);
    const log = first.output();
    assert.match(log, /"url":"\/overview"/, 'requests were logged');
    assert.match(log, /"url":"\/auth\/logout"/);
    assert.ok(!log.includes(session.token), 'the session token is not in the log');
    assert.ok(!log.includes(session.token.slice(4)), 'nor any copy of its secret part');
    assert.doesNotMatch(log, /bearer\s+mrs_/i);
    if (!onPostgres) {
      assert.equal(log.split(password).length - 1, 1, 'the password is printed once, in the first-start banner');
    }
  } finally {
    first.child.kill('SIGKILL');
  }

  const second = await startServerProcess(env);
  try {
    assert.doesNotMatch(second.output(), /dashboard|password|full_access key/);
    assert.equal((await login(second.base, email, password)).status, 200, 'the user outlives the first start');
    await stop(second);
  } finally {
    second.child.kill('SIGKILL');
  }
});

test('the printed dashboard address: a wildcard listen address reads localhost', () => {
  assert.equal(dashboardUrl('127.0.0.1', 3000), 'http://127.0.0.1:3000/');
  assert.equal(dashboardUrl('0.0.0.0', 3000), 'http://localhost:3000/');
  assert.equal(dashboardUrl('::', 8080), 'http://localhost:8080/');
  assert.equal(dashboardUrl('::1', 3000), 'http://[::1]:3000/');
  assert.equal(dashboardUrl('mail.internal', 80), 'http://mail.internal:80/');
});
