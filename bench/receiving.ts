// Receiving race: Mailroom's inbound listener taking mail for a receiving domain, against Postfix taking
// the same mail into a local mailbox. Postfix's smtp-source hands MESSAGES (5,000) messages of SIZE (5,000)
// body bytes to one recipient over SESSIONS (10) connections, each sending its messages one after another.
//
//   node bench/receiving.ts                                                          # embedded PGlite
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/receiving.ts  # PostgreSQL
//
// Runs as root (it starts Postfix, and installs Debian's postfix package when its programs are missing).
// - Mailroom: the inbound listener started as `mailroom serve` starts it (src/server.ts), in a child
//   process (this file with the argument `serve`; logs at info to a file, as the server's go to stdout)
//   that owns the database: a fresh PostgreSQL database, or a PGlite directory of its own (the embedded
//   default). One organization, its domain receiving mail, a webhook endpoint subscribed to
//   email.received (so that each message queues a delivery; no webhook worker runs). Done when all
//   MESSAGES rows of received_emails are committed (the child counts them every POLL_MS, 50). Sender
//   authentication asks a loopback DNS server (the local resolver of an MX host), where the sender's
//   domain publishes SPF for 127.0.0.1 and a DMARC policy: SPF and DMARC pass, as for real mail.
// - Postfix: the throw-away instance of bench/postfix.ts, the recipient's domain a virtual mailbox domain,
//   its mail written to a Maildir by the virtual delivery agent. Done when the Maildir's new/ holds every
//   message (queue file and Maildir file are both fsynced: Postfix's own rules).
// Each side first takes WARMUP (200) messages, untimed (JIT, connections, caches), then is timed from
// smtp-source's start until done. The ratio Mailroom / Postfix is printed; the target is ≥ 0.5.
// PROFILE_DIR=/tmp/prof writes a CPU profile of Mailroom's child; ONLY=mailroom or ONLY=postfix runs one side;
// LOG_FILE keeps Mailroom's log there; QUERY_STATS=1 (with SESSIONS=1) prints the time of each statement.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { startDnsServer } from '../test/helpers/dns-server.ts';
import { ensurePostfix, feedPostfix, postfixVersion, startPostfix, stopChild } from './postfix.ts';
import { type Teardown, withTeardown } from './teardown.ts';
import type { Database } from '../src/platform/db/database.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 5000);
const WARMUP = Number(process.env.WARMUP ?? 200);
const SESSIONS = Number(process.env.SESSIONS ?? 10);
const SIZE = Number(process.env.SIZE ?? 5000);
const POLL_MS = Number(process.env.POLL_MS ?? 50);
/** ONLY=mailroom or ONLY=postfix runs one side. */
const ONLY = process.env.ONLY;
const SENDER_DOMAIN = 'shop.example';
const SENDER = `orders@${SENDER_DOMAIN}`;
const SUBJECT = 'Your order 1042 has shipped';

/** What the child tells the parent over the IPC channel. */
type FromChild =
  | { type: 'ready'; port: number; recipient: string; database: string }
  | { type: 'reached'; count: number }
  | {
      type: 'stats';
      rows: number;
      deliveries: number;
      averageBytes: number;
      durability: string;
      /** Each distinct SPF/DMARC verdict pair stored, e.g. 'spf pass, dmarc pass'. */
      verdicts: string[];
    };
type ToChild = { type: 'watch'; count: number } | { type: 'stats' };

if (process.argv[2] === 'serve') await serve();
else await run();

/** The child: Mailroom's inbound listener on its own database, counting stored messages when asked. */
async function serve() {
  const { loadConfig } = await import('../src/platform/config.ts');
  const { openDatabase } = await import('../src/platform/db/open.ts');
  const { migrate } = await import('../src/platform/db/migrate.ts');
  const { buildApp } = await import('../src/app.ts');
  const { startInboundServer } = await import('../src/inbound/inbound-server.ts');
  const { loadTlsCertificate } = await import('../src/submission/tls-certificate.ts');
  const { createAuthenticator } = await import('../src/receiving/authentication.ts');
  const { createSpamChecker } = await import('../src/receiving/spam-check.ts');
  const { createTestOrganization } = await import('../test/helpers/app.ts');

  const config = loadConfig(process.env);
  const opened = await openDatabase(config);
  const timings = new Map<string, { count: number; ms: number }>();
  const db = process.env.QUERY_STATS === '1' ? timed(opened, timings) : opened;
  await migrate(db);
  const org = await createTestOrganization(db, config, 'recv');
  await db.query('UPDATE domains SET receiving = true WHERE organization_id = $1', [org.id]);
  await db.query(
    `INSERT INTO webhook_endpoints (organization_id, url, events, signing_secret)
     VALUES ($1, 'https://hooks.shop.example/mailroom', '["email.received"]'::jsonb, 'whsec_bench')`,
    [org.id],
  );
  // As runServer (src/server.ts) does for the API role, no workers: the app for its signer and logger, then
  // the listener with the same options.
  const app = await buildApp({ db, config, runsWorkers: false });
  const inbound = await startInboundServer({
    db,
    signer: app.signer,
    host: '127.0.0.1',
    port: 0,
    log: app.log,
    returnPathDomain: config.returnPathDomain,
    maxMessageBytes: config.inboundMaxBytes,
    tls: await loadTlsCertificate(config),
    authenticate: createAuthenticator(config),
    spamCheck: createSpamChecker(config, app.log),
  });
  const count = async (sql: string) => (await db.query<{ n: number }>(sql)).rows[0]!.n;
  const send = (message: FromChild) => process.send!(message);

  let stopping = false;
  process.on('message', (message: ToChild) => {
    void (async () => {
      if (message.type === 'watch') {
        for (;;) {
          const rows = await count('SELECT count(*)::int AS n FROM received_emails');
          if (rows >= message.count) return send({ type: 'reached', count: rows });
          await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        }
      }
      let durability = 'PGlite (embedded, on disk)';
      if (db.kind !== 'pglite') {
        const show = async (name: string) =>
          (await db.query<Record<string, string>>(`SHOW ${name}`)).rows[0]![name] as string;
        durability = `PostgreSQL synchronous_commit=${await show('synchronous_commit')} fsync=${await show('fsync')}`;
      }
      if (timings.size > 0) {
        const rows = [...timings].sort((a, b) => b[1].ms - a[1].ms);
        for (const [text, { count, ms }] of rows) {
          console.error(
            `${ms.toFixed(0).padStart(7)} ms ${String(count).padStart(6)}x ${(ms / count).toFixed(3)} ms  ${text}`,
          );
        }
      }
      send({
        type: 'stats',
        rows: await count('SELECT count(*)::int AS n FROM received_emails'),
        deliveries: await count(
          "SELECT count(*)::int AS n FROM webhook_deliveries WHERE event_type = 'email.received'",
        ),
        averageBytes: await count('SELECT coalesce(avg(size_bytes), 0)::int AS n FROM received_emails'),
        durability,
        verdicts: (
          await db.query<{ verdict: string }>(
            `SELECT DISTINCT 'spf ' || (authentication->'spf'->>'result') || ', dmarc ' ||
                    coalesce(authentication->'dmarc'->>'result', 'none') AS verdict
               FROM received_emails`,
          )
        ).rows.map((row) => row.verdict),
      });
    })().catch((error: unknown) => {
      if (stopping) return; // the database closed under a count
      console.error(error);
      process.exit(1);
    });
  });
  process.once('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      await inbound.close();
      await app.close();
      await db.close();
      process.exit(0);
    })();
  });
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  send({ type: 'ready', port: inbound.port, recipient: `inbox@${org.domain}`, database: db.kind });
}

/**
 * QUERY_STATS=1: the database seam timed per statement (its first words) and per transaction, printed with
 * the stats. Run it with SESSIONS=1, so that no statement waits behind another's (PGlite runs one at a time).
 */
function timed(db: Database, timings: Map<string, { count: number; ms: number }>): Database {
  const time = async <T>(label: string, run: () => Promise<T>) => {
    const started = performance.now();
    try {
      return await run();
    } finally {
      const entry = timings.get(label) ?? { count: 0, ms: 0 };
      entry.count += 1;
      entry.ms += performance.now() - started;
      timings.set(label, entry);
    }
  };
  const label = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 90);
  return {
    kind: db.kind,
    listen: (channel, onNotify, onLost) => db.listen(channel, onNotify, onLost),
    poolStats: () => db.poolStats?.(),
    close: () => db.close(),
    query: (text, params) => time(label(text), () => db.query(text, params)),
    transaction: (fn, settings) =>
      time('(whole transaction)', () =>
        db.transaction(
          (tx) =>
            fn({
              query: (text, params) => time(`  tx: ${label(text)}`, () => tx.query(text, params)),
              exec: (script) => tx.exec(script),
            }),
          settings,
        ),
      ),
  };
}

interface Child {
  process: ChildProcess;
  ready: Extract<FromChild, { type: 'ready' }>;
  ask<T extends FromChild['type']>(message: ToChild, answer: T): Promise<Extract<FromChild, { type: T }>>;
}

/** Mailroom's child on a fresh database (PostgreSQL with DATABASE_URL, else a PGlite directory). */
async function startMailroom(teardown: Teardown, dnsServer: string): Promise<Child> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    MAILROOM_DNS_SERVERS: dnsServer,
    QUERY_STATS: process.env.QUERY_STATS ?? '',
    MAILROOM_LOG_LEVEL: process.env.MAILROOM_LOG_LEVEL ?? 'info',
  };
  // The data directory holds the PGlite database (the embedded default) and, on both, the self-signed
  // certificate STARTTLS offers; the log is kept beside it.
  const dir = await teardown.own(
    () => mkdtemp(path.join(tmpdir(), 'mailroom-bench-receiving-')),
    (made) => rm(made, { recursive: true, force: true }),
  );
  env.MAILROOM_DATA_DIR = path.join(dir, 'data');
  if (process.env.DATABASE_URL) {
    const created = await teardown.own(createPostgresDatabase, (made) => made.drop());
    env.DATABASE_URL = created.url;
  }
  const log = await open(process.env.LOG_FILE ?? path.join(dir, 'mailroom.log'), 'w');
  const profile = process.env.PROFILE_DIR ? [`--cpu-prof`, `--cpu-prof-dir=${process.env.PROFILE_DIR}`] : [];
  const child = await teardown.own(
    () =>
      spawn(process.execPath, [...profile, import.meta.filename, 'serve'], {
        env,
        stdio: ['ignore', log.fd, 'inherit', 'ipc'],
      }),
    stopChild,
  );
  await log.close();
  const waiters = new Map<string, (message: FromChild) => void>();
  child.on('message', (message: FromChild) => {
    const waiter = waiters.get(message.type);
    waiters.delete(message.type);
    waiter?.(message);
  });
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`Mailroom's child exited with ${code}`))),
  );
  exited.catch(() => {});
  const next = <T extends FromChild['type']>(type: T) =>
    Promise.race([
      new Promise<Extract<FromChild, { type: T }>>((resolve) =>
        waiters.set(type, resolve as (message: FromChild) => void),
      ),
      exited,
    ]);
  const ready = await next('ready');
  return {
    process: child,
    ready,
    ask(message, answer) {
      const answered = next(answer);
      child.send(message);
      return answered;
    },
  };
}

/** Feeds `messages` to `port` and waits until `done(total)` resolves; seconds from the feed's start. */
async function race(
  teardown: Teardown,
  port: number,
  recipient: string,
  messages: number,
  done: () => Promise<unknown>,
) {
  if (messages === 0) return { seconds: 0, acceptedAfter: 0 };
  const started = performance.now();
  const waiting = done();
  waiting.catch(() => {}); // awaited below; if the feed fails first, its error is the one reported
  await feedPostfix(teardown, port, {
    sessions: SESSIONS,
    messages,
    size: SIZE,
    to: recipient,
    from: SENDER,
    subject: SUBJECT,
  });
  const acceptedAfter = (performance.now() - started) / 1000;
  await waiting;
  return { seconds: (performance.now() - started) / 1000, acceptedAfter };
}

async function run() {
  await withTeardown(async (teardown) => {
    await ensurePostfix();
    // A loopback DNS server stands for the local resolver an MX host runs: the sender's domain publishes
    // SPF for the loopback address and a DMARC policy, so SPF and DMARC pass as they would for real mail.
    const dns = await teardown.own(
      () =>
        startDnsServer(
          new Map([
            [SENDER_DOMAIN, { txt: [['v=spf1 ip4:127.0.0.1 -all']] }],
            [`_dmarc.${SENDER_DOMAIN}`, { txt: [['v=DMARC1; p=reject']] }],
          ]),
        ),
      (server) => server.close(),
    );
    const lines: string[] = [];
    let ourRate: number | undefined;
    let theirRate: number | undefined;
    let recipient = 'inbox@receiving.example.test';

    if (ONLY !== 'postfix') {
      const mailroom = await startMailroom(teardown, dns.address);
      const { port } = mailroom.ready;
      recipient = mailroom.ready.recipient;
      // A warm-up, then the timed run, each until the child has counted every row.
      await race(teardown, port, recipient, WARMUP, () => mailroom.ask({ type: 'watch', count: WARMUP }, 'reached'));
      const ours = await race(teardown, port, recipient, MESSAGES, () =>
        mailroom.ask({ type: 'watch', count: WARMUP + MESSAGES }, 'reached'),
      );
      const stats = await mailroom.ask({ type: 'stats' }, 'stats');
      await stopChild(mailroom.process); // out of Postfix's way
      if (stats.rows !== WARMUP + MESSAGES) throw new Error(`Mailroom stored ${stats.rows} messages`);
      if (stats.deliveries !== stats.rows) {
        throw new Error(`${stats.deliveries} email.received deliveries queued for ${stats.rows} messages`);
      }
      ourRate = MESSAGES / ours.seconds;
      lines.push(
        `  Mailroom: ${stats.durability}; each message stored raw and parsed, sender authentication checked, email.received queued (${stats.deliveries} webhook deliveries); ${stats.averageBytes} bytes a message as stored; ${stats.verdicts.join(' / ')}`,
        `Mailroom inbound    ${ourRate.toFixed(0).padStart(6)} msg/s  (${ours.seconds.toFixed(2)} s; all answered after ${ours.acceptedAfter.toFixed(2)} s)`,
      );
    }

    if (ONLY !== 'mailroom') {
      // The same recipient, its domain a virtual mailbox domain, delivered to a Maildir.
      const postfix = await startPostfix(teardown, undefined, { mailbox: recipient });
      const until = (count: number) => async () => {
        while ((await postfix.delivered()) < count) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      };
      await race(teardown, postfix.port, recipient, WARMUP, until(WARMUP));
      const theirs = await race(teardown, postfix.port, recipient, MESSAGES, until(WARMUP + MESSAGES));
      const delivered = await postfix.delivered();
      if (delivered !== WARMUP + MESSAGES) throw new Error(`Postfix delivered ${delivered} messages`);
      theirRate = MESSAGES / theirs.seconds;
      lines.push(
        `  Postfix ${postfixVersion()}: virtual delivery to a Maildir (queue file and Maildir file fsynced)`,
        `Postfix to Maildir  ${theirRate.toFixed(0).padStart(6)} msg/s  (${theirs.seconds.toFixed(2)} s; all answered after ${theirs.acceptedAfter.toFixed(2)} s)`,
      );
    }

    console.log(
      `${MESSAGES} messages (after ${WARMUP} untimed) from smtp-source, ${SESSIONS} sessions, ${SIZE}-byte bodies, one recipient`,
    );
    for (const line of lines) console.log(line);
    if (ourRate !== undefined && theirRate !== undefined) {
      console.log(`ratio (Mailroom / Postfix): ${(ourRate / theirRate).toFixed(3)}   (target ≥ 0.5)`);
    }
  });
}
