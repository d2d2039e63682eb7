import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Database } from '../../src/platform/db/database.ts';
import { loadMigrations, migrate } from '../../src/platform/db/migrate.ts';
import { openPGliteInMemory } from '../../src/platform/db/pglite.ts';
import { openPostgres } from '../../src/platform/db/postgres.ts';

// Each test file gets a database of its own: with DATABASE_URL set, a fresh database created on that
// server (dropped at the end); without it, an in-memory PGlite. Both are migrated before use.

export interface TestDatabase {
  db: Database;
  /** The connection string of the fresh PostgreSQL database, for tests that start other processes. */
  url: string | undefined;
  close(): Promise<void>;
}

export const onPostgres = Boolean(process.env.DATABASE_URL);

/** A fresh, empty PostgreSQL database on the DATABASE_URL server; dropped by the returned function. */
export async function createPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const serverUrl = process.env.DATABASE_URL!;
  const name = `mailroom_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

export async function openTestDatabase(options: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const migrated = options.migrated ?? true;
  if (!onPostgres) {
    const db = await openPGliteInMemory();
    if (migrated) await migrate(db);
    return { db, url: undefined, close: () => db.close() };
  }
  const created = await createPostgresDatabase();
  const db = openPostgres(created.url, 5);
  if (migrated) await migrate(db);
  return {
    db,
    url: created.url,
    async close() {
      await db.close();
      await created.drop();
    },
  };
}

/**
 * Data for child processes (the CLI, `mailroom serve`): a fresh PostgreSQL database when DATABASE_URL is
 * set, else a temporary PGlite directory. `env` points a process at it; `cleanup` removes it.
 */
export async function databaseForProcesses(
  label: string,
): Promise<{ env: Record<string, string>; cleanup(): Promise<void> }> {
  if (onPostgres) {
    const created = await createPostgresDatabase();
    return { env: { DATABASE_URL: created.url }, cleanup: created.drop };
  }
  const dir = await mkdtemp(path.join(tmpdir(), `mailroom-${label}-`));
  return { env: { MAILROOM_DATA_DIR: dir }, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * A second connection pool to the database `db` uses, standing for a second process (on PGlite, one
 * process only: `db` itself, and closing it does nothing).
 */
export async function secondConnection(db: Database): Promise<{ db: Database; close(): Promise<void> }> {
  if (db.kind !== 'postgres') return { db, close: async () => {} };
  const { rows } = await db.query<{ name: string }>('SELECT current_database() AS name');
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${rows[0]!.name}`;
  const second = openPostgres(url.toString(), 5);
  return { db: second, close: () => second.close() };
}

/**
 * Applies, in one transaction, every migration numbered below `id` (and records them as the runner
 * does): the database as an older release left it, for a test of what migration `id` does to its rows.
 */
export async function migrateBefore(db: Database, id: number): Promise<void> {
  const earlier = (await loadMigrations()).filter((m) => m.id < id);
  await db.transaction(async (tx) => {
    await tx.exec(
      'CREATE TABLE mailroom_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    for (const m of earlier) {
      await tx.exec(m.sql);
      await tx.query('INSERT INTO mailroom_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
    }
  });
}

/**
 * The same database handle with some of its methods replaced (a failing transaction, a query that is
 * counted or answered without being sent); every other method is the original's, bound to it.
 */
export function withMethods(db: Database, replaced: Partial<Database>): Database {
  return new Proxy(db, {
    get(target, property) {
      if (Object.hasOwn(replaced, property)) return replaced[property as keyof Database];
      const value = Reflect.get(target, property) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
