// CLI commands while `mailroom serve` holds the embedded database: they are run by the server through
// its admin socket (a real server process, real CLI processes), and the results work over its HTTP API.
// Once it stops, the socket is gone and a command opens the data directory itself.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { access, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from './helpers/cli.ts';
import { startServerProcess } from './helpers/server-process.ts';

// The embedded database alone is held by one process: this file is about PGlite on either run.
let dir: string;
let env: Record<string, string>;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'mailroom-cli-server-'));
  env = { MAILROOM_DATA_DIR: dir };
});
after(() => rm(dir, { recursive: true, force: true }));

const cli = async (...args: string[]) => {
  const res = await runCli([...args, '--json'], env);
  assert.equal(res.code, 0, `mailroom ${args.join(' ')}: ${res.stdout}${res.stderr}`);
  return res.json as Record<string, unknown>;
};

test('key, user and org commands run through the running server; after it stops, on their own', async () => {
  const socket = path.join(dir, 'admin.sock');
  // Left by a server that died: replaced at start.
  await writeFile(socket, 'stale');
  const server = await startServerProcess(env);
  let stopped = false;
  try {
    assert.equal((await stat(socket)).mode & 0o777, 0o600, 'only its owner may use the socket');

    const orgs = (await cli('org', 'list')).data as Array<{ id: string }>;
    const devOrg = /^\s+organization\s+(\S+)$/m.exec(server.output())?.[1];
    assert.ok(devOrg && orgs.some((org) => org.id === devOrg), JSON.stringify(orgs));

    const key = await cli('key', 'create', '--org', devOrg, '--name', 'live', '--permission', 'full_access');
    assert.match(key.token as string, /^mr_/);
    const domains = await fetch(`${server.base}/domains`, { headers: { authorization: `Bearer ${key.token}` } });
    assert.equal(domains.status, 200, await domains.clone().text());

    const keys = (await cli('key', 'list', '--org', devOrg)).data as Array<{ id: string }>;
    assert.ok(keys.some((k) => k.id === key.id));

    const user = await cli('user', 'create', '--org', devOrg, '--email', 'ops@example.test');
    assert.equal(user.email, 'ops@example.test');
    const login = await fetch(`${server.base}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ops@example.test', password: user.password }),
    });
    assert.equal(login.status, 200, await login.clone().text());

    const readable = await runCli(['org', 'create', '--name', 'Second'], env);
    assert.equal(readable.code, 0, readable.stderr);
    assert.match(readable.stdout, /^organization [0-9a-f-]{36} "Second"/);

    // A command's failure inside the server comes back as its own exit code and message.
    const missing = await runCli(['key', 'list', '--org', '00000000-0000-0000-0000-000000000000', '--json'], env);
    assert.equal(missing.code, 2);
    assert.match((missing.json?.error as { message: string }).message, /organization .* not found/);

    // migrate (like serve) runs in its own process only: the held directory is reported.
    const migrate = await runCli(['migrate', '--json'], env);
    assert.equal(migrate.code, 1);
    assert.equal((migrate.json?.error as { name: string }).name, 'data_dir_in_use');

    // A client that connects and never writes does not keep the server from stopping.
    const idle = createConnection(socket);
    idle.on('error', () => {});
    await new Promise((resolve) => idle.once('connect', resolve));
    const idleClosed = new Promise((resolve) => idle.once('close', resolve));
    const stopping = Date.now();
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, server.output());
    assert.ok(Date.now() - stopping < 5_000, `stopped ${Date.now() - stopping} ms after SIGTERM`);
    await idleClosed;
    stopped = true;
    await assert.rejects(access(socket), { code: 'ENOENT' });

    const after = (await cli('org', 'list')).data as Array<{ name: string }>;
    assert.ok(after.some((org) => org.name === 'Second'));
  } finally {
    if (!stopped) server.child.kill('SIGKILL');
  }
});
