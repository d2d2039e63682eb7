// A throw-away Postfix for the benchmarks that race Mailroom against it (delivery-vs-postfix.ts,
// scheduling.ts, shaping.ts, receiving.ts): installed from Debian when missing, run from a temporary
// directory, relaying everything to a loopback sink (or given domains to given servers, or taking one
// address's mail into a Maildir), and gone when the benchmark ends. Runs as root.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../test/helpers/server-process.ts';
import type { Teardown } from './teardown.ts';

export const SBIN = '/usr/sbin';
const POSTFIX = `${SBIN}/postfix`;
const SMTP_SINK = `${SBIN}/smtp-sink`;
const SMTP_SOURCE = `${SBIN}/smtp-source`;
/** The uid and gid of nobody (Debian's), as whom the virtual delivery agent writes the mailbox. */
const NOBODY = 65534;

/** Whether something accepts TCP connections on 127.0.0.1:port. */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Installs Debian's postfix package (it ships postfix, smtp-sink and smtp-source) when a program is missing.
 * "No configuration" leaves /etc/postfix/main.cf absent, so the system instance is not set up; should a
 * port-25 listener appear all the same (a host whose package scripts start services), it is stopped and
 * disabled, so the benchmark never leaves a system Postfix listening.
 */
export async function ensurePostfix() {
  if ([POSTFIX, SMTP_SINK, SMTP_SOURCE].every((file) => existsSync(file))) return;
  if (process.getuid?.() !== 0) throw new Error('Postfix is not installed and installing it needs root');
  console.log('installing Debian package postfix (No configuration) …');
  const port25Before = await listening(25);
  execFileSync('debconf-set-selections', { input: 'postfix postfix/main_mailer_type select No configuration\n' });
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => execFileSync('apt-get', ['install', '-y', '-q', 'postfix'], { env, stdio: 'ignore' });
  try {
    install();
  } catch {
    execFileSync('apt-get', ['update', '-q'], { env, stdio: 'ignore' });
    install();
  }
  if (!port25Before && (await listening(25))) {
    try {
      execFileSync('systemctl', ['disable', '--now', 'postfix'], { stdio: 'ignore' });
    } catch {
      execFileSync(POSTFIX, ['stop'], { stdio: 'ignore' });
    }
  }
}

/** smtp-sink on a free loopback port; `-c` prints "sess=N quit=N mesg=N" after every message, and mesg is read. */
export async function startSmtpSink(teardown: Teardown) {
  const port = await freePort();
  const child = await teardown.own(
    () => spawn(SMTP_SINK, ['-c', '-u', 'postfix', `127.0.0.1:${port}`, '1000'], { stdio: ['ignore', 'pipe', 'pipe'] }),
    stopChild,
  );
  let messages = 0;
  let waiter: { count: number; resolve: () => void } | undefined;
  let tail = '';
  child.stdout!.setEncoding('latin1');
  child.stdout!.on('data', (chunk: string) => {
    tail = (tail + chunk).slice(-200);
    const counts = [...tail.matchAll(/mesg=(\d+)/g)];
    if (counts.length) messages = Number(counts.at(-1)![1]);
    if (waiter && messages >= waiter.count) waiter.resolve();
  });
  let errors = '';
  child.stderr!.on('data', (chunk) => (errors += chunk));
  const deadline = Date.now() + 10_000;
  while (!(await listening(port))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`smtp-sink did not start: ${errors}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port,
    count: () => messages,
    until: (count: number) =>
      new Promise<void>((resolve) => {
        waiter = { count, resolve };
        if (messages >= count) resolve();
      }),
  };
}

export function stopChild(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  return exited.then(() => undefined);
}

/**
 * A throw-away Postfix instance: main.cf and master.cf in DIR/etc, queue in DIR/queue, data in DIR/data,
 * log in DIR/maillog; smtpd on 127.0.0.1:port only, everything relayed to the sink, no local delivery, no
 * chroot. `routes` sends the mail of each given recipient domain to its own next hop instead (a
 * transport_maps entry, e.g. `one.test` → `smtp:[127.0.0.5]:2525`): each next hop is a destination of
 * its own to Postfix's queue manager, with its own concurrency, as each domain is when its MX is looked up. Postfix asks for a non-default config directory to be listed in the default main.cf's
 * alternate_config_directories only when the caller is not root (mail_conf_checkdir), so as root
 * `postfix -c DIR/etc start` runs it without touching /etc/postfix. With `hold`, every message it
 * accepts is put on its hold queue (an access table that answers HOLD to every client) until
 * `release()` moves them all to the deferred queue and asks for the queue to be run at once. With
 * `mailbox` (an address), Postfix is that address's final destination instead: the virtual(8) delivery
 * agent writes its mail to a Maildir (`maildir`; `delivered()` counts its new messages); `sinkPort` may
 * then be undefined (no relay host).
 */
export async function startPostfix(
  teardown: Teardown,
  sinkPort: number | undefined,
  options: { hold?: boolean; routes?: Record<string, string>; mailbox?: string } = {},
) {
  const dir = await teardown.own(
    () => mkdtemp(path.join(tmpdir(), 'mailroom-bench-postfix-')),
    (made) => rm(made, { recursive: true, force: true }),
  );
  await chmod(dir, 0o755);
  await mkdir(path.join(dir, 'etc'));
  await mkdir(path.join(dir, 'queue'), { mode: 0o755 });
  const port = await freePort();
  // The mailbox's domain is a virtual mailbox domain: its one address is delivered by the virtual(8) agent to
  // DIR/mail/<local part>/, a Maildir (made on the first delivery), as the unprivileged user nobody.
  const mailbox = options.mailbox?.split('@') as [string, string] | undefined;
  const maildir = mailbox && path.join(dir, 'mail', mailbox[0]);
  if (mailbox) {
    await mkdir(path.join(dir, 'mail'));
    await chown(path.join(dir, 'mail'), NOBODY, NOBODY);
  }
  const etc = path.join(dir, 'etc');
  await writeFile(
    path.join(etc, 'main.cf'),
    [
      'compatibility_level = 3.6',
      `config_directory = ${etc}`,
      `queue_directory = ${dir}/queue`,
      `data_directory = ${dir}/data`,
      `maillog_file = ${dir}/maillog`,
      `maillog_file_prefixes = ${dir}`,
      'myhostname = postfix-bench.localdomain',
      'mydomain = localdomain',
      'myorigin = $myhostname',
      'mydestination =',
      'local_transport = error:local delivery is disabled',
      'alias_maps =',
      'alias_database =',
      'local_recipient_maps =',
      'inet_interfaces = 127.0.0.1',
      'inet_protocols = ipv4',
      'mynetworks = 127.0.0.0/8',
      ...(sinkPort === undefined ? [] : [`relayhost = [127.0.0.1]:${sinkPort}`]),
      'smtp_tls_security_level = none',
      'smtpd_tls_security_level = none',
      'notify_classes =',
      'biff = no',
      ...(options.hold
        ? ['smtpd_recipient_restrictions = check_client_access static:HOLD, permit_mynetworks, reject']
        : []),
      ...(mailbox
        ? [
            `virtual_mailbox_domains = ${mailbox[1]}`,
            `virtual_mailbox_base = ${dir}/mail`,
            `virtual_mailbox_maps = inline:{ ${mailbox.join('@')}=${mailbox[0]}/ }`,
            `virtual_uid_maps = static:${NOBODY}`,
            `virtual_gid_maps = static:${NOBODY}`,
          ]
        : []),
      ...(options.routes
        ? [
            `transport_maps = inline:{ ${Object.entries(options.routes)
              .map(([domain, nexthop]) => `${domain}=${nexthop}`)
              .join(', ')} }`,
          ]
        : []),
      '',
    ].join('\n'),
  );
  const services = [
    `127.0.0.1:${port} inet n - n - - smtpd`,
    'pickup unix n - n 60 1 pickup',
    'cleanup unix n - n - 0 cleanup',
    'qmgr unix n - n 300 1 qmgr',
    'tlsmgr unix - - n 1000? 1 tlsmgr',
    'rewrite unix - - n - - trivial-rewrite',
    'bounce unix - - n - 0 bounce',
    'defer unix - - n - 0 bounce',
    'trace unix - - n - 0 bounce',
    'verify unix - - n - 1 verify',
    'flush unix n - n 1000? 0 flush',
    'proxymap unix - - n - - proxymap',
    'smtp unix - - n - - smtp',
    'relay unix - - n - - smtp',
    'showq unix n - n - - showq',
    'error unix - - n - - error',
    'retry unix - - n - - error',
    'discard unix - - n - - discard',
    'virtual unix - n n - - virtual',
    'anvil unix - - n - 1 anvil',
    'scache unix - - n - 1 scache',
    'postlog unix-dgram n - n - 1 postlogd',
  ];
  await writeFile(path.join(etc, 'master.cf'), `${services.join('\n')}\n`);
  const log = () => readFile(path.join(dir, 'maillog'), 'utf8').catch(() => '(no maillog)');
  // Postfix reports its errors to the maillog, not to a non-terminal stderr.
  const postfix = (command: string) => {
    try {
      execFileSync(POSTFIX, ['-c', etc, command], { stdio: 'ignore' });
    } catch {
      throw new Error(`postfix ${command} failed`);
    }
  };
  try {
    postfix('check');
    await teardown.own(
      () => postfix('start'),
      () => postfix('stop'),
    );
    const deadline = Date.now() + 15_000;
    while (!(await listening(port))) {
      if (Date.now() > deadline) throw new Error('smtpd is not listening');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } catch (error) {
    console.error(await log());
    throw error;
  }
  const release = () => {
    execFileSync(`${SBIN}/postsuper`, ['-c', etc, '-H', 'ALL'], { stdio: 'ignore' });
    execFileSync(`${SBIN}/postqueue`, ['-c', etc, '-f'], { stdio: 'ignore' });
  };
  /** Messages in the instance's queues (from `postqueue -j`, one JSON line each). */
  const queued = () =>
    execFileSync(`${SBIN}/postqueue`, ['-c', etc, '-j'], { encoding: 'utf8', maxBuffer: 1 << 30 })
      .split('\n')
      .filter(Boolean).length;
  /** Messages delivered to the mailbox so far (files in its Maildir's new/). */
  const delivered = async () => (maildir ? (await readdir(path.join(maildir, 'new')).catch(() => [])).length : 0);
  return { port, log, release, queued, delivered, maildir };
}

/** The installed Postfix's version (mail_version). */
export function postfixVersion(): string {
  return execFileSync(`${SBIN}/postconf`, ['-d', '-h', 'mail_version'], { encoding: 'utf8' }).trim();
}

/**
 * smtp-source feeding `messages` messages of `size` bytes, one recipient each (`to`, by default
 * to@example.com), to smtpd on `port` (or any SMTP listener there) over `sessions` connections (each
 * sending its messages one after another); resolves when all were accepted. It writes From, To, Date,
 * Message-Id (unique in a run: its pid and a message counter) and, given `subject`, Subject headers; the
 * body is `size` bytes of numbered lines of X. The envelope sender is `from`.
 */
export async function feedPostfix(
  teardown: Teardown,
  port: number,
  {
    sessions,
    messages,
    size,
    to = 'to@example.com',
    from = 'shop@postfix-bench.example',
    subject,
  }: { sessions: number; messages: number; size: number; to?: string; from?: string; subject?: string },
): Promise<void> {
  const source = await teardown.own(
    () =>
      spawn(
        SMTP_SOURCE,
        [
          ...['-d', '-s', String(sessions), '-m', String(messages), '-l', String(size)],
          ...(subject === undefined ? [] : ['-S', subject]),
          ...['-f', from, '-t', to, `127.0.0.1:${port}`],
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      ),
    stopChild,
  );
  let errors = '';
  source.stderr!.on('data', (chunk) => (errors += chunk));
  const code = await new Promise<number | null>((resolve) => source.once('exit', resolve));
  if (code !== 0) throw new Error(`smtp-source exited with ${code}: ${errors}`);
}
