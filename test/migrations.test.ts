import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadMigrations, migrate } from '../src/platform/db/migrate.ts';
import { openPGliteDirectory } from '../src/platform/db/pglite.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { createPostgresDatabase, migrateBefore, onPostgres, openTestDatabase } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import type { Database } from '../src/platform/db/database.ts';

const appliedIds = async (db: Database) =>
  (await db.query<{ id: number }>('SELECT id FROM mailroom_migrations ORDER BY id')).rows.map((r) => r.id);

test('migrations are numbered, and a second run applies nothing', async () => {
  const all = await loadMigrations();
  assert.deepEqual(
    all.map((m) => m.id),
    all.map((_, i) => i + 1),
    'migration numbers run 1, 2, 3 … without gaps',
  );
  const { db, close } = await openTestDatabase({ migrated: false });
  try {
    assert.equal((await migrate(db)).applied.length, all.length, 'a fresh database gets every migration');
    assert.deepEqual(await migrate(db), { applied: [], pendingContract: [] });
    assert.deepEqual(
      await appliedIds(db),
      all.map((m) => m.id),
    );
  } finally {
    await close();
  }
});

test('a migration that fails leaves nothing half-applied', async () => {
  const { db, close } = await openTestDatabase({ migrated: false });
  try {
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.exec('CREATE TABLE half_done (id int); SELECT no_such_function();');
      }),
    );
    const { rows } = await db.query("SELECT to_regclass('half_done') AS t");
    assert.equal((rows[0] as { t: unknown }).t, null);
  } finally {
    await close();
  }
});

test('two migrations running at once apply each migration once', async () => {
  const count = (await loadMigrations()).length;
  if (onPostgres) {
    // Two pools: two connections racing, as two processes would.
    const created = await createPostgresDatabase();
    const [a, b] = [openPostgres(created.url, 2), openPostgres(created.url, 2)];
    try {
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
      assert.equal(ra.applied.length + rb.applied.length, count);
      assert.deepEqual((await appliedIds(a)).length, count);
    } finally {
      await a.close();
      await b.close();
      await created.drop();
    }
  } else {
    const { db, close } = await openTestDatabase({ migrated: false });
    try {
      const [ra, rb] = await Promise.all([migrate(db), migrate(db)]);
      assert.equal(ra.applied.length + rb.applied.length, count);
    } finally {
      await close();
    }
  }
});

test('two `mailroom migrate` processes started at once', async () => {
  const count = (await loadMigrations()).length;
  if (onPostgres) {
    const created = await createPostgresDatabase();
    try {
      const env = { DATABASE_URL: created.url };
      const results = await Promise.all([runCli(['migrate', '--json'], env), runCli(['migrate', '--json'], env)]);
      for (const r of results) assert.equal(r.code, 0, r.stderr + r.stdout);
      const applied = results.flatMap((r) => r.json!.applied as string[]);
      assert.equal(applied.length, count, 'each migration applied by exactly one of the two');
      assert.equal(new Set(applied).size, count);
    } finally {
      await created.drop();
    }
  } else {
    // PGlite belongs to one process: the second either finds the work done or is told plainly that
    // the directory is in use. Never both working on the files at once.
    const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-migrate-'));
    try {
      const env = { MAILROOM_DATA_DIR: dir };
      const results = await Promise.all([runCli(['migrate', '--json'], env), runCli(['migrate', '--json'], env)]);
      const ok = results.filter((r) => r.code === 0);
      const refused = results.filter((r) => r.code !== 0);
      assert.ok(ok.length >= 1, JSON.stringify(results));
      for (const r of refused) {
        assert.equal((r.json!.error as { name: string }).name, 'data_dir_in_use', r.stdout + r.stderr);
      }
      assert.equal(ok.flatMap((r) => r.json!.applied as string[]).length, count);
      const db = await openPGliteDirectory(dir);
      assert.equal((await appliedIds(db)).length, count);
      await db.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
});

test('a CLI command while another process holds the embedded database says so plainly', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-lock-'));
  const held = await openPGliteDirectory(dir);
  try {
    const res = await runCli(['org', 'create', '--name', 'X'], { MAILROOM_DATA_DIR: dir });
    assert.equal(res.code, 1);
    assert.match(res.stderr, new RegExp(`in use by process ${process.pid}`));
    const json = await runCli(['org', 'create', '--name', 'X', '--json'], { MAILROOM_DATA_DIR: dir });
    assert.equal((json.json!.error as { name: string }).name, 'data_dir_in_use');
  } finally {
    await held.close();
  }
  // Released on close: the next command opens it.
  const after = await runCli(['org', 'create', '--name', 'X', '--json'], { MAILROOM_DATA_DIR: dir });
  assert.equal(after.code, 0, after.stderr);
  await rm(dir, { recursive: true, force: true });
});

test('idempotency answers stored before results were plain data still replay after the upgrade', async () => {
  const { db, close } = await openTestDatabase({ migrated: false });
  try {
    // The database as it was before 0006: every earlier migration applied, then answers stored as HTTP.
    await migrateBefore(db, 6);
    const org = (
      await db.query<{ id: string }>(
        "INSERT INTO organizations (name, monthly_quota, rate_limit) VALUES ('o', 100, 10) RETURNING id",
      )
    ).rows[0]!.id;
    const id = '7d0c3a52-2a84-4d83-a3c4-2f8e0c36f1a1';
    const stored = [
      ['single', 200, { object: 'email', id }],
      ['refused', 400, { statusCode: 400, name: 'validation_error', message: 'Invalid field to', field: 'to' }],
      [
        'batch',
        200,
        {
          object: 'list',
          data: [
            { object: 'email', id },
            {
              object: 'error',
              id: null,
              index: 1,
              statusCode: 400,
              name: 'invalid_from_address',
              message: 'm',
              field: 'from',
            },
          ],
          errors: [{ index: 1, statusCode: 400, name: 'invalid_from_address', message: 'm', field: 'from' }],
        },
      ],
      ['running', null, null],
    ] as const;
    for (const [key, status, response] of stored) {
      await db.query(
        'INSERT INTO idempotency_keys (organization_id, key, fingerprint, status_code, response) VALUES ($1, $2, $3, $4, $5::jsonb)',
        [org, key, 'f', status, response === null ? null : JSON.stringify(response)],
      );
    }
    await migrate(db, { contract: true }); // 0006 is a contract migration
    const results = Object.fromEntries(
      (await db.query<{ key: string; result: unknown }>('SELECT key, result FROM idempotency_keys')).rows.map((r) => [
        r.key,
        r.result,
      ]),
    );
    assert.deepEqual(results, {
      single: { entries: [{ accepted: true, id }] },
      refused: { refused: { name: 'validation_error', message: 'Invalid field to', field: 'to' } },
      batch: {
        entries: [
          { accepted: true, id },
          { accepted: false, error: { name: 'invalid_from_address', message: 'm', field: 'from' } },
        ],
      },
      running: null,
    });
  } finally {
    await close();
  }
});
