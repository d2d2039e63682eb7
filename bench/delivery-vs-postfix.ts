// Delivery race: Mailroom against Postfix, both relaying to the same loopback sink (Postfix's smtp-sink).
// Mailroom: a fresh PostgreSQL database, `mailroom serve` with MAILROOM_TRANSPORT=smtp to the sink, the
// messages sent through POST /emails/batch, as bench/delivery.ts does. Postfix: a throw-away instance in a
// temporary directory (its own main.cf, master.cf, queue and data directories, smtpd on a free loopback
// port, relayhost the sink), fed by smtp-source. Each side is timed from its first message until the sink
// has counted every one.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/delivery-vs-postfix.ts
//
// Runs as root: it installs Debian's postfix package when its programs are missing, and starts Postfix.
// MESSAGES (default 2000), CONCURRENCY (Mailroom's worker concurrency and smtp-source's sessions, default
// 50: Mailroom's own default),
// SIZE (smtp-source's body in bytes, default 1500: a Mailroom message of this benchmark, signed and tracked,
// is about 1,500 bytes at the sink, headers included).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { freePort, startServerProcess, type ServerProcess } from '../test/helpers/server-process.ts';
import { type Teardown, withTeardown } from './teardown.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 2000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 50);
const SIZE = Number(process.env.SIZE ?? 1500);
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}

const SBIN = '/usr/sbin';
const POSTFIX = `${SBIN}/postfix`;
const SMTP_SINK = `${SBIN}/smtp-sink`;
const SMTP_SOURCE = `${SBIN}/smtp-source`;

/** Whether something accepts TCP connections on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
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
async function ensurePostfix() {
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
async function startSink(teardown: Teardown) {
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

function stopChild(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  return exited.then(() => undefined);
}

/**
 * A throw-away Postfix instance: main.cf and master.cf in DIR/etc, queue in DIR/queue, data in DIR/data,
 * log in DIR/maillog; smtpd on 127.0.0.1:port only, everything relayed to the sink, no local delivery, no
 * chroot. Postfix asks for a non-default config directory to be listed in the default main.cf's
 * alternate_config_directories only when the caller is not root (mail_conf_checkdir), so as root
 * `postfix -c DIR/etc start` runs it without touching /etc/postfix.
 */
async function startPostfix(teardown: Teardown, sinkPort: number) {
  const dir = await teardown.own(
    () => mkdtemp(path.join(tmpdir(), 'mailroom-bench-postfix-')),
    (made) => rm(made, { recursive: true, force: true }),
  );
  await chmod(dir, 0o755);
  await mkdir(path.join(dir, 'etc'));
  await mkdir(path.join(dir, 'queue'), { mode: 0o755 });
  const port = await freePort();
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
      `relayhost = [127.0.0.1]:${sinkPort}`,
      'smtp_tls_security_level = none',
      'smtpd_tls_security_level = none',
      'notify_classes =',
      'biff = no',
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
  return { port, log };
}

type Sink = Awaited<ReturnType<typeof startSink>>;

async function raceMailroom(teardown: Teardown, sink: Sink) {
  const created = await teardown.own(createPostgresDatabase, (made) => made.drop());
  const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_LOG_LEVEL: 'silent' });
  const db = openPostgres(created.url, 4);
  await migrate(db);
  const org = await createTestOrganization(db, config, 'pbench');
  await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [org.id]);
  await db.close();
  const server: ServerProcess = await teardown.own(
    () =>
      startServerProcess({
        DATABASE_URL: created.url,
        MAILROOM_TRANSPORT: 'smtp',
        MAILROOM_SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
        MAILROOM_WORKER_CONCURRENCY: String(CONCURRENCY),
        // A CPU profile of the server, for where the time goes: PROFILE_DIR=/tmp/prof.
        ...(process.env.PROFILE_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.PROFILE_DIR}` } : {}),
      }),
    (started) => stopChild(started.child),
  );
  const before = sink.count();
  const started = performance.now();
  const batches = [];
  for (let first = 0; first < MESSAGES; first += 100) {
    const entries = [];
    for (let i = first; i < Math.min(MESSAGES, first + 100); i++) {
      entries.push({
        from: `Shop <shop@${org.domain}>`,
        to: `c${i}@example.com`,
        subject: `Your receipt #${i}`,
        html: `<p>Thanks for order ${i}.</p>`,
        text: `Thanks for order ${i}.`,
      });
    }
    batches.push(
      fetch(`${server.base}/emails/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.sendingKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(entries),
      }).then(async (res) => {
        const answer = await res.text();
        if (res.status !== 200 || JSON.parse(answer).errors) throw new Error(`batch answered ${res.status}: ${answer}`);
      }),
    );
  }
  await Promise.all(batches);
  const acceptedAt = performance.now();
  await sink.until(before + MESSAGES);
  const seconds = (performance.now() - started) / 1000;
  const counted = await settled(sink, before, 'Mailroom');
  // Out of Postfix's way (both steps are idempotent: the teardown repeats them harmlessly).
  await stopChild(server.child);
  await created.drop();
  return { seconds, acceptedAfter: (acceptedAt - started) / 1000, counted };
}

async function racePostfix(teardown: Teardown, sink: Sink, smtpdPort: number) {
  const before = sink.count();
  const started = performance.now();
  const source = await teardown.own(
    () =>
      spawn(
        SMTP_SOURCE,
        [
          '-d', // one connection per session, messages one after another on it
          '-s',
          String(CONCURRENCY),
          '-m',
          String(MESSAGES),
          '-l',
          String(SIZE),
          '-f',
          'shop@postfix-bench.example',
          '-t',
          'to@example.com',
          `127.0.0.1:${smtpdPort}`,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      ),
    stopChild,
  );
  let errors = '';
  source.stderr!.on('data', (chunk) => (errors += chunk));
  const code = await new Promise<number | null>((resolve) => source.once('exit', resolve));
  if (code !== 0) throw new Error(`smtp-source exited with ${code}: ${errors}`);
  const acceptedAt = performance.now();
  await sink.until(before + MESSAGES);
  const seconds = (performance.now() - started) / 1000;
  return { seconds, acceptedAfter: (acceptedAt - started) / 1000, counted: await settled(sink, before, 'Postfix') };
}

/** The sink's count a second after a race: exactly the race's messages, none lost or doubled. */
async function settled(sink: Sink, before: number, label: string) {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const counted = sink.count() - before;
  if (counted !== MESSAGES) throw new Error(`${label}: the sink counted ${counted} messages, expected ${MESSAGES}`);
  return counted;
}

await withTeardown(async (teardown) => {
  await ensurePostfix();
  const settings = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await settings.connect();
  const show = async (name: string) => (await settings.query(`SHOW ${name}`)).rows[0][name] as string;
  const durability = `synchronous_commit=${await show('synchronous_commit')} fsync=${await show('fsync')}`;
  await settings.end();
  const version = execFileSync(`${SBIN}/postconf`, ['-d', '-h', 'mail_version'], { encoding: 'utf8' }).trim();

  const sink = await startSink(teardown);
  const postfix = await startPostfix(teardown, sink.port);

  const mailroom = await raceMailroom(teardown, sink);
  const relay = await racePostfix(teardown, sink, postfix.port);

  const mailroomRate = MESSAGES / mailroom.seconds;
  const postfixRate = MESSAGES / relay.seconds;
  console.log(
    `${MESSAGES} messages, one recipient each, concurrency ${CONCURRENCY}, both relaying to smtp-sink on loopback`,
  );
  console.log(`  Mailroom: PostgreSQL ${durability}; messages composed and DKIM-signed`);
  console.log(
    `  Postfix ${version}: queue files fsynced before each 250 (Postfix's own rule); smtp-source bodies of ${SIZE} bytes, not signed`,
  );
  console.log(
    `Mailroom end to end      ${mailroomRate.toFixed(0).padStart(6)} delivered/s  (${mailroom.seconds.toFixed(2)} s; all accepted after ${mailroom.acceptedAfter.toFixed(2)} s; sink counted ${mailroom.counted})`,
  );
  console.log(
    `Postfix relay            ${postfixRate.toFixed(0).padStart(6)} delivered/s  (${relay.seconds.toFixed(2)} s; all accepted after ${relay.acceptedAfter.toFixed(2)} s; sink counted ${relay.counted})`,
  );
  console.log(`ratio (Mailroom / Postfix): ${(mailroomRate / postfixRate).toFixed(3)}`);
});
