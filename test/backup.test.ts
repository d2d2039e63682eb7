// Backups of the embedded database while the server runs, and restoring one into a stopped directory.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from './helpers/cli.ts';
import { onPostgres } from './helpers/database.ts';
import { waitFor } from './helpers/wait.ts';
import { startServerProcess } from './helpers/server-process.ts';

// The embedded database only: the PGlite pass runs this.
let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'mailroom-backup-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const cli = async (env: Record<string, string>, ...args: string[]) => {
  const res = await runCli([...args, '--json'], env);
  assert.equal(res.code, 0, `mailroom ${args.join(' ')}: ${res.stdout}${res.stderr}`);
  return res.json as Record<string, unknown>;
};

test('a backup taken under a stream of sends restores every message acknowledged before it began', async () => {
  if (onPostgres) return;
  const live = { MAILROOM_DATA_DIR: path.join(dir, 'live') };
  const server = await startServerProcess(live);
  const backupFile = path.join(dir, 'mailroom.tgz');
  let acknowledgedBefore: string[] = [];
  let token = '';
  try {
    const org = /^\s+organization\s+(\S+)$/m.exec(server.output())?.[1];
    assert.ok(org, server.output());
    token = (await cli(live, 'key', 'create', '--org', org, '--name', 'backup', '--permission', 'full_access'))
      .token as string;
    const send = async () => {
      const res = await fetch(`${server.base}/emails`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ from: 'app@example.test', to: 'user@example.test', subject: 'hi', text: 'hello' }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      return ((await res.json()) as { id: string }).id;
    };
    const acknowledged: string[] = [];
    let streaming = true;
    const stream = (async () => {
      while (streaming) acknowledged.push(await send());
    })();
    // Bounded: a failed send ends the stream, and its error is the one to see.
    await Promise.race([
      waitFor(() => acknowledged.length >= 20, 30_000, 20),
      stream.then(() => assert.fail('the stream of sends ended early')),
    ]);
    acknowledgedBefore = [...acknowledged];
    const backup = await cli(live, 'backup', backupFile);
    const during = acknowledged.length - acknowledgedBefore.length;
    streaming = false;
    await stream;
    assert.ok(during > 0, 'sends went on while the backup was taken');
    assert.ok((backup.bytes as number) > 0);

    const again = await runCli(['backup', backupFile], live);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /exists \(--force replaces it\)/);

    // The directory is held by the server: restoring into it is refused and leaves it as it was.
    const busy = await runCli(['restore', backupFile, '--force'], live);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, /in use by process \d+: stop the server/);
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
  }

  const restored = { MAILROOM_DATA_DIR: path.join(dir, 'restored') };
  const restore = await cli(restored, 'restore', backupFile);
  assert.equal(restore.moved_aside, null);
  const second = await startServerProcess(restored);
  try {
    for (const id of acknowledgedBefore) {
      const res = await fetch(`${second.base}/emails/${id}`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 200, `${id}: ${await res.text()}`);
    }
    const domains = await fetch(`${second.base}/domains`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(domains.status, 200);
    const names = ((await domains.json()) as { data: Array<{ name: string }> }).data.map((d) => d.name);
    assert.ok(names.includes('example.test'), JSON.stringify(names));
  } finally {
    second.child.kill('SIGTERM');
    await second.exited;
  }
});

test('backup and restore refuse PostgreSQL, a missing directory, a file that is not a backup', async () => {
  if (onPostgres) return;
  const env = { MAILROOM_DATA_DIR: path.join(dir, 'refusals') };
  const postgres = await runCli(['backup', path.join(dir, 'pg.tgz')], {
    ...env,
    DATABASE_URL: 'postgres://mailroom@127.0.0.1:5432/mailroom',
  });
  assert.equal(postgres.code, 1);
  assert.match(postgres.stderr, /pg_dump.*pg_basebackup/);
  assert.equal(postgres.stderr.trim().split('\n').length, 1);

  const missing = await runCli(['backup', path.join(dir, 'nowhere', 'b.tgz')], env);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /directory .*nowhere does not exist/);

  // A data directory with no database in it (MAILROOM_DATA_DIR set wrong): nothing is made, nothing written.
  const empty = await runCli(['backup', path.join(dir, 'empty.tgz')], env);
  assert.equal(empty.code, 1);
  assert.match(empty.stderr, /no embedded database in .*refusals \(MAILROOM_DATA_DIR\): nothing to back up/);
  assert.ok(!(await readdir(dir)).includes('empty.tgz'));
  assert.ok(!(await readdir(dir)).includes('refusals'), 'no database was made');

  const bad = path.join(dir, 'bad.tgz');
  await writeFile(bad, 'not a backup');
  const target = { MAILROOM_DATA_DIR: path.join(dir, 'target') };
  const refused = await runCli(['restore', bad], target);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /is not a Mailroom backup/);
  assert.deepEqual(
    (await readdir(dir)).filter((name) => name.startsWith('target')),
    [],
    'a refused restore leaves nothing behind',
  );
});

// Over the directory the first test restored into and served from, with its backup: no new database to make.
test('restore over a directory with files: refused without --force; with it, the old one is kept aside', async () => {
  if (onPostgres) return;
  const env = { MAILROOM_DATA_DIR: path.join(dir, 'restored') };
  const backupFile = path.join(dir, 'mailroom.tgz');
  // A file of the operator's beside the database: it goes aside with the old directory.
  await writeFile(path.join(env.MAILROOM_DATA_DIR, 'kept.txt'), 'mine');
  const before = (await readdir(env.MAILROOM_DATA_DIR)).sort();
  assert.ok(before.includes('pgdata'), `the first test left no restored directory: ${before.join(' ')}`);

  const refused = await runCli(['restore', backupFile], env);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /is not empty \(--force moves it aside/);
  const bad = path.join(dir, 'restored-bad.tgz');
  await writeFile(bad, 'not a backup');
  const badForced = await runCli(['restore', bad, '--force'], env);
  assert.equal(badForced.code, 1);
  assert.match(badForced.stderr, /is not a Mailroom backup/);
  assert.deepEqual((await readdir(env.MAILROOM_DATA_DIR)).sort(), before, 'refused restores left it as it was');

  const restored = await cli(env, 'restore', backupFile, '--force');
  const aside = restored.moved_aside as string;
  assert.match(aside, /restored\.before-restore-/);
  assert.deepEqual((await readdir(aside)).sort(), before, 'the old directory is kept whole');
  assert.deepEqual(await readdir(env.MAILROOM_DATA_DIR), ['pgdata'], 'the backup alone is in its place');
});
