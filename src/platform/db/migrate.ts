import { readdir, readFile } from 'node:fs/promises';
import type { Database } from './database.ts';

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
// Any fixed number: every Mailroom process that migrates takes this advisory lock, so two processes
// starting at once apply each migration exactly once, one after the other.
const MIGRATION_LOCK = 4_170_385_221;

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export async function loadMigrations(): Promise<Migration[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((file) => file.endsWith('.sql')).sort();
  return Promise.all(
    files.map(async (file) => {
      const match = /^(\d+)_([\w-]+)\.sql$/.exec(file);
      if (!match) throw new Error(`Migration file name must be NNNN_name.sql: ${file}`);
      return { id: Number(match[1]), name: match[2]!, sql: await readFile(new URL(file, MIGRATIONS_DIR), 'utf8') };
    }),
  );
}

// A migration may rewrite a large table for minutes, and a process starting meanwhile waits for the
// advisory lock as long: neither is bound by the statement and lock timeouts of ordinary work.
const UNBOUNDED = { statement_timeout: '0', lock_timeout: '0' };

/** Applies pending migrations, each in its own transaction. Returns the names it applied. */
export async function migrate(db: Database): Promise<string[]> {
  const applied: string[] = [];
  for (const migration of await loadMigrations()) {
    const ran = await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await tx.exec(`CREATE TABLE IF NOT EXISTS mailroom_migrations (
        id integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
      const done = await tx.query('SELECT 1 FROM mailroom_migrations WHERE id = $1', [migration.id]);
      if (done.rowCount > 0) return false;
      await tx.exec(migration.sql);
      await tx.query('INSERT INTO mailroom_migrations (id, name) VALUES ($1, $2)', [migration.id, migration.name]);
      return true;
    }, UNBOUNDED);
    if (ran) applied.push(`${String(migration.id).padStart(4, '0')}_${migration.name}`);
  }
  return applied;
}
