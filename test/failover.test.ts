// Failover to a standby loses no acknowledged message. A primary PostgreSQL with a synchronous
// streaming standby (both the test's own servers), a Mailroom server given both hosts in one URL with
// target_session_attrs=read-write, a stream of sends with Idempotency-Keys; the primary is stopped as
// in a crash, then the standby promoted. While no primary is reachable every answer is a quick 503 with
// Retry-After; Mailroom moves to the promoted standby by itself; every send answered 200 is there.
//
// It needs PostgreSQL's own binaries and runs once, in the PostgreSQL pass of the suite.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { isConnectionLost } from '../src/platform/db/database.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startReplicatedPostgres, type ReplicatedPostgres } from './helpers/replicated-postgres.ts';
import { startServerProcess, type ServerProcess, logTail } from './helpers/server-process.ts';
import { bearer } from './helpers/app.ts';
import { waitFor } from './helpers/wait.ts';

const CONNECT_TIMEOUT_MS = 1000;
const STATEMENT_TIMEOUT_MS = 3000;
// The longest an answer may take: a connection attempt, a statement and the 2 s the process waits past
// the statement timeout for an answer lost on the way, with a margin for a loaded machine.
const ANSWER_BOUND_MS = CONNECT_TIMEOUT_MS + STATEMENT_TIMEOUT_MS + 2000 + 3000;

if (onPostgres) {
  const cleanups: Array<() => Promise<void>> = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  test('the primary crashes and its synchronous standby is promoted: 503 with Retry-After meanwhile, Mailroom moves to the new primary by itself, no acknowledged send lost', async () => {
    const servers: ReplicatedPostgres = await startReplicatedPostgres({ synchronous: true });
    cleanups.push(() => servers.destroy());
    const env = {
      DATABASE_URL: servers.url('read-write'),
      MAILROOM_TRANSPORT: 'capture',
      MAILROOM_DB_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS),
      MAILROOM_DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
    };
    const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
    const org = await cli('org', 'create', '--name', 'Failover', '--rate-limit', '10000');
    await cli('domain', 'add', '--org', String(org.id), 'failover.example');
    await cli('domain', 'verify', '--org', String(org.id), 'failover.example', '--trust');
    const key = String(
      (await cli('key', 'create', '--org', String(org.id), '--name', 'k', '--permission', 'full_access')).token,
    );
    const started: { server?: ServerProcess } = {};
    cleanups.push(async () => {
      started.server?.child.kill('SIGKILL');
      await started.server?.exited;
    });
    // The capture transport writes the messages it delivers under the data directory.
    const dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-failover-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const server = (started.server = await startServerProcess({ ...env, MAILROOM_DATA_DIR: dataDir }));
    const headers = { ...bearer(key), 'content-type': 'application/json' };

    // Four senders, each sending one message after the other; a 503 is sent again with the same
    // Idempotency-Key (sooner than Retry-After says, to keep the test short) until it is answered 200.
    interface Answer {
      key: string;
      start: number;
      end: number;
      status: number | 'timeout';
      retryAfter: string | null;
      body: { id?: string; name?: string };
    }
    const answers: Answer[] = [];
    const acknowledged = new Map<string, string>(); // Idempotency-Key → email id
    const sendOne = async (idempotencyKey: string): Promise<Answer> => {
      const start = Date.now();
      try {
        const res = await fetch(`${server.base}/emails`, {
          method: 'POST',
          headers: { ...headers, 'idempotency-key': idempotencyKey },
          body: JSON.stringify({
            from: 'Ops <ops@failover.example>',
            to: 'someone@example.com',
            subject: idempotencyKey,
            text: 'x',
          }),
          signal: AbortSignal.timeout(ANSWER_BOUND_MS * 2),
        });
        const body = (await res.json()) as Answer['body'];
        return {
          key: idempotencyKey,
          start,
          end: Date.now(),
          status: res.status,
          retryAfter: res.headers.get('retry-after'),
          body,
        };
      } catch {
        return { key: idempotencyKey, start, end: Date.now(), status: 'timeout', retryAfter: null, body: {} };
      }
    };
    let sending = true;
    const senders = [0, 1, 2, 3].map(async (sender) => {
      for (let n = 0; sending; n++) {
        const idempotencyKey = `failover-${sender}-${n}`;
        for (;;) {
          const answer = await sendOne(idempotencyKey);
          answers.push(answer);
          if (answer.status === 200) {
            acknowledged.set(idempotencyKey, answer.body.id!);
            break;
          }
          // The key's claim committed before the primary went, its send did not: the claim holds the key
          // for its lease (60 s). Not acknowledged; the sender moves on rather than wait it out.
          if (answer.body.name === 'concurrent_idempotent_requests') break;
          if (!sending) break;
          await sleep(100);
        }
        await sleep(20);
      }
    });
    const readyz: Array<{ status: number; retryAfter: string | null }> = [];

    const t0 = Date.now();
    let crashed = Infinity;
    let promoted = Infinity;
    const summary = () =>
      [
        `primary crashed at +${crashed - t0} ms, standby promoted at +${promoted - t0} ms`,
        `answers: ${answers.map((a) => `+${a.start - t0}:${a.status}${a.body.name ? `/${a.body.name}` : ''}(${a.end - a.start}ms)`).join(' ')}`,
        logTail(server, 5000),
      ].join('\n');
    try {
      await waitFor(() => acknowledged.size >= 20, 20_000, 50);
      await servers.crashPrimary();
      crashed = Date.now();
      // No primary: the standby is read-only, the old primary gone.
      await sleep(2000);
      const probe = await fetch(`${server.base}/readyz`);
      readyz.push({ status: probe.status, retryAfter: probe.headers.get('retry-after') });
      await servers.promoteStandby();
      promoted = Date.now();
      // Mailroom finds the new primary by itself, and sends are acknowledged again.
      const before = acknowledged.size;
      await waitFor(() => acknowledged.size >= before + 20, 20_000, 50);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${summary()}`);
    } finally {
      sending = false;
      await Promise.all(senders);
    }

    // Only 200, 503 and a retry's 409 while its key's first try holds it; every 503 in the envelope, with
    // Retry-After; none took longer than the bound.
    const unexpected = answers.filter(
      (a) => a.status !== 200 && a.status !== 503 && a.body.name !== 'concurrent_idempotent_requests',
    );
    assert.deepEqual(
      unexpected.map((a) => `${a.status}/${a.body.name}`),
      [],
      summary(),
    );
    const refused = answers.filter((a) => a.status === 503);
    assert.ok(
      refused.some((a) => a.start > crashed && a.end < promoted),
      `no 503 while no primary was reachable\n${summary()}`,
    );
    for (const answer of refused) {
      assert.equal(answer.body.name, 'service_unavailable', summary());
      assert.equal(answer.retryAfter, '5', summary());
    }
    const slowest = Math.max(...answers.map((a) => a.end - a.start));
    assert.ok(slowest < ANSWER_BOUND_MS, `an answer took ${slowest} ms\n${summary()}`);
    assert.deepEqual(readyz, [{ status: 503, retryAfter: '5' }]);
    assert.ok(
      answers.some((a) => a.start > promoted && a.status === 200),
      `no send acknowledged by the new primary\n${summary()}`,
    );

    // Every acknowledged send is on the new primary, once per Idempotency-Key.
    const promotedDb = new pg.Client({ connectionString: servers.standby.url });
    await promotedDb.connect();
    try {
      const { rows } = await promotedDb.query<{ id: string }>('SELECT id FROM emails WHERE id = ANY($1)', [
        [...acknowledged.values()],
      ]);
      const stored = new Set(rows.map((row) => row.id));
      const lost = [...acknowledged].filter(([, id]) => !stored.has(id));
      assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.size} acknowledged sends lost`);
      const { rows: inRecovery } = await promotedDb.query<{ recovery: boolean }>(
        'SELECT pg_is_in_recovery() AS recovery',
      );
      assert.equal(inRecovery[0]!.recovery, false);

      // The primary turned read-only (as a demoted one is): a write on a connection Mailroom already holds
      // fails with SQLSTATE 25006, answered 503 with Retry-After, never 500; the connections made while it
      // stays so find it read-only. Writable again, sends are acknowledged again.
      const setReadOnly = async (on: boolean) => {
        await promotedDb.query(`ALTER SYSTEM SET default_transaction_read_only = ${on ? 'on' : 'off'}`);
        await promotedDb.query('SELECT pg_reload_conf()');
      };
      await setReadOnly(true);
      await sleep(200); // the server's sessions take the reloaded setting
      for (let n = 0; n < 3; n++) {
        const answer = await sendOne(`read-only-${n}`);
        assert.equal(answer.status, 503, `${JSON.stringify(answer)}\n${summary()}`);
        assert.equal(answer.body.name, 'service_unavailable');
        assert.equal(answer.retryAfter, '5');
      }
      await setReadOnly(false);
      await waitFor(async () => (await sendOne('writable-again')).status === 200, 10_000, 200);
    } finally {
      await promotedDb.end();
    }
  });

  test('a commit the synchronous standby does not confirm is not acknowledged: an outage', async () => {
    const servers = await startReplicatedPostgres({ synchronous: true });
    cleanups.push(() => servers.destroy());
    const db = openPostgres(servers.url('read-write'), 2, { connectTimeoutMs: 1000, statementTimeoutMs: 1000 });
    try {
      await db.query('CREATE TABLE acknowledged (n int)');
      await db.transaction((tx) => tx.query('INSERT INTO acknowledged VALUES (1)'));
      await servers.stopStandby();
      // PostgreSQL stops the statement timeout before a COMMIT: the process's wait for the answer ends it.
      const error = await db
        .transaction((tx) => tx.query('INSERT INTO acknowledged VALUES (2)'))
        .then(
          () => assert.fail('acknowledged without the standby'),
          (error: unknown) => error,
        );
      assert.ok(isConnectionLost(error), String(error));
    } finally {
      await db.close();
    }
  });
}
