import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './server-process.ts';

// A real rspamd (Debian's package, installed by .ci/run) for the tests that scan received mail: started
// in the foreground on a loopback port, with its configuration, database and run directories in a
// temporary directory of its own. The configuration is the package's rules (common.conf) with the
// modules that need the network or Redis switched off and DNS pointed at a closed port, so that scores
// do not depend on the machine's network. A tiny public-suffix list keeps the start under a second
// (compiling the full one takes rspamd several seconds).

export const RSPAMD = process.env.MAILROOM_TEST_RSPAMD || '/usr/bin/rspamd';

/** Modules that ask DNS, remote maps or servers: their verdicts would change with the network. */
const NETWORK_MODULES = ['hfilter', 'rbl', 'asn', 'spf', 'dkim', 'dmarc', 'arc', 'fuzzy_check', 'phishing', 'mx_check'];

export interface Rspamd {
  /** Base URL of the normal worker (MAILROOM_RSPAMD_URL). */
  url: string;
  /** Stops (SIGSTOP) or resumes (SIGCONT) every rspamd process: a filter that takes mail but never answers. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

export async function startRspamd(): Promise<Rspamd> {
  if (!existsSync(RSPAMD)) {
    throw new Error(`No rspamd at ${RSPAMD}: install it (apt-get install rspamd) or set MAILROOM_TEST_RSPAMD`);
  }
  const dir = await mkdtemp(join(tmpdir(), 'mailroom-rspamd-'));
  const port = await freePort();
  for (const sub of ['db', 'run', 'log', 'local/local.d']) await mkdir(join(dir, sub), { recursive: true });
  for (const module of NETWORK_MODULES) {
    await writeFile(join(dir, 'local/local.d', `${module}.conf`), 'enabled = false;\n');
  }
  await writeFile(join(dir, 'tld.dat'), 'com\nnet\norg\ntest\n');
  await writeFile(
    join(dir, 'rspamd.conf'),
    `.include "$CONFDIR/common.conf"
options {
  pidfile = "$RUNDIR/rspamd.pid";
  filters = "regexp";
  disable_hyperscan = true;
  url_tld = "${join(dir, 'tld.dat')}";
  allow_raw_input = true;
  dns { nameserver = ["127.0.0.1:1"]; timeout = 0.1s; retransmits = 0; }
}
logging { type = "console"; level = "error"; }
worker "normal" {
  bind_socket = "127.0.0.1:${port}";
  mime = true;
  count = 1;
}
`,
  );
  // As root (CI containers), rspamd wants to be told which user its workers run as.
  const user = process.getuid?.() === 0 ? ['-u', 'root', '-g', 'root'] : [];
  const vars = ['DBDIR=db', 'RUNDIR=run', 'LOGDIR=log', 'LOCAL_CONFDIR=local'].flatMap((v) => {
    const [name, sub] = v.split('=') as [string, string];
    return ['--var', `${name}=${join(dir, sub)}`];
  });
  // Its own process group, so that pausing and stopping reach its workers too, and only them.
  const child: ChildProcess = spawn(RSPAMD, ['-f', ...user, '-c', join(dir, 'rspamd.conf'), ...vars], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const signal = (name: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, name);
  };
  const stop = async () => {
    signal('SIGCONT');
    signal('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true });
  };

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const pong = await fetch(`${url}/ping`).then(
      (answer) => answer.ok,
      () => false,
    );
    if (pong) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      signal('SIGKILL');
      await rm(dir, { recursive: true, force: true });
      throw new Error(`rspamd did not start:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { url, pause: () => signal('SIGSTOP'), resume: () => signal('SIGCONT'), stop };
}
