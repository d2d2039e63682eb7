// Migrations and the releases they let share a database. Each migration declares its phase on its first
// line: `-- expand: …` (safe while processes of the previous release still run: it adds, backfills,
// loosens) or `-- contract: …` (it removes or narrows what older code reads or writes). A start applies
// the pending expand migrations only; contract ones wait for `mailroom migrate --contract`, run once no
// process of an older release is left. A release serves a database only while every contract migration
// applied to it is one the release knows: an older process meeting a newer contract stops, in one line.
import { readdir, readFile } from 'node:fs/promises';
import { isConnectionLost, type Database, type Queryable } from './database.ts';

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
// Any fixed number: every Mailroom process that migrates takes this advisory lock, so two processes
// starting at once apply each migration exactly once, one after the other.
const MIGRATION_LOCK = 4_170_385_221;
/** Notified after contract migrations are applied: running processes check at once that they still serve it. */
export const SCHEMA_CHANNEL = 'mailroom_schema';

export type MigrationPhase = 'expand' | 'contract';

export interface Migration {
  id: number;
  name: string;
  phase: MigrationPhase;
  sql: string;
}

/** A migration that is malformed or could not be applied; its message is one line the operator can act on. */
export class MigrationError extends Error {
  override name = 'MigrationError';
}

/** The database has contract migrations this release does not know: its code may no longer fit the schema. */
export class SchemaTooNewError extends Error {
  override name = 'SchemaTooNewError';
}

const label = (m: { id: number; name: string }) => `${String(m.id).padStart(4, '0')}_${m.name}`;

/** One migration file read: its number and name from the file name, its phase from its first line. */
export function parseMigration(file: string, sql: string): Migration {
  const match = /^(\d+)_([\w-]+)\.sql$/.exec(file);
  if (!match) throw new MigrationError(`migration file name must be NNNN_name.sql: ${file}`);
  const phase = /^-- (expand|contract):/.exec(sql)?.[1] as MigrationPhase | undefined;
  if (!phase) {
    const first = sql.split('\n', 1)[0]!.slice(0, 60);
    throw new MigrationError(
      `migration ${file} must declare its phase on its first line, "-- expand: <what it does>" or ` +
        `"-- contract: <what it does>"; it starts with "${first}"`,
    );
  }
  return { id: Number(match[1]), name: match[2]!, phase, sql };
}

export async function loadMigrations(): Promise<Migration[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((file) => file.endsWith('.sql')).sort();
  return Promise.all(
    files.map(async (file) => parseMigration(file, await readFile(new URL(file, MIGRATIONS_DIR), 'utf8'))),
  );
}

export interface MigrateOptions {
  /**
   * Apply the contract migrations too. Always so on a database with no migration applied yet, and on the
   * embedded database (one process at a time: no older process can be running beside this one).
   */
  contract?: boolean;
  /** How long one statement of a migration waits for a lock before the migration is tried again. */
  lockTimeout?: string;
  /** Tries of one migration that give up waiting for locks (or deadlock) before the run fails. */
  attempts?: number;
  /** Wait before the second try; doubled before each later one, up to 30 s. */
  backoffMs?: number;
  /** One line per retry and per contract migration left pending. */
  log?: (line: string) => void;
}

export interface MigrateResult {
  /** The migrations applied by this run, as NNNN_name. */
  applied: string[];
  /** Contract migrations not applied yet (they wait for `mailroom migrate --contract`). */
  pendingContract: string[];
}

// SQLSTATEs of a migration that lost a race with live traffic and may succeed when tried again:
// lock_not_available (its lock_timeout), deadlock_detected, serialization_failure.
const RETRIED_STATES: Record<string, string> = {
  '55P03': 'a lock was not granted in time',
  '40P01': 'deadlock with another transaction',
  '40001': 'serialization failure',
};

// The advisory lock is waited for without limit: another process may be running a migration that
// rewrites a large table for minutes. Statements of a migration have no time limit either (a backfill),
// but each waits for its locks at most `lockTimeout`: a migration queued behind a long transaction would
// otherwise hold up every query of live traffic queued behind it.
const UNBOUNDED = { statement_timeout: '0', lock_timeout: '0' };

const defaultLog = (line: string) => process.stderr.write(`mailroom: ${line}\n`);

/** The migrations table, created or brought up to date (the phase column came with rolling upgrades). */
async function prepareMigrationsTable(db: Database, known: Migration[]): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS mailroom_migrations (
      id integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await tx.query(
      `SELECT 1 FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'mailroom_migrations' AND column_name = 'phase'`,
    );
    if (rows.length > 0) return;
    // Releases before this column insert (id, name) only: their rows, and this release's, read expand
    // unless this release knows them to be contract.
    await tx.exec("ALTER TABLE mailroom_migrations ADD COLUMN phase text NOT NULL DEFAULT 'expand'");
    const contract = known.filter((m) => m.phase === 'contract').map((m) => m.id);
    await tx.query("UPDATE mailroom_migrations SET phase = 'contract' WHERE id = ANY($1::int[])", [contract]);
  }, UNBOUNDED);
}

/**
 * Throws SchemaTooNewError when a contract migration this release does not know has been applied: a
 * later release has removed or changed something this code may read or write.
 */
export async function checkSchemaServed(db: Queryable, known: Migration[]): Promise<void> {
  const { rows } = await db.query<{ id: number; name: string }>(
    "SELECT id, name FROM mailroom_migrations WHERE phase = 'contract' AND NOT (id = ANY($1::int[])) ORDER BY id",
    [known.map((m) => m.id)],
  );
  if (rows.length === 0) return;
  const newest = known.length ? label(known[known.length - 1]!) : 'none';
  throw new SchemaTooNewError(
    `the database has been migrated past what this release can serve: contract migration ` +
      `${rows.map(label).join(', ')} is applied, and this release knows migrations up to ${newest}; ` +
      'upgrade to the release that applied it (or a later one)',
  );
}

/**
 * Refuses a schema this release cannot serve (SchemaTooNewError), then applies pending migrations in
 * order, each in its own transaction: the expand ones, and the contract ones too when `options.contract`
 * (or on a fresh or embedded database). A migration that loses a race for locks with live traffic is
 * rolled back and tried again after a pause; any failure is a MigrationError naming the migration.
 */
export async function migrate(db: Database, options: MigrateOptions = {}): Promise<MigrateResult> {
  const log = options.log ?? defaultLog;
  const attempts = options.attempts ?? 8;
  const lockTimeout = options.lockTimeout ?? '5s';
  if (!/^\d+(ms|s)?$/.test(lockTimeout)) throw new MigrationError(`invalid lock timeout ${lockTimeout}`);
  const known = await loadMigrations();
  const done = new Set<number>();
  try {
    await prepareMigrationsTable(db, known);
    await checkSchemaServed(db, known);
    for (const row of (await db.query<{ id: number }>('SELECT id FROM mailroom_migrations')).rows) done.add(row.id);
  } catch (error) {
    if (isConnectionLost(error) || error instanceof SchemaTooNewError) throw error;
    // A role without the right to create the table, say: one line, not a stack trace.
    throw new MigrationError(`cannot read the applied migrations: ${(error as Error).message.split('\n', 1)[0]}`);
  }
  const contract = options.contract === true || db.kind === 'pglite' || done.size === 0;
  const applied: string[] = [];
  const pendingContract: string[] = [];
  for (const migration of known) {
    if (done.has(migration.id)) continue;
    if (migration.phase === 'contract' && !contract) {
      pendingContract.push(label(migration));
      continue;
    }
    if (await applyWithRetries(db, migration, { attempts, lockTimeout, log, backoffMs: options.backoffMs ?? 1000 })) {
      applied.push(label(migration));
    }
  }
  if (pendingContract.length > 0) {
    log(
      `contract migration(s) ${pendingContract.join(', ')} not applied: run "mailroom migrate --contract" ` +
        'once no process of an older release uses the database',
    );
  }
  // Processes of older releases that know this notification check at once whether they still serve it.
  if (applied.length > 0 && known.some((m) => m.phase === 'contract' && applied.includes(label(m)))) {
    await db.query(`NOTIFY ${SCHEMA_CHANNEL}`).catch(() => {});
  }
  return { applied, pendingContract };
}

async function applyWithRetries(
  db: Database,
  migration: Migration,
  options: { attempts: number; lockTimeout: string; backoffMs: number; log: (line: string) => void },
): Promise<boolean> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await applyOnce(db, migration, options.lockTimeout);
    } catch (error) {
      if (isConnectionLost(error)) throw error;
      const code = (error as { code?: string }).code ?? '';
      const reason = RETRIED_STATES[code];
      const message = (error as Error).message.split('\n', 1)[0];
      if (!reason) throw new MigrationError(`migration ${label(migration)} failed: ${message}`);
      if (attempt >= options.attempts) {
        throw new MigrationError(
          `migration ${label(migration)} failed ${attempt} times, the last with ${reason} (${message}); ` +
            'nothing of it is applied: run "mailroom migrate" again when the database is less busy',
        );
      }
      const waitMs = Math.min(options.backoffMs * 2 ** (attempt - 1), 30_000);
      options.log(
        `migration ${label(migration)}: ${reason}, rolled back; trying again in ${waitMs} ms ` +
          `(try ${attempt + 1} of ${options.attempts})`,
      );
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

/** Applies one migration in one transaction, unless another process has applied it meanwhile. */
async function applyOnce(db: Database, migration: Migration, lockTimeout: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    const done = await tx.query('SELECT 1 FROM mailroom_migrations WHERE id = $1', [migration.id]);
    if (done.rowCount > 0) return false;
    await tx.exec(`SET LOCAL lock_timeout = '${lockTimeout}'`);
    await tx.exec(migration.sql);
    await tx.query('INSERT INTO mailroom_migrations (id, name, phase) VALUES ($1, $2, $3)', [
      migration.id,
      migration.name,
      migration.phase,
    ]);
    return true;
  }, UNBOUNDED);
}
