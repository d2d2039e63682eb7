import { execFile } from 'node:child_process';
import { chown, mkdtemp, readdir, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './server-process.ts';

// A PostgreSQL server of the test's own, in a temporary directory on a free loopback port, that the
// test may stop and start at will: outages are rehearsed on it, never on the shared server. It uses
// the binaries of the newest PostgreSQL under /usr/lib/postgresql. initdb refuses to run as root, so
// as root every command runs as the `postgres` user, who owns the directory.

const run = promisify(execFile);
const PG_ROOT = '/usr/lib/postgresql';

export interface PrivatePostgres {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  url: string;
  /** Stops the server (fast shutdown: sessions are ended) and returns once nothing listens. */
  stop(): Promise<void>;
  /** Starts it again on the same port and returns once it accepts connections. */
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  destroy(): Promise<void>;
}

/** The bin directory of the newest PostgreSQL installed. */
export async function binDir(): Promise<string> {
  const versions = existsSync(PG_ROOT) ? await readdir(PG_ROOT) : [];
  const usable = versions
    .filter((version) => existsSync(path.join(PG_ROOT, version, 'bin', 'initdb')))
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  if (usable.length === 0) throw new Error(`no PostgreSQL with initdb under ${PG_ROOT}`);
  return path.join(PG_ROOT, usable[0]!, 'bin');
}

export async function postgresUser(): Promise<{ uid: number; gid: number }> {
  const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = await binDir();
  const asRoot = process.getuid?.() === 0;
  const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-pg-'));
  if (asRoot) {
    const { uid, gid } = await postgresUser();
    await chown(dir, uid, gid);
  }
  const pg = (command: string, args: string[]) => {
    const file = path.join(bin, command);
    return asRoot ? run('runuser', ['-u', 'postgres', '--', file, ...args]) : run(file, args);
  };
  const data = path.join(dir, 'data');
  const port = await freePort();
  await pg('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-locale', '--no-sync']);
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off`;
  const start = async () => {
    await pg('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-o', options, '-w', '-t', '30', 'start']);
  };
  const stop = async () => {
    await pg('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '30', 'stop']);
  };
  await start();
  let destroyed = false;
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop,
    start,
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      await stop().catch(() => {}); // already stopped
      await rm(dir, { recursive: true, force: true });
    },
  };
}
