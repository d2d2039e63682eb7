// Upgrading from the previous release (a fixed commit of this repository) without stopping the service:
// on PostgreSQL the new release migrates and serves beside the old one while sends keep coming, and
// every accepted message is delivered once; on the embedded database the new release opens the old
// one's data directory and reads back everything it wrote.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { databaseForProcesses, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startServerProcess, type ServerProcess } from './helpers/server-process.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

/** The last release: the commit the upgrade starts from. */
const PREVIOUS_RELEASE = '9e9cab8';
const ROOT = fileURLToPath(new URL('..', import.meta.url));

let previous: string; // the previous release's checkout
let previousBin: string;

before(async () => {
  previous = await mkdtemp(path.join(tmpdir(), 'mailroom-previous-'));
  execFileSync('bash', ['-c', `git -C "$1" archive ${PREVIOUS_RELEASE} | tar -x -C "$2"`, 'archive', ROOT, previous]);
  previousBin = path.join(previous, 'bin', 'mailroom.ts');
  // Its dependencies: this tree's when the lock files agree, else its own (installed once, no scripts:
  // the dashboard's build is not needed to serve the API).
  const [theirs, ours] = await Promise.all(
    [previous, ROOT].map((dir) => readFile(path.join(dir, 'package-lock.json'), 'utf8')),
  );
  if (theirs === ours) {
    await symlink(path.join(ROOT, 'node_modules'), path.join(previous, 'node_modules'), 'dir');
    return;
  }
  // Installed once for both passes of the suite, kept beside this tree's own dependencies. npm writes
  // node_modules/.package-lock.json last: an install cut short is made again.
  const cache = path.join(ROOT, 'node_modules', '.cache', `mailroom-release-${PREVIOUS_RELEASE}`);
  if (!existsSync(path.join(cache, 'node_modules', '.package-lock.json'))) {
    await rm(cache, { recursive: true, force: true });
    await mkdir(cache, { recursive: true });
    for (const file of ['package.json', 'package-lock.json']) {
      await copyFile(path.join(previous, file), path.join(cache, file));
    }
    execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: cache, stdio: 'ignore' });
  }
  await symlink(path.join(cache, 'node_modules'), path.join(previous, 'node_modules'), 'dir');
});
after(async () => {
  await rm(previous, { recursive: true, force: true });
});

const stopped = async (server: ServerProcess) => {
  server.child.kill('SIGTERM');
  return server.exited;
};

test('a rolling upgrade on PostgreSQL: the new release migrates and serves beside the old one, nothing lost or sent twice', async () => {
  if (!onPostgres) return; // processes of two releases share a database on PostgreSQL only
  const sink: SmtpSink = await startSmtpSink({ starttls: false });
  const { env: database, cleanup } = await databaseForProcesses('rolling');
  const env = {
    ...database,
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    MAILROOM_SMTP_TIMEOUT_MS: '5000',
  };
  const servers: ServerProcess[] = [];
  // Ended in finally too: a failed assertion must not leave the stream sending for ever.
  let streaming = false;
  try {
    // The old release makes the database and the organization, with its own CLI.
    const oldCli = async (...args: string[]) => {
      const res = await runCli([...args, '--json'], env, previousBin);
      assert.equal(res.code, 0, res.stderr + res.stdout);
      return res.json!;
    };
    const org = String((await oldCli('org', 'create', '--name', 'Rolling')).id);
    await oldCli('domain', 'add', '--org', org, 'rolling.example');
    await oldCli('domain', 'verify', '--org', org, 'rolling.example', '--trust');
    const key = String(
      (await oldCli('key', 'create', '--org', org, '--name', 'k', '--permission', 'full_access')).token,
    );
    const old = await startServerProcess(env, [], previousBin);
    servers.push(old);

    // A load balancer: requests go round the servers in rotation; a request that finds no server
    // listening is sent again to the next (with its Idempotency-Key, so it is accepted at most once).
    let rotation: ServerProcess[] = [old];
    let turn = 0;
    const accepted = new Map<string, string>(); // subject → message id
    const refused: string[] = [];
    const send = async (n: number) => {
      const subject = `rolling-${n}`;
      for (let attempt = 0; attempt < 10; attempt += 1) {
        const server = rotation[turn++ % rotation.length]!;
        try {
          const res = await fetch(`${server.base}/emails`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${key}`,
              'content-type': 'application/json',
              'idempotency-key': `rolling-${n}`,
            },
            body: JSON.stringify({ from: 'ops@rolling.example', to: `r${n}@example.com`, subject, text: 'hi' }),
          });
          const body = (await res.json()) as { id?: string };
          if (res.status >= 200 && res.status < 300) accepted.set(subject, body.id!);
          else refused.push(`${subject}: ${res.status} ${JSON.stringify(body)}`);
          return;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 100)); // not answered: the next server
        }
      }
      refused.push(`${subject}: no server answered`);
    };
    // About 30 sends a second until told to stop.
    streaming = true;
    const inFlight: Array<Promise<void>> = [];
    const stream = (async () => {
      for (let n = 0; streaming; n += 1) {
        inFlight.push(send(n));
        await new Promise((resolve) => setTimeout(resolve, 33));
      }
    })();
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    await sleep(1000);
    // The new release's expand migrations, applied while the old one serves.
    const migrated = await runCli(['migrate', '--json'], env);
    assert.equal(migrated.code, 0, migrated.stderr + migrated.stdout);
    assert.deepEqual(migrated.json, {
      applied: [
        '0037_job_failures',
        '0038_test_address_counts',
        '0039_domain_trusted',
        '0040_automations',
        '0041_request_log_without_foreign_keys',
        '0042_inbound_routes_cached',
      ],
      pending_contract: [],
    });
    const current = await startServerProcess(env);
    servers.push(current);
    rotation = [old, current];
    await sleep(2000);
    // The old process is taken out of the rotation, then stopped: it finishes what it was doing.
    rotation = [current];
    assert.equal(await stopped(old), 0, old.output());
    await sleep(1000);
    streaming = false;
    await stream;
    await Promise.all(inFlight);

    assert.deepEqual(refused, [], 'every request accepted: none answered 5xx (or anything but 2xx)');
    assert.ok(accepted.size >= 60, `only ${accepted.size} sends`);
    const delivered = () => sink.transactions.map((tx) => /^Subject: (rolling-\d+)\r?$/m.exec(tx.raw.toString())?.[1]);
    await waitFor(() => new Set(delivered()).size >= accepted.size, 30_000);
    await sleep(500); // a copy sent twice would arrive about now
    const counts = new Map<string, number>();
    for (const subject of delivered()) counts.set(String(subject), (counts.get(String(subject)) ?? 0) + 1);
    assert.deepEqual(
      [...accepted.keys()].filter((subject) => counts.get(subject) !== 1),
      [],
      'each accepted message delivered exactly once',
    );
    assert.equal(delivered().length, accepted.size, 'nothing delivered that was not accepted');
    // Messages accepted by the old release read back through the new one.
    const first = accepted.get('rolling-0')!;
    const read = await fetch(`${current.base}/emails/${first}`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(read.status, 200);
    assert.equal(((await read.json()) as { subject: string }).subject, 'rolling-0');

    // No process of the old release is left: the contract phase.
    const contracted = await runCli(['migrate', '--contract', '--json'], env);
    assert.equal(contracted.code, 0, contracted.stderr + contracted.stdout);
    assert.deepEqual(contracted.json, { applied: [], pending_contract: [] });
    assert.equal(await stopped(current), 0, current.output());
  } finally {
    streaming = false;
    for (const server of servers) if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await sink.close();
    await cleanup();
  }
});

test("the new release opens the old release's embedded data directory and reads back what it wrote", async () => {
  if (onPostgres) return; // the embedded database's pass
  const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-upgrade-'));
  const servers: ServerProcess[] = [];
  try {
    const env = { MAILROOM_DATA_DIR: dir };
    const old = await startServerProcess(env, [], previousBin);
    servers.push(old);
    // The development organization made at the first start: its key and verified domain.
    const fullKey = /full_access key\s+(\S+)/.exec(old.output())![1]!;
    const domain = /verified domain\s+(\S+)/.exec(old.output())![1]!;
    const call = async (server: ServerProcess, method: string, route: string, body?: unknown, key = fullKey) => {
      const res = await fetch(`${server.base}${route}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const messages: string[] = [];
    for (let n = 0; n < 3; n += 1) {
      const sent = await call(old, 'POST', '/emails', {
        from: `ops@${domain}`,
        to: `r${n}@example.com`,
        subject: `kept ${n}`,
        text: 'hello',
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      messages.push(String(sent.body.id));
    }
    const key = await call(old, 'POST', '/api-keys', { name: 'kept key', permission: 'sending_access' });
    assert.equal(key.status, 201, JSON.stringify(key.body));
    const added = await call(old, 'POST', '/domains', { name: 'kept.example' });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    const setting = await call(old, 'PATCH', '/organization', { open_tracking: true });
    assert.equal(setting.status, 200, JSON.stringify(setting.body));
    assert.equal(await stopped(old), 0, old.output());

    const current = await startServerProcess(env);
    servers.push(current);
    for (const [n, id] of messages.entries()) {
      const read = await call(current, 'GET', `/emails/${id}`);
      assert.equal(read.status, 200, JSON.stringify(read.body));
      assert.equal(read.body.subject, `kept ${n}`);
    }
    const keys = await call(current, 'GET', '/api-keys');
    assert.ok(
      (keys.body.data as Array<{ name: string }>).some((k) => k.name === 'kept key'),
      JSON.stringify(keys.body),
    );
    const domains = await call(current, 'GET', '/domains');
    assert.ok(
      (domains.body.data as Array<{ name: string }>).some((d) => d.name === 'kept.example'),
      JSON.stringify(domains.body),
    );
    const organization = await call(current, 'GET', '/organization');
    assert.equal(organization.body.open_tracking, true);
    // The key the old release created still sends.
    const sent = await call(
      current,
      'POST',
      '/emails',
      { from: `ops@${domain}`, to: 'after@example.com', subject: 'after', text: 'hi' },
      String(key.body.token),
    );
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    assert.equal(await stopped(current), 0, current.output());
  } finally {
    for (const server of servers) if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});
