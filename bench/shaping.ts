// Shaping race: Mailroom and Postfix deliver to a simulated mailbox provider on loopback that allows
// CONNECTIONS connections at once and RATE messages a minute, and answers Gmail's 421 4.7.28 beyond them.
// Printed for each run: the messages the provider accepted, its goodput as a share of the allowed rate,
// and the share of attempts refused with 421.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/shaping.ts
//
// - The provider: an SMTP server on one loopback address per recipient domain (127.0.0.5, 127.0.0.6, …;
//   one port), all counting together, as a provider counts a sender across its servers. A connection
//   beyond CONNECTIONS open at once is refused at the greeting, a MAIL FROM when RATE messages were
//   accepted in the last 60 s (a sliding minute) is refused at MAIL FROM, both with 421 4.7.28. Attempts:
//   every refused connection and every MAIL FROM.
// - Mailroom: `mailroom serve` on a fresh PostgreSQL database, MAILROOM_TRANSPORT=mx; a loopback DNS server
//   gives each recipient domain an MX host under .google.com (so they are all the site `google`) pointing
//   at its address. First with a shaping file that gives the provider's published limits
//   (`[site.google] connection_limit = CONNECTIONS`, `max_message_rate = "RATE/m"`), as an operator
//   following the provider's guidance writes it; then (NO_FILE=1, the default) without one, to show what
//   the 421's hold costs. The messages are accepted through POST /emails/batch.
// - Postfix: a throw-away instance (bench/postfix.ts) with its defaults, each recipient domain routed to
//   its address (a destination of its own, as each domain is when Postfix looks its MX up), fed by
//   smtp-source (one per domain).
//
// Each run ends when the provider has accepted every message or WINDOW seconds after its first message
// was submitted, whichever comes first; goodput = accepted / that time.
//
// MESSAGES (5000), CONNECTIONS (5), RATE (3000 a minute), WINDOW (150 s: the three runs take about 8
// minutes), DOMAINS (2, at most 8), FILE_RATE (the shaping file's max_message_rate a minute, default RATE;
// e.g. 2850 to leave the provider 5%), NO_FILE (1: also run Mailroom without a shaping file; 0: not),
// POSTFIX (1; 0: Mailroom alone, no root needed). Runs as root when it races Postfix (it installs Debian's
// postfix package when missing).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import { loadConfig } from '../src/platform/config.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { startDnsServer } from '../test/helpers/dns-server.ts';
import { freePort, startServerProcess, type ServerProcess } from '../test/helpers/server-process.ts';
import { ensurePostfix, feedPostfix, postfixVersion, startPostfix, stopChild } from './postfix.ts';
import { type Teardown, withTeardown } from './teardown.ts';
import { submitReceipts } from './submit-receipts.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 5000);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 5);
const RATE = Number(process.env.RATE ?? 3000);
const WINDOW_S = Number(process.env.WINDOW ?? 150);
// The rate the shaping file gives; by default the provider's own.
const FILE_RATE = Number(process.env.FILE_RATE ?? RATE);
const DOMAINS = Number(process.env.DOMAINS ?? 2);
const NO_FILE = process.env.NO_FILE !== '0';
const POSTFIX = process.env.POSTFIX !== '0';
const NAMES = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight'];
if (!process.env.DATABASE_URL) {
  console.error('Set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  process.exit(2);
}
if (!(DOMAINS >= 1 && DOMAINS <= NAMES.length)) throw new Error(`DOMAINS must be 1 to ${NAMES.length}`);

/** Recipient domain i: its name, its MX host (under .google.com) and the provider's address for it. */
const domains = NAMES.slice(0, DOMAINS).map((name, i) => ({
  name: `${name}.test`,
  mx: i === 0 ? 'aspmx.l.google.com' : `alt${i}.aspmx.l.google.com`,
  address: `127.0.0.${5 + i}`,
}));
const domainOf = (i: number) => domains[i % DOMAINS]!;

// Gmail's texts: the first is its published 421 4.7.28; a connection beyond the limit gets the same code.
const RATE_REPLY =
  '4.7.28 Our system has detected an unusual rate of unsolicited mail originating from your IP address';
const CONNECTION_REPLY = '4.7.28 Our system has detected an unusual rate of connections from your IP address';

interface Counts {
  /** When counting began (Date.now()). */
  since: number;
  /** Refused connections and MAIL FROM commands. */
  attempts: number;
  greeting421: number;
  mail421: number;
  accepted: number;
  /** Connections open at once, at most. */
  maxOpen: number;
  firstAcceptedAt: number | undefined;
  lastAcceptedAt: number | undefined;
  /** When the first 421 was answered (Date.now()). */
  first421At: number | undefined;
  /** Messages accepted in the sliding minute when the first 421 was answered at MAIL FROM. */
  minuteAtFirstRefusal: number | undefined;
}

/** The simulated provider: one SMTP server per address, one set of counts and limits for all of them. */
async function startProvider(teardown: Teardown) {
  const port = await freePort();
  let open = 0;
  const admitted = new Set<string>();
  // Times the accepted messages were accepted, oldest first; `oldest` skips those out of the minute.
  let times: number[] = [];
  let oldest = 0;
  let counts: Counts;
  const reset = () => {
    counts = {
      since: Date.now(),
      attempts: 0,
      greeting421: 0,
      mail421: 0,
      accepted: 0,
      maxOpen: open,
      firstAcceptedAt: undefined,
      lastAcceptedAt: undefined,
      first421At: undefined,
      minuteAtFirstRefusal: undefined,
    };
    times = [];
    oldest = 0;
  };
  reset();
  const refuse = (message: string) => Object.assign(new Error(message), { responseCode: 421 });
  const inLastMinute = (now: number) => {
    while (oldest < times.length && times[oldest]! <= now - 60_000) oldest++;
    if (oldest > 100_000) [times, oldest] = [times.slice(oldest), 0];
    return times.length - oldest;
  };
  for (const { address } of domains) {
    const server = new SMTPServer({
      authOptional: true,
      disableReverseLookup: true,
      disabledCommands: ['STARTTLS'],
      hideENHANCEDSTATUSCODES: true,
      logger: false,
      size: 10 * 1024 * 1024,
      onConnect(session: SMTPServerSession, callback) {
        if (open >= CONNECTIONS) {
          counts.attempts++;
          counts.greeting421++;
          counts.first421At ??= Date.now();
          return callback(refuse(CONNECTION_REPLY));
        }
        open++;
        admitted.add(session.id);
        counts.maxOpen = Math.max(counts.maxOpen, open);
        callback();
      },
      onClose(session: SMTPServerSession) {
        if (admitted.delete(session.id)) open--;
      },
      onMailFrom(_address, _session, callback) {
        counts.attempts++;
        const minute = inLastMinute(Date.now());
        if (minute >= RATE) {
          counts.mail421++;
          counts.first421At ??= Date.now();
          counts.minuteAtFirstRefusal ??= minute;
          return callback(refuse(RATE_REPLY));
        }
        callback();
      },
      onData(stream, _session, callback) {
        stream.resume();
        stream.on('end', () => {
          const now = Date.now();
          times.push(now);
          counts.accepted++;
          counts.firstAcceptedAt ??= now;
          counts.lastAcceptedAt = now;
          callback();
        });
      },
    });
    await teardown.own(
      () => new Promise<void>((resolve) => server.listen(port, address, resolve)),
      () => new Promise<void>((resolve) => server.close(() => resolve())),
    );
  }
  return {
    port,
    counts: () => ({ ...counts }),
    open: () => open,
    reset,
  };
}

type Provider = Awaited<ReturnType<typeof startProvider>>;

interface RunResult {
  label: string;
  counts: Counts;
  seconds: number;
  /** Whether every message was accepted within the window. */
  complete: boolean;
  notes: string[];
}

/** Waits until the provider has accepted every message, or the window since `started` ends. */
async function watch(provider: Provider, started: number) {
  for (;;) {
    const counts = provider.counts();
    const elapsed = performance.now() - started;
    if (counts.accepted >= MESSAGES) {
      // Timed to the last acceptance, not to this look.
      const seconds = (elapsed - (Date.now() - counts.lastAcceptedAt!)) / 1000;
      return { counts, seconds, complete: true };
    }
    if (elapsed >= WINDOW_S * 1000) return { counts, seconds: WINDOW_S, complete: false };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Waits until no connection to the provider is open (the previous sender has gone), at most 10 s. */
async function quiet(provider: Provider) {
  const deadline = Date.now() + 10_000;
  while (provider.open() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}

async function raceMailroom(
  teardown: Teardown,
  provider: Provider,
  dnsAddress: string,
  shapingFile: string | undefined,
): Promise<RunResult> {
  const created = await teardown.own(createPostgresDatabase, (made) => made.drop());
  const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_LOG_LEVEL: 'silent' });
  const db = openPostgres(created.url, 4);
  await migrate(db);
  const org = await createTestOrganization(db, config, 'shbench');
  await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [org.id]);
  await db.close();
  const server: ServerProcess = await teardown.own(
    () =>
      startServerProcess({
        DATABASE_URL: created.url,
        MAILROOM_TRANSPORT: 'mx',
        MAILROOM_DNS_SERVERS: dnsAddress,
        MAILROOM_MX_PORT: String(provider.port),
        MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8',
        ...(shapingFile ? { MAILROOM_SHAPING_FILE: shapingFile } : {}),
      }),
    (started) => stopChild(started.child),
  );
  await quiet(provider);
  provider.reset();
  const started = performance.now();
  await submitReceipts(server.base, org, MESSAGES, (i) => `c${i}@${domainOf(i).name}`);
  const acceptedAfter = (performance.now() - started) / 1000;
  const result = await watch(provider, started);

  // What Mailroom says about it: its recipients, and the site's state.
  const look = openPostgres(created.url, 1);
  const statuses = await look.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM email_recipients GROUP BY status ORDER BY status',
  );
  const sites = await look.query<{
    site: string;
    connection_limit: number;
    message_rate: number | null;
    paused_for: number | null;
    pause_reason: string | null;
    throttle_replies: string;
  }>(
    `SELECT site, connection_limit, message_rate, throttle_replies, pause_reason,
            extract(epoch FROM paused_until - now())::float AS paused_for
       FROM destination_sites ORDER BY site`,
  );
  await look.close();
  const notes = [
    `all submitted after ${acceptedAfter.toFixed(2)} s; recipients at the end: ${statuses.rows.map((r) => `${r.status} ${r.n}`).join(', ')}`,
    ...sites.rows.map(
      (s) =>
        `site ${s.site}: ${s.connection_limit} connections, ${s.message_rate === null ? 'no rate' : `${Math.round(s.message_rate)}/min`}, ` +
        `${s.throttle_replies} throttle replies` +
        (s.paused_for !== null && s.paused_for > 0
          ? `, paused (${s.pause_reason}) ${Math.round(s.paused_for)} s more`
          : ''),
    ),
  ];
  // Out of the next run's way (both steps are idempotent: the teardown repeats them harmlessly).
  await stopChild(server.child);
  await created.drop();
  return { label: shapingFile ? 'Mailroom (shaping file)' : 'Mailroom (no file)', ...result, notes };
}

async function racePostfix(teardown: Teardown, provider: Provider): Promise<RunResult> {
  const routes = Object.fromEntries(domains.map((d) => [d.name, `smtp:[${d.address}]:${provider.port}`]));
  // The sink port is unused: every recipient domain has a route.
  const postfix = await startPostfix(teardown, provider.port, { routes });
  await quiet(provider);
  provider.reset();
  const started = performance.now();
  const feeds = domains.map((d, i) =>
    feedPostfix(teardown, postfix.port, {
      sessions: Math.max(1, Math.round(50 / DOMAINS)),
      messages: Math.floor(MESSAGES / DOMAINS) + (i < MESSAGES % DOMAINS ? 1 : 0),
      size: 1500,
      to: `to@${d.name}`,
    }),
  );
  let fedAfter: number | undefined;
  void Promise.all(feeds).then(() => (fedAfter = (performance.now() - started) / 1000));
  const result = await watch(provider, started);
  await Promise.all(feeds);
  const log = await postfix.log();
  const deferred = (log.match(/status=deferred/g) ?? []).length;
  const suspended = (log.match(/delivery temporarily suspended/g) ?? []).length;
  const notes = [
    `all submitted after ${(fedAfter ?? (performance.now() - started) / 1000).toFixed(2)} s; in its queue at the end: ${postfix.queued()}`,
    `maillog: ${deferred} deliveries deferred, ${suspended} of them "delivery temporarily suspended" (destination dead, not tried)`,
  ];
  return { label: 'Postfix (defaults)', ...result, notes };
}

await withTeardown(async (teardown) => {
  if (POSTFIX) await ensurePostfix();
  const provider = await startProvider(teardown);
  const dns = await teardown.own(
    () => startDnsServer(),
    (server) => server.close(),
  );
  for (const d of domains) {
    dns.zone.set(d.name, { mx: [{ priority: 5, exchange: d.mx }] });
    dns.zone.set(d.mx, { a: [d.address] });
  }
  const dir = await teardown.own(
    () => mkdtemp(path.join(tmpdir(), 'mailroom-bench-shaping-')),
    (made) => rm(made, { recursive: true, force: true }),
  );
  const shapingFile = path.join(dir, 'shaping.toml');
  const fileText = `[site.google]\nconnection_limit = ${CONNECTIONS}\nmax_message_rate = "${FILE_RATE}/m"\n`;
  await writeFile(shapingFile, fileText);

  const runs: RunResult[] = [];
  runs.push(await raceMailroom(teardown, provider, dns.address, shapingFile));
  if (NO_FILE) runs.push(await raceMailroom(teardown, provider, dns.address, undefined));
  if (POSTFIX) runs.push(await racePostfix(teardown, provider));

  const goodput = (r: RunResult) => r.counts.accepted / r.seconds / (RATE / 60);
  const share421 = (r: RunResult) =>
    r.counts.attempts === 0 ? 0 : (r.counts.greeting421 + r.counts.mail421) / r.counts.attempts;
  const percent = (x: number) => `${(x * 100).toFixed(1)}%`;
  console.log(
    `${MESSAGES} messages, one recipient each, to ${DOMAINS} domain${DOMAINS > 1 ? 's' : ''} of one simulated provider on loopback (MX under .google.com: site google)`,
  );
  console.log(
    `  the provider: at most ${CONNECTIONS} connections at once and ${RATE} messages a minute (sliding), beyond them 421 4.7.28 (at the greeting, at MAIL FROM)`,
  );
  console.log(
    `  each run ends when all ${MESSAGES} are accepted, or ${WINDOW_S} s after its first message was submitted`,
  );
  console.log(
    `  Mailroom: mailroom serve, MAILROOM_TRANSPORT=mx, PostgreSQL; shaping file: ${fileText.trim().split('\n').join('; ')}`,
  );
  if (POSTFIX)
    console.log(
      `  Postfix ${postfixVersion()}: its defaults, a transport_maps route per domain; smtp-source bodies of 1500 bytes`,
    );
  for (const r of runs) {
    const c = r.counts;
    console.log(
      `${r.label.padEnd(24)} accepted ${String(c.accepted).padStart(5)} in ${r.seconds.toFixed(1).padStart(5)} s${r.complete ? ' (all)' : ' (window)'}` +
        `   goodput ${goodput(r).toFixed(3)} of ${RATE}/min` +
        `   attempts ${c.attempts}, 421 ${c.greeting421 + c.mail421} (greeting ${c.greeting421}, MAIL ${c.mail421}): ${percent(share421(r))}` +
        `   connections at most ${c.maxOpen}`,
    );
    if (c.first421At !== undefined) {
      const minute =
        c.minuteAtFirstRefusal === undefined
          ? ''
          : ` at MAIL FROM, ${c.minuteAtFirstRefusal} accepted in the minute before it`;
      console.log(
        `    first 421 ${((c.first421At - c.since) / 1000).toFixed(2)} s after the first submission${minute}`,
      );
    }
    for (const note of r.notes) console.log(`    ${note}`);
  }
  const shaped = runs[0]!;
  console.log(
    `Mailroom (shaping file): goodput ${goodput(shaped).toFixed(3)} (target ≥ 0.90), 421 share ${percent(share421(shaped))} (target ≤ 5%)`,
  );
  const postfix = runs.find((r) => r.label.startsWith('Postfix'));
  if (postfix) {
    console.log(
      `against Postfix: goodput ${goodput(shaped).toFixed(3)} vs ${goodput(postfix).toFixed(3)} (${goodput(shaped) >= goodput(postfix) ? 'met' : 'not met'}), ` +
        `421 share ${percent(share421(shaped))} vs ${percent(share421(postfix))} (${share421(shaped) <= share421(postfix) ? 'met' : 'not met'})`,
    );
  }
});
