// Backups of the embedded database: taken by the running server (its admin socket) or, with none
// running, by this process; restored only into a stopped data directory.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { BackupError, checkBackupTarget, restoreBackup, writeBackup } from '../../platform/db/embedded-backup.ts';
import type { Command } from '../command.ts';

const POSTGRES_REFUSAL =
  'on PostgreSQL (DATABASE_URL) back up with pg_dump, or pg_basebackup with WAL archiving (docs/operations.md, "Backups")';

const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

export const backupCommands: Record<string, Command> = {
  backup: {
    usage: 'backup <file> [--force]',
    description: 'write a consistent copy of the embedded database to a file, while the server runs too',
    positionals: [{ name: '<file>', help: 'the backup file to write (a gzipped tarball)', path: true }],
    options: {
      force: { type: 'boolean', default: false, help: 'replace the file if it exists' },
    },
    async run({ config, values, positionals, withDatabase }) {
      if (config.databaseUrl)
        throw new BackupError(`mailroom backup copies the embedded database only; ${POSTGRES_REFUSAL}`);
      const started = Date.now();
      const file = positionals[0]!;
      // Checked here first, so a mistake is told without opening the database.
      await checkBackupTarget(file, { force: values.force === true });
      // A data directory with no database (MAILROOM_DATA_DIR set wrong) would be made afresh and backed up
      // empty: refused instead.
      if (!existsSync(path.join(config.dataDir, 'pgdata')))
        throw new BackupError(
          `no embedded database in ${path.resolve(config.dataDir)} (MAILROOM_DATA_DIR): nothing to back up`,
        );
      const bytes = await withDatabase((db) => writeBackup(db, file, { force: values.force === true }));
      const ms = Date.now() - started;
      return {
        json: { file, bytes, ms },
        text: `backed up the embedded database to ${file} (${megabytes(bytes)} in ${(ms / 1000).toFixed(1)} s)`,
      };
    },
  },

  restore: {
    usage: 'restore <file> [--force]',
    description: 'restore a backup into the data directory (MAILROOM_DATA_DIR) while no server runs on it',
    positionals: [{ name: '<file>', help: 'a file written by mailroom backup', path: true }],
    options: {
      force: {
        type: 'boolean',
        default: false,
        help: 'restore over a data directory that has files: it is moved aside (renamed), not deleted',
      },
    },
    local: true,
    async run({ config, values, positionals }) {
      if (config.databaseUrl)
        throw new BackupError(`mailroom restore restores the embedded database only; ${POSTGRES_REFUSAL}`);
      const started = Date.now();
      const file = positionals[0]!;
      const { bytes, movedAside } = await restoreBackup(config.dataDir, file, { force: values.force === true });
      const ms = Date.now() - started;
      const aside = movedAside ? `; the previous directory is ${movedAside}` : '';
      return {
        json: { file, data_dir: config.dataDir, bytes, moved_aside: movedAside ?? null, ms },
        text: `restored ${file} (${megabytes(bytes)}) into ${config.dataDir} in ${(ms / 1000).toFixed(1)} s${aside}`,
      };
    },
  },
};
