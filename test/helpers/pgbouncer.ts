import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './server-process.ts';

// Debian's PgBouncer (1.18: no prepared statements across transactions) in transaction pooling mode, in
// front of one PostgreSQL database, on a loopback port of its own.

export interface PgBouncer {
  /** The database through PgBouncer (any user name: PgBouncer logs in as the database's own user). */
  url: string;
  output(): string;
  close(): Promise<void>;
}

function pgbouncerBinary(): string {
  try {
    return execFileSync('bash', ['-c', 'command -v pgbouncer || ls /usr/sbin/pgbouncer'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('pgbouncer is not installed: apt-get install pgbouncer (.ci/run installs it)');
  }
}

/** PgBouncer in front of the PostgreSQL database `databaseUrl` names; at most `serverConnections` to it. */
export async function startPgBouncer(databaseUrl: string, serverConnections = 3): Promise<PgBouncer> {
  const target = new URL(databaseUrl);
  const database = decodeURIComponent(target.pathname.slice(1));
  const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-pgbouncer-'));
  await chmod(dir, 0o755);
  const port = await freePort();
  const server = [
    `host=${target.hostname}`,
    `port=${target.port || '5432'}`,
    `dbname=${database}`,
    `user=${decodeURIComponent(target.username || 'postgres')}`,
    ...(target.password ? [`password=${decodeURIComponent(target.password)}`] : []),
  ].join(' ');
  const ini = [
    '[databases]',
    `${database} = ${server}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    // The test's clients are trusted; PgBouncer logs in to PostgreSQL as the database line says.
    'auth_type = any',
    'pool_mode = transaction',
    `default_pool_size = ${serverConnections}`,
    'max_client_conn = 200',
    // PgBouncer refuses to run as root (CI runs as root): it switches to this user once started.
    ...(process.getuid?.() === 0 ? ['user = nobody'] : []),
  ].join('\n');
  const iniPath = path.join(dir, 'pgbouncer.ini');
  await writeFile(iniPath, `${ini}\n`, { mode: 0o644 });
  const child: ChildProcess = spawn(pgbouncerBinary(), [iniPath], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const deadline = Date.now() + 10_000;
  while (!output.includes('process up')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
      throw new Error(`pgbouncer did not start:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return {
    url: `postgres://mailroom@127.0.0.1:${port}/${database}`,
    output: () => output,
    async close() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
