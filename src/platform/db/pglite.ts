import { mkdir, open, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import {
  channelsToNotify,
  coalescingNotifier,
  setLocalStatements,
  type Database,
  type QueryResult,
} from './database.ts';

// PGlite is one Postgres backend in this process. It queues queries itself, and its transaction() holds
// that queue until commit or rollback, so the seam maps onto it directly.
function wrap(db: PGlite, onClose: () => Promise<void>): Database {
  const run = async <Row>(
    target: Pick<PGlite, 'query'>,
    text: string,
    params?: readonly unknown[],
  ): Promise<QueryResult<Row>> => {
    const result = await target.query<Row>(text, params as unknown[] | undefined);
    // As node-postgres counts: rows returned, else rows changed (PGlite reports 0 changed for a SELECT).
    return { rows: result.rows, rowCount: result.rows.length || (result.affectedRows ?? 0) };
  };
  const notify = coalescingNotifier((channel) => db.query('SELECT pg_notify($1, $2)', [channel, '']));
  return {
    kind: 'pglite',
    async query<Row>(text: string, params?: readonly unknown[]) {
      const result = await run<Row>(db, text, params);
      for (const channel of channelsToNotify(text)) notify(channel);
      return result;
    },
    async transaction(fn, settings) {
      const channels = new Set<string>();
      const result = await db.transaction(async (tx) => {
        if (settings) await tx.exec(setLocalStatements(settings));
        return fn({
          query: async <Row>(text: string, params?: readonly unknown[]) => {
            const result = await run<Row>(tx, text, params);
            for (const channel of channelsToNotify(text)) channels.add(channel);
            return result;
          },
          exec: async (script) => {
            await tx.exec(script);
          },
        });
      });
      for (const channel of channels) notify(channel); // committed: db.transaction threw otherwise
      return result;
    },
    async listen(channel, onNotify) {
      return db.listen(channel, () => onNotify());
    },
    poolStats: () => undefined,
    async dumpDataDir() {
      // The checkpoint puts committed changes into the data files; the dump then waits for the transaction
      // lock (which plain queries take too), so no transaction is half done in the copy. What commits
      // between the two is in the write-ahead log copied with the files.
      await db.exec('CHECKPOINT');
      const dump = await db._runExclusiveTransaction(() => db.dumpDataDir('gzip'));
      return new Uint8Array(await dump.arrayBuffer());
    },
    async close() {
      await db.close();
      await onClose();
    },
  };
}

/** An in-memory PGlite database: tests, and nothing else. */
export async function openPGliteInMemory(): Promise<Database> {
  return wrap(await PGlite.create(), async () => {});
}

export class DataDirInUseError extends Error {
  constructor(dataDir: string, pid: number) {
    super(
      `The embedded database in ${dataDir} is in use by process ${pid}. PGlite can be opened by one process ` +
        'at a time. A running "mailroom serve" takes the other CLI commands through its admin socket (admin.sock ' +
        'in the data directory), but not serve or migrate, nor a process that is not a server: stop that process ' +
        'first, or run Mailroom on PostgreSQL (DATABASE_URL).',
    );
    this.name = 'DataDirInUseError';
  }
}

/**
 * Opens the PGlite database under dataDir, holding a lock file so that a second process (a CLI command
 * while the server runs) is told plainly instead of corrupting the files. A lock left by a dead
 * process is taken over.
 */
export async function openPGliteDirectory(dataDir: string): Promise<Database> {
  const dir = path.resolve(dataDir);
  await mkdir(dir, { recursive: true });
  const lockPath = path.join(dir, 'mailroom.lock');
  await acquireLock(lockPath, dir);
  try {
    const db = await PGlite.create(path.join(dir, 'pgdata'));
    return wrap(db, () => rm(lockPath, { force: true }));
  } catch (error) {
    await rm(lockPath, { force: true });
    throw error;
  }
}

/** The live process holding the lock of the embedded database under dataDir, if any. */
export async function dataDirHolder(dataDir: string): Promise<number | undefined> {
  const lockPath = path.join(path.resolve(dataDir), 'mailroom.lock');
  const holder = Number.parseInt(await readFile(lockPath, 'utf8').catch(() => ''), 10);
  return Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder) ? holder : undefined;
}

async function acquireLock(lockPath: string, dir: string): Promise<void> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(lockPath, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number.parseInt(await readFile(lockPath, 'utf8').catch(() => ''), 10);
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) {
        throw new DataDirInUseError(dir, holder);
      }
      await rm(lockPath, { force: true }); // stale: its process is gone
    }
  }
  throw new Error(`Could not take the lock ${lockPath}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
