// The files in deploy/ say what docs/deploy.md says they do: the compose file parses and runs PostgreSQL,
// one API and one worker with the SMTP ports published; the Dockerfile builds on a base given as an
// argument and runs as a user of its own with a health check; the systemd unit passes systemd's own
// verification; the health check script passes against a running Mailroom and fails against none.
// (test/container-image.test.ts builds and runs the image itself.) Nothing here depends on the database:
// it runs in the PGlite pass only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { onPostgres } from './helpers/database.ts';
import { freePort, startServerProcess } from './helpers/server-process.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const deployFile = (name: string) => join(root, 'deploy', name);

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
}

test('compose.yaml: PostgreSQL, one API with the SMTP ports and one worker, on named volumes', async () => {
  if (onPostgres) return; // no database involved: the PGlite pass runs it
  const compose = parse(await readFile(deployFile('compose.yaml'), 'utf8'), { merge: true }) as {
    services: Record<string, ComposeService>;
    volumes: Record<string, unknown>;
  };
  assert.deepEqual(Object.keys(compose.services).sort(), ['api', 'postgres', 'worker']);
  const { api, worker, postgres } = compose.services as Record<string, ComposeService>;
  assert.match(postgres!.image!, /^postgres:1[5-9]/);
  assert.ok(postgres!.volumes!.some((volume) => volume.startsWith('postgres-data:')));
  assert.ok(postgres!.healthcheck, 'PostgreSQL has a health check the others wait for');

  assert.deepEqual(api!.command, ['serve', '--role', 'api']);
  assert.deepEqual(worker!.command, ['serve', '--role', 'worker']);
  for (const service of [api!, worker!]) {
    assert.equal(service.build?.dockerfile, 'deploy/Dockerfile');
    assert.equal(service.depends_on?.postgres?.condition, 'service_healthy');
    assert.match(service.environment!.DATABASE_URL!, /@postgres:5432\//);
    assert.ok(service.volumes!.some((volume) => volume.startsWith('mailroom-data:/var/lib/mailroom')));
  }
  // The published ports: the API, inbound SMTP and both submission ports, each on a port the API's
  // environment makes it listen on inside the container.
  const published = new Map(api!.ports!.map((mapping) => mapping.split(':') as [string, string]));
  assert.deepEqual([...published.keys()].sort(), ['25', '3000', '465', '587']);
  assert.equal(published.get('25'), api!.environment!.MAILROOM_INBOUND_PORT);
  assert.equal(published.get('587'), api!.environment!.MAILROOM_SUBMISSION_PORT);
  assert.equal(published.get('465'), api!.environment!.MAILROOM_SUBMISSIONS_PORT);
  assert.equal(worker!.ports, undefined, 'the worker publishes nothing');
  assert.ok(worker!.environment!.MAILROOM_METRICS_PORT, 'the worker answers health checks on its metrics port');
  assert.deepEqual(Object.keys(compose.volumes).sort(), ['mailroom-data', 'postgres-data']);
});

test('Dockerfile: the base is a build argument (node:24-bookworm-slim), a user of its own, a health check, serve', async () => {
  if (onPostgres) return;
  const dockerfile = await readFile(deployFile('Dockerfile'), 'utf8');
  const lines = dockerfile.split('\n').filter((line) => line.trim() && !line.startsWith('#'));
  assert.equal(lines[0], 'ARG BASE=node:24-bookworm-slim', 'the base is the first thing declared');
  const froms = lines.filter((line) => line.startsWith('FROM '));
  assert.ok(froms.length >= 2 && froms.every((line) => /^FROM \$\{BASE\}/.test(line)), froms.join('\n'));
  const users = lines.filter((line) => line.startsWith('USER '));
  assert.deepEqual(users, ['USER mailroom']);
  assert.match(dockerfile, /^HEALTHCHECK .*CMD \["node", "deploy\/healthcheck\.js"\]$/m);
  assert.match(dockerfile, /^ENTRYPOINT \["node", "bin\/mailroom\.ts"\]$/m);
  assert.match(dockerfile, /^CMD \["serve"\]$/m);
  const exposed = /^EXPOSE (.+)$/m.exec(dockerfile)![1]!.split(' ').sort();
  assert.deepEqual(exposed, ['2465', '2525', '2587', '3000']);
});

test('the health check script: 0 against a running Mailroom, 1 once it has stopped', async () => {
  if (onPostgres) return;
  const dataDir = await mkdtemp(join(tmpdir(), 'mailroom-healthcheck-'));
  try {
    const server = await startServerProcess({ MAILROOM_DATA_DIR: dataDir });
    const port = new URL(server.base).port;
    const check = () =>
      run(process.execPath, [deployFile('healthcheck.js')], { env: { PATH: process.env.PATH, PORT: port } }).then(
        () => 0,
        (error: { code: number }) => error.code,
      );
    try {
      assert.equal(await check(), 0);
      // A worker has no API port: the script asks MAILROOM_METRICS_PORT first, nobody listens there.
      const metrics = await run(process.execPath, [deployFile('healthcheck.js')], {
        env: { PATH: process.env.PATH, PORT: port, MAILROOM_METRICS_PORT: String(await freePort()) },
      }).then(
        () => 0,
        (error: { code: number }) => error.code,
      );
      assert.equal(metrics, 1);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    assert.equal(await check(), 1);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('the systemd unit passes systemd-analyze verify', async () => {
  if (onPostgres) return;
  // verify checks that ExecStart's program exists: the unit is checked with this checkout in /opt/mailroom's place.
  const unit = (await readFile(deployFile('mailroom@.service'), 'utf8')).replaceAll(
    '/opt/mailroom/node_modules/.bin/node',
    realpathSync(join(root, 'node_modules/.bin/node')),
  );
  assert.notEqual(unit, await readFile(deployFile('mailroom@.service'), 'utf8'));
  const dir = await mkdtemp(join(tmpdir(), 'mailroom-unit-'));
  try {
    await writeFile(join(dir, 'mailroom@api.service'), unit);
    const { stdout, stderr } = await run('systemd-analyze', ['verify', join(dir, 'mailroom@api.service')]);
    assert.equal((stdout + stderr).trim(), '', stdout + stderr);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  assert.match(unit, /^ExecStart=\S+ \/opt\/mailroom\/bin\/mailroom\.ts serve --role %i$/m);
  assert.match(unit, /^User=mailroom$/m);
  assert.match(unit, /^AmbientCapabilities=CAP_NET_BIND_SERVICE$/m);
});
