// Nothing accepted is lost: a server delivering to a (slow) SMTP relay is killed with SIGKILL in the
// middle of sending; after a restart every accepted message reaches the relay.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { databaseForProcesses } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startServerProcess } from './helpers/server-process.ts';
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

const MESSAGES = 30;
let sink: SmtpSink;
let env: Record<string, string>;
let cleanup: () => Promise<void>;
let key: string;

before(async () => {
  sink = await startSmtpSink({ starttls: false });
  sink.slow('data', 150); // each message takes a while, so the kill lands mid-send
  ({ env, cleanup } = await databaseForProcesses('crash'));
  Object.assign(env, {
    MAILROOM_TRANSPORT: 'smtp',
    MAILROOM_SMTP_URL: sink.url,
    // A dead worker's jobs come back after 5 s (long enough that a slow CI machine finishing a send does
    // not see its own lease run out and the job taken a second time).
    MAILROOM_JOB_LEASE_SECONDS: '5',
    MAILROOM_WORKER_CONCURRENCY: '4',
    MAILROOM_SMTP_TIMEOUT_MS: '3000',
  });
  const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
  const org = await cli('org', 'create', '--name', 'Crash');
  await cli('domain', 'add', '--org', String(org.id), 'crash.example');
  await cli('domain', 'verify', '--org', String(org.id), 'crash.example', '--trust');
  key = String(
    (await cli('key', 'create', '--org', String(org.id), '--name', 'k', '--permission', 'full_access')).token,
  );
});
after(async () => {
  await sink.close();
  await cleanup();
});

test('a worker killed mid-send loses nothing: after a restart every accepted message is delivered', async () => {
  // The relay takes three messages, then holds the rest unanswered: the kill lands with messages in
  // flight and others not sent, however slowly this process gets to it.
  const release = sink.holdAfter(3);
  const first = await startServerProcess(env);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const res = await fetch(`${first.base}/emails/batch`, {
    method: 'POST',
    headers,
    body: JSON.stringify(
      Array.from({ length: MESSAGES }, (_, i) => ({
        from: 'Crash <ops@crash.example>',
        to: `r${i}@example.com`,
        subject: `n${i}`,
        text: 'survive',
      })),
    ),
  });
  assert.equal(res.status, 200);
  const ids = ((await res.json()) as { data: Array<{ id: string }> }).data.map((d) => d.id);
  assert.equal(ids.length, MESSAGES);

  // Kill it once some messages have gone out and others have not.
  await waitFor(() => sink.transactions.length >= 3, 15_000);
  first.child.kill('SIGKILL');
  await first.exited;
  const beforeRestart = new Set(sink.transactions.flatMap((tx) => tx.rcptTo));
  assert.ok(beforeRestart.size < MESSAGES, `all ${MESSAGES} went out before the kill; the test proves nothing`);
  release();

  const second = await startServerProcess(env);
  try {
    const delivered = async () => {
      let count = 0;
      for (const id of ids) {
        const events = await fetch(`${second.base}/emails/${id}/events`, { headers });
        const body = (await events.json()) as { data: Array<{ type: string }> };
        if (body.data.some((e) => e.type === 'delivered')) count += 1;
      }
      return count;
    };
    await waitFor(async () => (await delivered()) === MESSAGES, 30_000, 250);
    const received = sink.transactions.flatMap((tx) => tx.rcptTo);
    const expected = Array.from({ length: MESSAGES }, (_, i) => `r${i}@example.com`);
    assert.deepEqual([...new Set(received)].sort(), expected.sort(), 'every accepted message reached the relay');
    // Those in flight at the kill may have gone out twice (at least once); no more than the worker ran at once.
    assert.ok(received.length - MESSAGES <= 4, `${received.length - MESSAGES} duplicates`);
    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 0);
  } finally {
    second.child.kill('SIGKILL');
  }
});
