// The image in deploy/ is built and run for real: a Debian base made from Debian's packages with
// mmdebstrap (no image registry needed), `podman build` of deploy/Dockerfile on it, the container run
// against the test PostgreSQL with its own CLI making an organization, one message sent through its API
// reaching a loopback SMTP server, its health check passing, its process not root, and SIGTERM stopping
// it cleanly. It takes minutes (the base, then npm ci inside the build), so it runs once, as a step of
// its own: `.ci/run` sets MAILROOM_TEST_IMAGE=1 for it, with DATABASE_URL. Run it by hand with
//   MAILROOM_TEST_IMAGE=1 DATABASE_URL=postgres://… node --test test/container-image.test.ts
// It needs mmdebstrap, podman and runc (podman's default runtime, crun, fails on some kernels' cgroups).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createPostgresDatabase } from './helpers/database.ts';
import { freePort } from './helpers/server-process.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

const enabled = process.env.MAILROOM_TEST_IMAGE === '1' && Boolean(process.env.DATABASE_URL);
const root = fileURLToPath(new URL('..', import.meta.url));
const BASE = 'localhost/mailroom-test-base';
const IMAGE = 'localhost/mailroom-test';
const CONTAINER = `mailroom-test-${process.pid}`;
// A TLS-re-signing proxy between this machine and the npm registry is trusted through the system's CA
// bundle: the build gets the same one.
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

const exec = promisify(execFile);
const run = (command: string, args: string[], timeout = 600_000) =>
  exec(command, args, { timeout, maxBuffer: 64 * 1024 * 1024 });
// `podman run` and `exec` with runc and limits this kernel accepts.
const RUNTIME = ['--runtime', 'runc'];
const LIMITS = ['--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1024:1024'];

let sink: SmtpSink;
let database: { url: string; drop(): Promise<void> };

before(async () => {
  if (!enabled) return;
  sink = await startSmtpSink({ starttls: false });
  database = await createPostgresDatabase();
});
after(async () => {
  if (!enabled) return;
  await run('podman', ['rm', '--force', CONTAINER]).catch(() => {});
  await sink.close();
  await database.drop();
});

/** A Debian bookworm base with Debian's nodejs and npm, made once per machine. */
async function debianBase(): Promise<void> {
  const exists = await run('podman', ['image', 'exists', BASE]).then(
    () => true,
    () => false,
  );
  if (exists) return;
  const dir = await mkdtemp(join(tmpdir(), 'mailroom-base-'));
  try {
    const tarball = join(dir, 'base.tar');
    await run('mmdebstrap', [
      '--variant=minbase',
      '--include=nodejs,npm,ca-certificates',
      'bookworm',
      tarball,
      'http://deb.debian.org/debian',
    ]);
    await run('podman', ['import', tarball, BASE]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('the image builds on a Debian base, runs as a user of its own, and sends a message', async () => {
  if (!enabled) return; // a step of its own in .ci/run (see above)
  await debianBase();
  const caBuild = existsSync(CA_BUNDLE) ? ['--secret', `id=ca,src=${CA_BUNDLE}`] : [];
  await run(
    'podman',
    [
      'build',
      ...RUNTIME,
      ...LIMITS,
      '--network',
      'host',
      '--format',
      'docker',
      '--build-arg',
      `BASE=${BASE}`,
      ...caBuild,
      '--file',
      'deploy/Dockerfile',
      '--tag',
      IMAGE,
      root,
    ],
    1_200_000,
  );

  const port = await freePort();
  await run('podman', [
    'run',
    '--detach',
    '--name',
    CONTAINER,
    ...RUNTIME,
    ...LIMITS,
    '--network',
    'host',
    '--env',
    `DATABASE_URL=${database.url}`,
    '--env',
    'HOST=127.0.0.1',
    '--env',
    `PORT=${port}`,
    '--env',
    'MAILROOM_TRANSPORT=smtp',
    '--env',
    `MAILROOM_SMTP_URL=${sink.url}`,
    IMAGE,
  ]);
  const base = `http://127.0.0.1:${port}`;
  await waitFor(
    () =>
      fetch(`${base}/healthz`).then(
        (r) => r.ok,
        () => false,
      ),
    60_000,
    200,
  );

  // The operator CLI inside the container, as docs/deploy.md shows it.
  const cli = async (...args: string[]) => {
    const { stdout } = await run('podman', ['exec', CONTAINER, 'node', 'bin/mailroom.ts', ...args, '--json']);
    return JSON.parse(stdout) as Record<string, unknown>;
  };
  const org = String((await cli('org', 'create', '--name', 'Image')).id);
  await cli('domain', 'add', '--org', org, 'image.example');
  await cli('domain', 'verify', '--org', org, 'image.example', '--trust');
  const key = String((await cli('key', 'create', '--org', org, '--name', 'k', '--permission', 'full_access')).token);

  const res = await fetch(`${base}/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      from: 'ops@image.example',
      to: 'reader@example.com',
      subject: 'From the image',
      text: 'hi',
    }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  await waitFor(() => sink.transactions.some((tx) => tx.rcptTo.includes('reader@example.com')), 60_000, 200);
  const received = sink.transactions.find((tx) => tx.rcptTo.includes('reader@example.com'))!;
  assert.match(received.raw.toString(), /^DKIM-Signature:/m);

  // The image's own health check, and who the process runs as.
  await run('podman', ['healthcheck', 'run', CONTAINER]);
  const { stdout: uid } = await run('podman', ['exec', CONTAINER, 'id', '-u']);
  assert.notEqual(uid.trim(), '0');
  const { stdout: user } = await run('podman', ['top', CONTAINER, 'user', 'args']);
  assert.match(user, /^mailroom\s+node bin\/mailroom\.ts serve\s*$/m, user);

  // SIGTERM reaches Node (the entry point is node itself): a clean stop, exit 0.
  await run('podman', ['stop', '--time', '20', CONTAINER]);
  const { stdout: exitCode } = await run('podman', ['inspect', '--format', '{{.State.ExitCode}}', CONTAINER]);
  assert.equal(exitCode.trim(), '0');
});
