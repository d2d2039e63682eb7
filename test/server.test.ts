// `mailroom serve` as a real process: first start, health, the credentials it prints, and a SIGTERM
// that lets an in-flight request finish before exiting 0.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { databaseForProcesses, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { freePort, startServerProcess } from './helpers/server-process.ts';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

let env: Record<string, string>;
let cleanup: () => Promise<void>;
let silentDns: dgram.Socket;

before(async () => {
  // A DNS "server" that never answers, so that a domain verification stays in flight until its timeout.
  silentDns = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => silentDns.bind(0, '127.0.0.1', resolve));
  const dns = { MAILROOM_DNS_SERVERS: `127.0.0.1:${silentDns.address().port}`, MAILROOM_DNS_TIMEOUT_MS: '1500' };
  const data = await databaseForProcesses('serve');
  env = { ...dns, ...data.env };
  cleanup = data.cleanup;
});
after(async () => {
  silentDns.close();
  await cleanup();
});

const start = () => startServerProcess(env);

test('serve: first start, credentials, health, graceful SIGTERM, second start', async () => {
  const first = await start();
  try {
    assert.equal((await fetch(`${first.base}/healthz`)).status, 200);
    const ready = await fetch(`${first.base}/readyz`);
    assert.deepEqual([ready.status, await ready.json()], [200, { status: 'ready' }]);

    const fullKey = /full_access key\s+(mr_\S+)/.exec(first.output())?.[1];
    const sendingKey = /sending_access key\s+(mr_\S+)/.exec(first.output())?.[1];
    let domainId: string;
    if (onPostgres) {
      // Never on PostgreSQL: the operator creates organizations with the CLI.
      assert.equal(fullKey, undefined);
      const org = (await runCli(['org', 'create', '--name', 'P', '--json'], env)).json!;
      const key = (
        await runCli(
          ['key', 'create', '--org', String(org.id), '--name', 'k', '--permission', 'full_access', '--json'],
          env,
        )
      ).json!;
      const res = await fetch(`${first.base}/domains`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'pg.example.test' }),
      });
      domainId = ((await res.json()) as { id: string }).id;
      env.KEY = String(key.token);
    } else {
      assert.ok(fullKey && sendingKey, first.output());
      const res = await fetch(`${first.base}/domains`, { headers: { authorization: `Bearer ${fullKey}` } });
      const domains = ((await res.json()) as { data: Array<{ id: string; name: string; status: string }> }).data;
      assert.deepEqual(
        domains.map((d) => [d.name, d.status]),
        [['example.test', 'verified']],
      );
      domainId = domains[0]!.id;
      env.KEY = fullKey;
      const restricted = await fetch(`${first.base}/domains`, { headers: { authorization: `Bearer ${sendingKey}` } });
      assert.equal(restricted.status, 401);
    }

    // A request in flight (its DNS look-up waits 1.5 s) when SIGTERM arrives still gets its answer. The
    // signal goes once its look-up has reached the DNS server: the server holds the request by then,
    // however slowly it got there (a fixed wait could signal a server the request had not reached).
    const lookedUp = new Promise((resolve) => silentDns.once('message', resolve));
    const inFlight = fetch(`${first.base}/domains/${domainId}/verify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.KEY}` },
    });
    await lookedUp;
    first.child.kill('SIGTERM');
    const answer = await inFlight;
    assert.equal(answer.status, 200);
    assert.equal(await first.exited, 0, first.output());
  } finally {
    first.child.kill('SIGKILL');
  }

  // Second start on the same data: no new development organization, and the old key still works.
  const second = await start();
  try {
    assert.doesNotMatch(second.output(), /full_access key/);
    const res = await fetch(`${second.base}/api-keys`, { headers: { authorization: `Bearer ${env.KEY}` } });
    assert.equal(res.status, 200);
    if (!onPostgres) {
      // The embedded database is this process's: a second server is told so and exits.
      const third = await runCli(['serve'], env);
      assert.equal(third.code, 1);
      assert.match(third.stderr, /in use by process/);
    }
    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 0);
  } finally {
    second.child.kill('SIGKILL');
  }
});

test('serve with MAILROOM_INBOUND_PORT also listens for bounce reports over SMTP, and stops on SIGTERM', async () => {
  const inboundPort = await freePort();
  const server = await startServerProcess({ ...env, MAILROOM_INBOUND_PORT: String(inboundPort) });
  try {
    assert.match(server.output(), new RegExp(`"inboundPort":${inboundPort}`));
    const banner = await new Promise<string>((resolve, reject) => {
      const socket = createConnection({ host: '127.0.0.1', port: inboundPort });
      socket.once('data', (chunk) => {
        socket.end('QUIT\r\n');
        resolve(chunk.toString());
      });
      socket.once('error', reject);
    });
    assert.match(banner, /^220 /);
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, server.output());
  } finally {
    server.child.kill('SIGKILL');
  }
});

test('serve listens for SMTP submission: 2587 on the embedded default, the ports set on PostgreSQL', async () => {
  const ports = onPostgres ? [await freePort(), await freePort()] : [2587];
  const server = await startServerProcess({
    ...env,
    // Unset on the embedded default (an empty value is unset): its documented port.
    MAILROOM_SUBMISSION_PORT: onPostgres ? String(ports[0]) : '',
    ...(onPostgres ? { MAILROOM_SUBMISSIONS_PORT: String(ports[1]) } : {}),
  });
  try {
    assert.match(server.output(), new RegExp(`"submissionPorts":\\[${ports.join(',')}\\]`), server.output());
    assert.match(server.output(), /self-signed certificate/);
    const banner = await new Promise<string>((resolve, reject) => {
      const socket = createConnection({ host: '127.0.0.1', port: ports[0]! });
      socket.once('data', (chunk) => {
        socket.end('QUIT\r\n');
        resolve(chunk.toString());
      });
      socket.once('error', reject);
    });
    assert.match(banner, /^220 .*Mailroom submission/);
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, server.output());
  } finally {
    server.child.kill('SIGKILL');
  }
});

test('serve --role worker answers /metrics, /healthz and /readyz on MAILROOM_METRICS_PORT', async () => {
  const metricsPort = await freePort();
  const worker = await startServerProcess({ ...env, MAILROOM_METRICS_PORT: String(metricsPort) }, ['--role', 'worker']);
  try {
    const base = `http://127.0.0.1:${metricsPort}`;
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const metrics = await fetch(`${base}/metrics`);
    assert.equal(metrics.status, 200);
    assert.match(await metrics.text(), /mailroom_queue_due_jobs\{queue="deliver-email"\}/);
    assert.equal((await fetch(`${base}/emails`)).status, 404, 'no API on the metrics port');
    worker.child.kill('SIGTERM');
    assert.equal(await worker.exited, 0, worker.output());
  } finally {
    worker.child.kill('SIGKILL');
  }
});

test('a port already taken: one plain line naming it and its setting, nothing created; the next start prints the credentials', async () => {
  const data = await databaseForProcesses('busy');
  const busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const taken = (busy.address() as AddressInfo).port;
  const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { ...data.env, ...extra });
  try {
    for (const [setting, ports] of [
      ['PORT', { PORT: String(taken) }],
      ['MAILROOM_INBOUND_PORT', { PORT: String(await freePort()), MAILROOM_INBOUND_PORT: String(taken) }],
    ] as const) {
      const failed = await cli(['serve'], { ...ports, MAILROOM_SUBMISSION_PORT: 'off' });
      assert.equal(failed.code, 1);
      assert.equal(failed.stdout, '');
      const lines = failed.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, failed.stderr);
      assert.match(
        lines[0]!,
        new RegExp(`^mailroom: cannot listen on 127\\.0\\.0\\.1:${taken} .*already in use.*${setting}`),
      );
      // Nothing was made whose credentials were never shown.
      const orgs = await cli(['org', 'list', '--json']);
      assert.deepEqual(orgs.json, { data: [] }, orgs.stderr);
    }
    // Any other start-up failure creates nothing either: a shaping file with a mistake, named by its key.
    const shaping = path.join(tmpdir(), `mailroom-bad-shaping-${process.pid}.toml`);
    await writeFile(shaping, '[site.google]\nconnection_limit = 0\n');
    const bad = await cli(['serve'], { PORT: String(await freePort()), MAILROOM_SHAPING_FILE: shaping });
    await rm(shaping, { force: true });
    assert.equal(bad.code, 1);
    assert.equal(bad.stdout, '');
    assert.match(bad.stderr.trim(), /^mailroom: .*site\.google\.connection_limit: .*$/);
    assert.deepEqual((await cli(['org', 'list', '--json'])).json, { data: [] });
  } finally {
    busy.close();
  }
  if (onPostgres) return data.cleanup(); // no development organization on PostgreSQL

  // The next start that succeeds prints the credentials; while it runs, it runs the CLI's commands.
  const server = await startServerProcess(data.env);
  const fullKey = /full_access key\s+(mr_\S+)/.exec(server.output())?.[1];
  assert.ok(fullKey, server.output());
  const held = await cli(['org', 'list']);
  assert.equal(held.code, 0, held.stderr);
  assert.match(held.stdout, /"Development"/);
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);

  // Output lost: the CLI finds the organization, its users and its keys (never a key's token), and
  // makes what is needed to get back in.
  try {
    const orgs = (await cli(['org', 'list', '--json'])).json as { data: Array<{ id: string; name: string }> };
    assert.deepEqual(
      orgs.data.map((org) => org.name),
      ['Development'],
    );
    const orgId = orgs.data[0]!.id;
    const users = (await cli(['user', 'list', '--org', orgId, '--json'])).json as { data: Array<{ email: string }> };
    assert.deepEqual(
      users.data.map((user) => user.email),
      ['admin@example.test'],
    );
    const keys = (await cli(['key', 'list', '--org', orgId, '--json'])).json as { data: Array<object> };
    assert.deepEqual(keys.data.map((key) => Object.keys(key).sort()).sort(), [
      ['created_at', 'domain_id', 'id', 'last_used_at', 'name', 'permission'],
      ['created_at', 'domain_id', 'id', 'last_used_at', 'name', 'permission'],
    ]);
    const readable = await cli(['key', 'list', '--org', orgId]);
    assert.match(readable.stdout, /^full_access key [0-9a-f-]{36} "Development \(full access\)"/m);
    const reset = await cli(['user', 'password', '--org', orgId, '--email', 'admin@example.test', '--json']);
    const password = (reset.json as { password: string }).password;
    assert.match(password, /^[\w-]{24}$/);

    const again = await startServerProcess(data.env);
    try {
      const login = await fetch(`${again.base}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'admin@example.test', password }),
      });
      assert.equal(login.status, 200);
      // The key printed on the first start still works; nothing new was printed.
      assert.doesNotMatch(again.output(), /full_access key/);
      const res = await fetch(`${again.base}/api-keys`, { headers: { authorization: `Bearer ${fullKey}` } });
      assert.equal(res.status, 200);
      again.child.kill('SIGTERM');
      assert.equal(await again.exited, 0);
    } finally {
      again.child.kill('SIGKILL');
    }
  } finally {
    await data.cleanup();
  }
});
