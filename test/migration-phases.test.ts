// Migrations for rolling upgrades: each declares its phase; a start applies the expand ones and leaves the
// contract ones to `mailroom migrate --contract`; a release meeting a contract migration it does not know
// refuses the database; a migration waits for locks briefly and is tried again rather than stall traffic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import {
  loadMigrations,
  migrate,
  MigrationError,
  parseMigration,
  SchemaTooNewError,
  SCHEMA_CHANNEL,
} from '../src/platform/db/migrate.ts';
import { openPGliteDirectory } from '../src/platform/db/pglite.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import type { Database } from '../src/platform/db/database.ts';
import { databaseForProcesses, migrateBefore, onPostgres, openTestDatabase } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startServerProcess } from './helpers/server-process.ts';

const TOO_NEW =
  /^mailroom: the database has been migrated past what this release can serve: contract migration 9999_drop_everything is applied, and this release knows migrations up to \d{4}_\w+; upgrade to the release that applied it \(or a later one\)\n$/;

/** Opens the database a child process would use (`env` from databaseForProcesses), in this process. */
async function openForProcesses(env: Record<string, string>): Promise<Database> {
  return env.DATABASE_URL ? openPostgres(env.DATABASE_URL, 2) : openPGliteDirectory(env.MAILROOM_DATA_DIR!);
}

test('every migration declares its phase on its first line, expand or contract', async () => {
  const all = await loadMigrations(); // throws on a migration without a declaration
  for (const m of all) assert.ok(['expand', 'contract'].includes(m.phase), `${m.id} ${m.phase}`);
  // The destructive ones of the past: 0006 dropped the columns older code read, 0007 narrowed a CHECK.
  assert.deepEqual(
    all.filter((m) => m.phase === 'contract').map((m) => m.id),
    [6, 7],
  );
  assert.throws(
    () => parseMigration('0040_x.sql', '-- Adds a column.\nALTER TABLE t ADD COLUMN c int;'),
    (error: Error) =>
      error instanceof MigrationError &&
      error.message ===
        'migration 0040_x.sql must declare its phase on its first line, "-- expand: <what it does>" or ' +
          '"-- contract: <what it does>"; it starts with "-- Adds a column."',
  );
  assert.throws(() => parseMigration('0040_x.sql', '-- shrink: drops c\nALTER TABLE t DROP c;'), MigrationError);
  assert.throws(() => parseMigration('0040_x.sql', 'ALTER TABLE t DROP c; -- contract: drops c'), MigrationError);
  assert.equal(parseMigration('0040_x.sql', '-- contract: drops c\nALTER TABLE t DROP c;').phase, 'contract');
});

test('a start applies expand migrations only; --contract applies the contract ones', async () => {
  const { db, close } = await openTestDatabase({ migrated: false });
  try {
    await migrateBefore(db, 6); // an install of a release from before 0006
    const lines: string[] = [];
    const started = await migrate(db, { log: (line) => lines.push(line) });
    if (onPostgres) {
      // Processes of that release may still run beside this one: 0006 and 0007 wait.
      assert.deepEqual(started.pendingContract, ['0006_idempotency_results', '0007_statuses']);
      assert.equal(started.applied[0], '0008_email_list');
      assert.match(
        lines.join('\n'),
        /0006_idempotency_results, 0007_statuses not applied: run "mailroom migrate --contract"/,
      );
      const ids = await db.query<{ id: number }>('SELECT id FROM mailroom_migrations WHERE id IN (6, 7)');
      assert.equal(ids.rowCount, 0);
      const contracted = await migrate(db, { contract: true });
      assert.deepEqual(contracted, { applied: ['0006_idempotency_results', '0007_statuses'], pendingContract: [] });
      const phases = await db.query<{ id: number; phase: string }>(
        "SELECT id, phase FROM mailroom_migrations WHERE phase = 'contract' ORDER BY id",
      );
      assert.deepEqual(
        phases.rows.map((r) => r.id),
        [6, 7],
      );
    } else {
      // The embedded database has one process at a time: nothing older can run beside, so all is applied.
      assert.deepEqual(started.pendingContract, []);
      assert.equal(started.applied[0], '0006_idempotency_results');
    }
    assert.deepEqual(await migrate(db), { applied: [], pendingContract: [] });
  } finally {
    await close();
  }
});

test('a release refuses a database with a contract migration it does not know: migrate, serve and the CLI', async () => {
  const { env, cleanup } = await databaseForProcesses('too-new');
  try {
    const db = await openForProcesses(env);
    try {
      await migrate(db);
      // What a later release's `migrate --contract` leaves.
      await db.query("INSERT INTO mailroom_migrations (id, name, phase) VALUES (9999, 'drop_everything', 'contract')");
      await assert.rejects(migrate(db), SchemaTooNewError);
      // A later release's expand migration is no reason to refuse.
      await db.query("UPDATE mailroom_migrations SET phase = 'expand' WHERE id = 9999");
      await migrate(db);
      await db.query("UPDATE mailroom_migrations SET phase = 'contract' WHERE id = 9999");
    } finally {
      await db.close();
    }
    const serve = await runCli(['serve'], { ...env, PORT: '0', MAILROOM_SUBMISSION_PORT: 'off' });
    assert.equal(serve.code, 1, serve.stdout + serve.stderr);
    assert.match(serve.stderr, TOO_NEW);
    const list = await runCli(['org', 'list'], env);
    assert.equal(list.code, 1);
    assert.match(list.stderr, TOO_NEW);
    const json = await runCli(['migrate', '--json'], env);
    assert.equal((json.json!.error as { name: string }).name, 'schema_too_new');
  } finally {
    await cleanup();
  }
});

test('a running server stops when a contract migration it does not know is applied beside it', async () => {
  if (!onPostgres) return; // the embedded database has one process: nothing can migrate beside it
  const { env, cleanup } = await databaseForProcesses('too-new-running');
  try {
    const server = await startServerProcess({ ...env, MAILROOM_TRANSPORT: 'capture' });
    const db = openPostgres(env.DATABASE_URL!, 2);
    try {
      await db.query("INSERT INTO mailroom_migrations (id, name, phase) VALUES (9999, 'drop_everything', 'contract')");
      await db.query(`NOTIFY ${SCHEMA_CHANNEL}`);
      const code = await Promise.race([server.exited, new Promise((r) => setTimeout(() => r('running'), 10_000))]);
      if (code === 'running') server.child.kill('SIGKILL');
      assert.equal(code, 1, server.output());
      assert.match(server.output(), /mailroom: the database has been migrated past what this release can serve/);
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      await db.close();
    }
  } finally {
    await cleanup();
  }
});

test('a migration that waits for a lock held by live traffic is rolled back and tried again', async () => {
  if (!onPostgres) return; // PGlite has one connection: no other transaction holds locks
  const { db, url, close } = await openTestDatabase({ migrated: false });
  const traffic = new pg.Client({ connectionString: url });
  await traffic.connect();
  try {
    await migrateBefore(db, 39);
    // A long transaction of the older release that has read domains: 0039's ALTER TABLE must wait for it.
    await traffic.query('BEGIN');
    await traffic.query('SELECT count(*) FROM domains');
    const lines: string[] = [];
    const fast = { lockTimeout: '100ms', backoffMs: 50, log: (line: string) => lines.push(line) };
    const failed = await migrate(db, { ...fast, attempts: 2 }).then(
      () => undefined,
      (error: Error) => error,
    );
    assert.ok(failed instanceof MigrationError, String(failed));
    assert.equal(
      failed.message,
      'migration 0039_domain_trusted failed 2 times, the last with a lock was not granted in time ' +
        '(canceling statement due to lock timeout); nothing of it is applied: run "mailroom migrate" again ' +
        'when the database is less busy',
    );
    assert.deepEqual(lines, [
      'migration 0039_domain_trusted: a lock was not granted in time, rolled back; trying again in 50 ms (try 2 of 2)',
    ]);
    // Meanwhile the older release's reads and writes of domains went on: the migration held no lock.
    await traffic.query("UPDATE domains SET status = status WHERE name = 'none'");
    // The transaction ends while the migration is retrying: the next try succeeds.
    lines.length = 0;
    setTimeout(() => void traffic.query('COMMIT'), 400);
    const result = await migrate(db, { ...fast, attempts: 20 });
    // 0039 first, then any later migration of this release.
    assert.equal(result.applied[0], '0039_domain_trusted');
    assert.ok(lines.length >= 1, 'retried at least once');
  } finally {
    await traffic.end();
    await close();
  }
});

test('`mailroom migrate` that fails says so in one line, no stack trace', async () => {
  const { env, cleanup } = await databaseForProcesses('migrate-fails');
  try {
    const db = await openForProcesses(env);
    try {
      await migrateBefore(db, 39);
      await db.query('ALTER TABLE domains ADD COLUMN trusted integer'); // in the way of 0039
    } finally {
      await db.close();
    }
    const res = await runCli(['migrate'], env);
    assert.equal(res.code, 1);
    assert.equal(
      res.stderr,
      'mailroom: migration 0039_domain_trusted failed: column "trusted" of relation "domains" already exists\n',
    );
    const json = await runCli(['migrate', '--json'], env);
    assert.equal((json.json!.error as { name: string }).name, 'migration_failed');
  } finally {
    await cleanup();
  }
});

test('a migrations table that cannot be read is one clear error too', async () => {
  const { db, close } = await openTestDatabase({ migrated: false });
  try {
    await db.query('CREATE TABLE mailroom_migrations (version text)'); // not Mailroom's
    await assert.rejects(migrate(db), (error: Error) => {
      assert.ok(error instanceof MigrationError, String(error));
      assert.equal(error.message, 'cannot read the applied migrations: column "id" does not exist');
      return true;
    });
  } finally {
    await close();
  }
});
