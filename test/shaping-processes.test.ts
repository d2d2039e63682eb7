// Shaping across real worker processes: two `mailroom serve` processes on one PostgreSQL database
// deliver to a simulated Gmail on loopback (a loopback DNS server maps the recipient domains' MX to a
// .google.com host, so both are the site `google`) under a shaping file allowing 3 connections and 600
// messages a minute. Their connections summed never exceed 3 and their sends never the rate; one is killed with SIGKILL mid-drain, and the other takes over its
// claimed messages and its connection slots when their leases run out (30 s and 15 s), not at the end
// of a long lease.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createPostgresDatabase, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { startServerProcess, type ServerProcess } from './helpers/server-process.ts';
import { startProvider, type Provider } from './helpers/simulated-provider.ts';
import { waitFor } from './helpers/wait.ts';

const PROVIDER_HOST = '127.0.0.8';
const MESSAGES = 90;
const CONNECTIONS = 3;
const PER_MINUTE = 600;
/** The default job lease: a dead worker's claimed jobs return to the queue within it. */
const JOB_LEASE_S = 30;

let provider: Provider;
let dns: DnsServer;
let dir: string;
let env: Record<string, string>;
let dropDatabase: () => Promise<void> = async () => {};
let key: string;
const processes: ServerProcess[] = [];

before(async () => {
  if (!onPostgres) return;
  // Each message takes 100 ms to accept, so that the kill lands with messages claimed and connections open.
  provider = await startProvider(PROVIDER_HOST, { dataDelayMs: 100 });
  dns = await startDnsServer();
  for (const domain of ['gmail-one.test', 'gmail-two.test']) {
    dns.zone.set(domain, { mx: [{ priority: 5, exchange: 'gmail-smtp-in.l.google.com' }] });
  }
  dns.zone.set('gmail-smtp-in.l.google.com', { a: [PROVIDER_HOST] });
  dir = await mkdtemp(path.join(tmpdir(), 'mailroom-shaping-'));
  const shapingFile = path.join(dir, 'shaping.toml');
  await writeFile(
    shapingFile,
    `[site.google]\nconnection_limit = ${CONNECTIONS}\nmax_message_rate = "${PER_MINUTE}/m"\n`,
  );
  const database = await createPostgresDatabase();
  dropDatabase = database.drop;
  env = {
    DATABASE_URL: database.url,
    MAILROOM_TRANSPORT: 'mx',
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_MX_PORT: String(provider.port),
    MAILROOM_MX_ALLOW_CIDRS: '127.0.0.0/8',
    MAILROOM_SHAPING_FILE: shapingFile,
    MAILROOM_WORKER_CONCURRENCY: '10',
    MAILROOM_SMTP_TIMEOUT_MS: '5000',
  };
  const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
  const org = await cli('org', 'create', '--name', 'Two workers', '--rate-limit', '1000');
  await cli('domain', 'add', '--org', String(org.id), 'two-workers.example');
  await cli('domain', 'verify', '--org', String(org.id), 'two-workers.example', '--trust');
  key = String(
    (await cli('key', 'create', '--org', String(org.id), '--name', 'k', '--permission', 'sending_access')).token,
  );
});
after(async () => {
  if (!onPostgres) return;
  for (const server of processes) server.child.kill('SIGKILL');
  await Promise.all(processes.map((server) => server.exited));
  await provider.close();
  await dns.close();
  await dropDatabase();
  await rm(dir, { recursive: true, force: true });
});

test('two worker processes share a site: never more than its connections summed; a killed one gives back its messages and slots within the leases', async () => {
  if (!onPostgres) return; // two processes on one database: PostgreSQL (PGlite is one process's own)

  const [first, second] = [await startServerProcess(env), await startServerProcess(env)];
  processes.push(first, second);
  const res = await fetch(`${first.base}/emails/batch`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(
      Array.from({ length: MESSAGES }, (_, i) => ({
        from: 'Two <ops@two-workers.example>',
        to: `r${i}@gmail-${i % 2 ? 'one' : 'two'}.test`,
        subject: `n${i}`,
        text: 'shared',
      })),
    ),
  });
  assert.equal(res.status, 200, await res.text());

  await waitFor(() => provider.accepted.length >= 15, 30_000);
  first.child.kill('SIGKILL');
  const killedAt = Date.now();
  await first.exited;

  // Every message arrives (one in flight at the kill may arrive twice: it went, and its outcome was not
  // recorded), the dead worker's claimed ones once their 30 s lease has run out.
  const expected = Array.from({ length: MESSAGES }, (_, i) => `r${i}@gmail-${i % 2 ? 'one' : 'two'}.test`);
  const arrived = () => new Set(provider.accepted.map((tx) => tx.to));
  await waitFor(() => arrived().size === MESSAGES, (JOB_LEASE_S + 30) * 1000);
  const drainedAfter = Date.now() - killedAt;
  assert.deepEqual([...arrived()].sort(), expected.sort());
  assert.ok(provider.maxConcurrent <= CONNECTIONS, `${provider.maxConcurrent} connections at once`);
  // The pace is one bucket for both: 60 in any 6 s at most (each process at the full rate would make
  // about 120), with room for a slow machine delivering a few late ones together.
  const times = provider.accepted.map((tx) => tx.at);
  const busiest = Math.max(...times.map((start) => times.filter((at) => at >= start && at < start + 6000).length));
  assert.ok(busiest <= 75, `${busiest} messages accepted in 6 s`);
  assert.ok(
    provider.accepted.length - MESSAGES <= CONNECTIONS,
    `${provider.accepted.length - MESSAGES} sent twice: more than were in flight`,
  );
  // The dead worker's claimed messages waited for their lease to run out (renewed every 10 s, so 20 to
  // 30 s after the kill), not for a long one, and nobody sent them before that.
  assert.ok(
    drainedAfter >= 15_000 && drainedAfter < (JOB_LEASE_S + 30) * 1000,
    `drained ${drainedAfter} ms after the kill`,
  );
  // Nothing is left queued for the site.
  const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
  const { data } = (await cli('destinations', 'list')) as { data: Array<{ site: string; queued: number }> };
  assert.equal(data.find((site) => site.site === 'google')?.queued, 0);
});
