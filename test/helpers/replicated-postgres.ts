import { execFile } from 'node:child_process';
import { appendFile, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { binDir, postgresUser } from './private-postgres.ts';
import { freePort } from './server-process.ts';
import { waitFor } from './wait.ts';

// A primary PostgreSQL server of the test's own and a streaming standby of it (pg_basebackup -R), on
// free loopback ports in a temporary directory, never the shared server. With `synchronous`, the
// primary's commits wait for the standby to have the WAL on disk (synchronous_standby_names = '*'), so
// a commit acknowledged is on the standby too. As root, every command runs as the `postgres` user.

const run = promisify(execFile);

export interface ReplicatedServer {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  url: string;
}

export interface ReplicatedPostgres {
  primary: ReplicatedServer;
  standby: ReplicatedServer;
  /** Both hosts, primary first, in one libpq URL with this target_session_attrs. */
  url(targetSessionAttrs: string): string;
  /** Stops the primary at once (pg_ctl -m immediate: as a crash, nothing flushed or said to clients). */
  crashPrimary(): Promise<void>;
  /** Stops the standby (fast shutdown): a synchronous primary's commits then wait for it. */
  stopStandby(): Promise<void>;
  /** Promotes the standby to a primary and returns once it takes writes. */
  promoteStandby(): Promise<void>;
  /** Stops both and removes their directories. */
  destroy(): Promise<void>;
}

/**
 * `synchronous`: commits wait for the standby. `durable`: fsync on (each commit flushed to disk, as in
 * production), for a benchmark; off by default, since a test machine does not crash.
 */
export async function startReplicatedPostgres(options: {
  synchronous: boolean;
  durable?: boolean;
}): Promise<ReplicatedPostgres> {
  const bin = await binDir();
  const asRoot = process.getuid?.() === 0;
  const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-pg-replicated-'));
  if (asRoot) {
    const { uid, gid } = await postgresUser();
    await chown(dir, uid, gid);
  }
  const pgRun = (command: string, args: string[]) => {
    const file = path.join(bin, command);
    return asRoot ? run('runuser', ['-u', 'postgres', '--', file, ...args]) : run(file, args);
  };
  const primaryData = path.join(dir, 'primary');
  const standbyData = path.join(dir, 'standby');
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const start = (data: string, port: number, log: string) =>
    pgRun('pg_ctl', [
      '-D',
      data,
      '-l',
      path.join(dir, log),
      '-o',
      `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir}`,
      '-w',
      '-t',
      '30',
      'start',
    ]);
  const running = new Set<string>();

  // initdb's pg_hba.conf trusts loopback for replication connections too.
  await pgRun('initdb', ['-D', primaryData, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-locale', '--no-sync']);
  // fsync off or not, the standby gets every commit's WAL over the wire (the standby copies this file).
  await appendFile(
    path.join(primaryData, 'postgresql.conf'),
    `\nwal_level = replica\nmax_wal_senders = 4\nfsync = ${options.durable ? 'on' : 'off'}\n` +
      (options.synchronous ? `synchronous_standby_names = '*'\n` : ''),
  );
  await start(primaryData, primaryPort, 'primary.log');
  running.add(primaryData);
  const destroy = async () => {
    for (const data of running) await pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
    running.clear();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await pgRun('pg_basebackup', [
      '-D',
      standbyData,
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-R',
      '-X',
      'stream',
      '-c',
      'fast',
      '--no-sync',
    ]);
    // Once promoted, the standby is a primary without a standby of its own: it must not wait for one.
    await appendFile(path.join(standbyData, 'postgresql.conf'), `\nsynchronous_standby_names = ''\n`);
    await start(standbyData, standbyPort, 'standby.log');
    running.add(standbyData);
    const url = (port: number) => `postgres://postgres@127.0.0.1:${port}/postgres`;
    // Streaming (and, when synchronous, counted as the synchronous standby) before anything is written.
    const admin = new pg.Client({ connectionString: url(primaryPort) });
    await admin.connect();
    try {
      await waitFor(
        async () =>
          (
            await admin.query(
              `SELECT count(*)::int AS n FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1`,
              [options.synchronous ? 'sync' : 'async'],
            )
          ).rows[0].n === 1,
        30_000,
        100,
      );
    } finally {
      await admin.end();
    }
    return {
      primary: { port: primaryPort, url: url(primaryPort) },
      standby: { port: standbyPort, url: url(standbyPort) },
      url: (attrs) =>
        `postgres://postgres@127.0.0.1:${primaryPort},127.0.0.1:${standbyPort}/postgres?target_session_attrs=${attrs}`,
      async crashPrimary() {
        await pgRun('pg_ctl', ['-D', primaryData, '-m', 'immediate', '-w', 'stop']);
        running.delete(primaryData);
      },
      async stopStandby() {
        await pgRun('pg_ctl', ['-D', standbyData, '-m', 'fast', '-w', 'stop']);
        running.delete(standbyData);
      },
      async promoteStandby() {
        await pgRun('pg_ctl', ['-D', standbyData, '-w', '-t', '30', 'promote']);
      },
      destroy,
    };
  } catch (error) {
    await destroy();
    throw error;
  }
}
