// Backups of the embedded database (PGlite): a gzipped tarball of its files, taken by the process that
// has it open, and its restore into a stopped data directory. Restoring checks the copy opens as a
// Mailroom database before it takes the directory's place, so a failed restore leaves the target as it was.
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { Database } from './database.ts';
import { dataDirHolder } from './pglite.ts';

/** A backup or restore refused or failed, with the reason in one line. */
export class BackupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackupError';
  }
}

function fileProblem(error: unknown, file: string): BackupError {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') return new BackupError(`cannot write ${file}: permission denied`);
  if (code === 'ENOSPC') return new BackupError(`cannot write ${file}: no space left on the device`);
  return new BackupError(`cannot write ${file}: ${(error as Error).message}`);
}

/** Where a backup may be written: `file` resolved, refused when its directory is missing or it exists. */
export async function checkBackupTarget(file: string, options: { force: boolean }): Promise<string> {
  const target = path.resolve(file);
  const dir = path.dirname(target);
  const dirStat = await stat(dir).catch(() => undefined);
  if (!dirStat?.isDirectory()) throw new BackupError(`cannot write ${target}: directory ${dir} does not exist`);
  const existing = await stat(target).catch(() => undefined);
  if (existing?.isDirectory()) throw new BackupError(`cannot write ${target}: it is a directory`);
  if (existing && !options.force) throw new BackupError(`${target} exists (--force replaces it)`);
  return target;
}

/** Writes the database's backup to `file` (a temporary file renamed into place): its size in bytes. */
export async function writeBackup(db: Database, file: string, options: { force: boolean }): Promise<number> {
  if (!db.dumpDataDir) {
    throw new BackupError(
      'mailroom backup copies the embedded database only; on PostgreSQL (DATABASE_URL) use pg_dump, or ' +
        'pg_basebackup with WAL archiving (docs/operations.md, "Backups")',
    );
  }
  const target = await checkBackupTarget(file, options);
  const dir = path.dirname(target);
  const temporary = path.join(dir, `.${path.basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
  // Fails early on a directory that cannot be written, before the database is held for the dump.
  await writeFile(temporary, '', { flag: 'wx', mode: 0o600 }).catch((error: unknown) => {
    throw fileProblem(error, target);
  });
  try {
    const dump = await db.dumpDataDir();
    await writeFile(temporary, dump);
    await rename(temporary, target);
    return dump.byteLength;
  } catch (error) {
    await rm(temporary, { force: true });
    throw error instanceof BackupError ? error : fileProblem(error, target);
  }
}

/**
 * Restores `file` into `dataDir`, which no process may hold. A directory with files in it is refused
 * unless `force`, and then moved aside (its new name is returned), never deleted.
 */
export async function restoreBackup(
  dataDir: string,
  file: string,
  options: { force: boolean },
): Promise<{ bytes: number; movedAside?: string }> {
  const target = path.resolve(dataDir);
  const source = path.resolve(file);
  const holder = await dataDirHolder(target);
  if (holder !== undefined) {
    throw new BackupError(`${target} is in use by process ${holder}: stop the server before restoring into it`);
  }
  const bytes = await readFile(source).catch((error: NodeJS.ErrnoException) => {
    throw new BackupError(
      error.code === 'ENOENT' ? `${source} does not exist` : `cannot read ${source}: ${error.message}`,
    );
  });
  const entries = await readdir(target).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw new BackupError(`cannot read ${target}: ${error.message}`);
  });
  if (entries.length > 0 && !options.force) {
    throw new BackupError(`${target} is not empty (--force moves it aside and restores in its place)`);
  }
  // Unpacked beside the target, on the same file system, so that moving it into place is a rename.
  const staging = `${target}.restoring-${randomBytes(6).toString('hex')}`;
  try {
    await mkdir(staging, { recursive: true });
    await checkBackup(bytes, path.join(staging, 'pgdata'), source);
    let movedAside: string | undefined;
    if (entries.length > 0) {
      if ((await dataDirHolder(target)) !== undefined) throw new BackupError(`${target} came into use: not restored`);
      movedAside = `${target}.before-restore-${new Date().toISOString().replace(/[:.]/g, '-')}`;
      await rename(target, movedAside);
    } else {
      // rmdir, not rm: a server that started on the directory while the backup was checked has put files
      // in it, and they are not deleted.
      await rmdir(target).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOTEMPTY' || error.code === 'EEXIST') {
          throw new BackupError(`${target} came into use: not restored`);
        }
        if (error.code !== 'ENOENT') throw new BackupError(`cannot replace ${target}: ${error.message}`);
      });
    }
    await rename(staging, target);
    return { bytes: bytes.byteLength, movedAside };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Unpacks the backup into `pgdata` and checks it opens with Mailroom's migrations table. */
async function checkBackup(bytes: Buffer, pgdata: string, source: string): Promise<void> {
  const notBackup = new BackupError(`${source} is not a Mailroom backup (made by "mailroom backup")`);
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) throw notBackup; // gzip's magic number
  let db: PGlite | undefined;
  try {
    db = await PGlite.create(pgdata, { loadDataDir: new Blob([bytes]) });
    await db.query('SELECT id FROM mailroom_migrations LIMIT 1');
  } catch {
    throw notBackup;
  } finally {
    await db?.close().catch(() => {});
  }
}
