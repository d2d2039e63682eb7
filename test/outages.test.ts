// Outages lose nothing. With real processes: PostgreSQL stopped for several seconds under a Mailroom
// server that is sending, delivering and calling a webhook (sends answer 503 quickly, /readyz fails,
// the server recovers by itself and every accepted message is delivered once); and an SMTP relay that
// refuses connections for a while (messages are deferred, then delivered once it is back).
//
// The database outages need PostgreSQL's own binaries and run in the PostgreSQL pass of the suite (on a
// private server each test stops and starts, never the shared one); the relay outage runs in the PGlite
// pass. Each test runs once per run of the suite.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import pg from 'pg';
import { isConnectionLost } from '../src/platform/db/database.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startPrivatePostgres } from './helpers/private-postgres.ts';
import { startServerProcess, type ServerProcess, logTail } from './helpers/server-process.ts';
import { startSmtpSink, subjectCounts } from './helpers/smtp-sink.ts';
import { startRelayTestBed } from './helpers/delivery.ts';
import { bearer } from './helpers/app.ts';
import { message, send } from './helpers/emails.ts';
import { waitFor } from './helpers/wait.ts';

interface Hook {
  headers: IncomingHttpHeaders;
  raw: string;
}

/** A webhook receiver on loopback that answers 200 and records every request. */
async function hookReceiver() {
  const received: Hook[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => (raw += chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, raw });
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
    received,
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

if (onPostgres) {
  /**
   * A Mailroom server process on a private PostgreSQL server, delivering through a loopback SMTP sink
   * and calling a webhook receiver for every `email.delivered`, with one organization and its key.
   */
  const startOutageBed = async (settings: Record<string, string> = {}) => {
    const db = await startPrivatePostgres();
    const sink = await startSmtpSink({ starttls: false });
    const hooks = await hookReceiver();
    const started: { server?: ServerProcess } = {}; // once it has started
    const close = async () => {
      started.server?.child.kill('SIGKILL');
      await started.server?.exited;
      await hooks.close();
      await sink.close();
      await db.destroy();
    };
    beds.push(close);
    const env = {
      DATABASE_URL: db.url,
      MAILROOM_TRANSPORT: 'smtp',
      MAILROOM_SMTP_URL: sink.url,
      MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      MAILROOM_WEBHOOK_TIMEOUT_MS: '2000',
      MAILROOM_DB_CONNECT_TIMEOUT_MS: '1000',
      ...settings,
    };
    const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
    const org = await cli('org', 'create', '--name', 'Outage', '--rate-limit', '10000');
    await cli('domain', 'add', '--org', String(org.id), 'outage.example');
    await cli('domain', 'verify', '--org', String(org.id), 'outage.example', '--trust');
    const key = String(
      (await cli('key', 'create', '--org', String(org.id), '--name', 'k', '--permission', 'full_access')).token,
    );
    const server = (started.server = await startServerProcess(env));
    const headers = { ...bearer(key), 'content-type': 'application/json' };
    const created = await fetch(`${server.base}/webhooks`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ endpoint: hooks.url, events: ['email.delivered'] }),
    });
    assert.equal(created.status, 201, await created.clone().text());
    const { signing_secret: secret } = (await created.json()) as { signing_secret: string };
    return { db, sink, hooks, server, base: server.base, headers, secret };
  };
  const beds: Array<() => Promise<void>> = [];
  after(async () => {
    for (const close of beds) await close();
  });

  test('the database seam rides out a restart: a transaction cut off fails (the process lives on), LISTEN comes back, statements work again', async () => {
    const postgres = await startPrivatePostgres();
    const seam = openPostgres(postgres.url, 2, { connectTimeoutMs: 1000 });
    let wakeUps = 0;
    try {
      const unlisten = await seam.listen('outage_test', () => (wakeUps += 1));
      // A transaction holding its connection, idle between statements, when the server stops: the
      // client's 'error' must be heard, or the process would crash here.
      let stopped!: () => void;
      const serverStopped = new Promise<void>((resolve) => (stopped = resolve));
      const cutOff = seam.transaction(async (tx) => {
        await tx.query('SELECT 1');
        await serverStopped;
        await tx.query('SELECT 2');
      });
      await sleep(100);
      await postgres.stop();
      stopped();
      const error = await cutOff.then(
        () => assert.fail('the transaction committed without a server'),
        (error: unknown) => error,
      );
      assert.ok(isConnectionLost(error), `not seen as a lost connection: ${String(error)}`);
      // Down: a statement fails at once, seen as a lost connection too. "At once" is shown by the error
      // itself: the connection was refused, not given up on after the connect timeout.
      const refused = await seam.query('SELECT 1').then(
        () => assert.fail('answered without a server'),
        (error: unknown) => error,
      );
      assert.ok(isConnectionLost(refused), String(refused));
      assert.equal((refused as NodeJS.ErrnoException).code, 'ECONNREFUSED', String(refused));
      await sleep(2500); // several reconnection attempts of the listener fail meanwhile
      const before = wakeUps;
      await postgres.start();
      // Back: statements work, and the listener reconnected (it wakes once on its own to catch up).
      await waitFor(
        async () =>
          await seam.query('SELECT 1').then(
            () => true,
            () => false,
          ),
        5000,
        100,
      );
      await waitFor(() => wakeUps > before, 5000);
      const woken = wakeUps;
      await seam.query(`SELECT pg_notify('outage_test', '')`);
      await waitFor(() => wakeUps > woken, 5000);
      await unlisten();
    } finally {
      await seam.close();
      await postgres.destroy();
    }
  });

  test('a message the relay takes while the database is down is recorded once it is back, not sent again', async () => {
    // A short lease: were the outcome not recorded, the job would come back within this test and send again.
    // (Long enough that retrying the record, which stops 6 s before the lease ends, outlasts the outage.)
    const { db, sink, hooks, base, headers } = await startOutageBed({ MAILROOM_JOB_LEASE_SECONDS: '20' });
    sink.slow('data', 3000); // the relay takes its time answering DATA: the database stops meanwhile
    // One batch: both jobs are queued together and taken by the same claim, before the outage.
    const res = await fetch(`${base}/emails/batch`, {
      method: 'POST',
      headers,
      body: JSON.stringify(
        ['inflight-0', 'inflight-1'].map((subject) => ({
          from: 'Ops <ops@outage.example>',
          to: `${subject}@example.com`,
          subject,
          text: 'x',
        })),
      ),
    });
    assert.equal(res.status, 200);
    const ids = ((await res.json()) as { data: Array<{ id: string }> }).data.map((entry) => entry.id);
    await waitFor(() => sink.connections >= 2, 5000); // both copies are being handed over
    await sleep(500);
    await db.stop();
    const down = Date.now();
    await waitFor(() => sink.transactions.length >= 2, 10_000); // both copies handed over during the outage
    sink.slow('data', 0);
    await sleep(Math.max(0, down + 4000 - Date.now()));
    await db.start();

    const events = async (id: string) => {
      const res = await fetch(`${base}/emails/${id}/events`, { headers });
      return ((await res.json()) as { data: Array<{ type: string }> }).data.map((e) => e.type);
    };
    await waitFor(async () => (await Promise.all(ids.map(events))).every((t) => t.includes('delivered')), 10_000, 200);
    await sleep(Math.max(0, down + 18_000 - Date.now())); // past the lease of the jobs taken before the outage
    assert.deepEqual([...subjectCounts(sink)].sort(), [
      ['inflight-0', 1],
      ['inflight-1', 1],
    ]);
    for (const id of ids) assert.equal((await events(id)).filter((type) => type === 'delivered').length, 1);
    await waitFor(() => hooks.received.length >= 2, 10_000);
    assert.deepEqual(new Set(hooks.received.map((hook) => hook.headers['webhook-id'])).size, 2);
  });

  test('PostgreSQL stopped mid-traffic: sends get a quick 503, /readyz fails, the server recovers by itself and every accepted message is delivered once', async () => {
    // The default lease (300 s): a job handled during the outage must not wait for it to run out.
    const { db, sink, hooks, server, base, headers, secret } = await startOutageBed();

    // Sends, one every 40 ms, each with its own Idempotency-Key (also its subject), and /readyz probes,
    // every answer recorded with when its request started and ended.
    interface Answer {
      key: string;
      start: number;
      end: number;
      status: number | 'timeout';
      body: { id?: string; name?: string; statusCode?: number };
    }
    const answers: Answer[] = [];
    const probes: Array<{ start: number; end: number; status: number | 'timeout' }> = [];
    let sending = true;
    const sendOne = async (key: string): Promise<Answer> => {
      const start = Date.now();
      try {
        const res = await fetch(`${base}/emails`, {
          method: 'POST',
          headers: { ...headers, 'idempotency-key': key },
          body: JSON.stringify({
            from: 'Ops <ops@outage.example>',
            to: 'someone@example.com',
            subject: key,
            text: 'x',
          }),
          signal: AbortSignal.timeout(15_000),
        });
        return { key, start, end: Date.now(), status: res.status, body: (await res.json()) as Answer['body'] };
      } catch {
        return { key, start, end: Date.now(), status: 'timeout', body: {} };
      }
    };
    const sender = (async () => {
      for (let n = 0; sending; n++) {
        const pacing = sleep(40);
        answers.push(await sendOne(`outage-${n}`));
        await pacing;
      }
    })();
    const prober = (async () => {
      while (sending) {
        const start = Date.now();
        const status = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(15_000) }).then(
          (res) => res.status,
          () => 'timeout' as const,
        );
        probes.push({ start, end: Date.now(), status });
        await sleep(100);
      }
    })();

    // What was answered when, and what the server logged above info: shown when an assertion fails.
    const summary = () =>
      [
        `outage from +${down - t0} ms to +${backAt - t0} ms`,
        `sends: ${answers.map((a) => `+${a.start - t0}:${a.status}${a.body.name ? `/${a.body.name}` : ''}(${a.end - a.start}ms)`).join(' ')}`,
        `readyz: ${probes.map((p) => `+${p.start - t0}:${p.status}`).join(' ')}`,
        logTail(server, 6000),
      ].join('\n');
    const t0 = Date.now();
    let down = Infinity;
    let backAt = Infinity;
    try {
      await sleep(1500);
      await db.stop();
      down = Date.now();
      await sleep(5000);
      backAt = Date.now();
      await db.start();
      const up = Date.now();
      // It recovers by itself: ready again, and sends succeed.
      await waitFor(() => probes.some((p) => p.start > up && p.status === 200), 20_000, 100);
      await waitFor(() => answers.some((a) => a.start > up && a.status === 200), 20_000, 100);
      await sleep(1000);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${summary()}`);
    } finally {
      sending = false;
      await Promise.all([sender, prober]);
    }

    // During the outage: only 200 and 503, each 503 in the envelope and quick; /readyz not 200.
    const statuses = new Set(answers.map((a) => a.status));
    assert.deepEqual(
      [...statuses].filter((s) => s !== 200 && s !== 503),
      [],
      `statuses seen: ${[...statuses].join(', ')}\n${summary()}`,
    );
    const refused = answers.filter((a) => a.status === 503);
    const duringOutage = answers.filter((a) => a.start > down && a.end < backAt);
    // Answered while the database was down, not held until it was back (which would answer none of them
    // within the outage): a few are proof enough, however slowly a loaded machine sends them.
    assert.ok(duringOutage.length >= 3, `only ${duringOutage.length} sends during the outage`);
    assert.ok(
      duringOutage.every((a) => a.status === 503),
      `every send while the database was down answered 503\n${summary()}`,
    );
    // Quick: the server does not hold a send for the database. A refused connection fails at once, and an
    // attempt that hangs gives up after MAILROOM_DB_CONNECT_TIMEOUT_MS (1 s here). The bound is five
    // times that, the outage's whole length, which leaves a loaded machine room; a server that retried
    // the database before answering would take that long, and one that held sends until it was back
    // would have answered too few of them during the outage (checked above).
    for (const answer of refused) {
      assert.deepEqual([answer.body.statusCode, answer.body.name], [503, 'service_unavailable']);
      assert.ok(answer.end - answer.start < 5000, `a 503 took ${answer.end - answer.start} ms`);
    }
    assert.ok(
      answers.some((a) => a.end < down && a.status === 200),
      'sends succeeded before the outage',
    );
    const probesDuringOutage = probes.filter((p) => p.start > down && p.end < backAt);
    assert.ok(probesDuringOutage.length >= 2, `only ${probesDuringOutage.length} probes during the outage`);
    assert.ok(
      probesDuringOutage.every((p) => p.status === 503),
      `/readyz answered 200 while the database was down\n${summary()}`,
    );

    // A client retries each 503 with the same Idempotency-Key: it gets the message's id (a send whose
    // commit went through although its answer was lost gets its remembered result). A 409 says a claim
    // of the key from before the outage is still running out its lease: nothing was stored for it.
    const accepted = new Map<string, string>(); // key -> message id
    for (const answer of answers) if (answer.status === 200) accepted.set(answer.key, answer.body.id!);
    const unclaimed = new Set<string>();
    for (const answer of refused) {
      const retry = await sendOne(answer.key);
      if (retry.status === 200) accepted.set(answer.key, retry.body.id!);
      else {
        assert.deepEqual([retry.status, retry.body.name], [409, 'concurrent_idempotent_requests']);
        unclaimed.add(answer.key);
      }
    }

    // Every accepted message reaches the relay exactly once, and nothing else does.
    await waitFor(() => [...accepted.keys()].every((key) => subjectCounts(sink).has(key)), 30_000, 200);
    const counts = subjectCounts(sink);
    for (const key of accepted.keys()) assert.equal(counts.get(key), 1, `${key} delivered ${counts.get(key)} times`);
    for (const subject of counts.keys()) assert.ok(accepted.has(subject), `${subject} delivered but never accepted`);
    for (const key of unclaimed) assert.ok(!counts.has(key));

    // Each delivery's webhook arrives, signed; a repeat is the same event (same webhook-id) sent again.
    const ids = new Set(accepted.values());
    const verifier = new Webhook(secret);
    const eventsByEmail = new Map<string, Set<string>>();
    const settled = () => {
      eventsByEmail.clear();
      for (const hook of hooks.received) {
        const event = verifier.verify(hook.raw, {
          'webhook-id': String(hook.headers['webhook-id']),
          'webhook-timestamp': String(hook.headers['webhook-timestamp']),
          'webhook-signature': String(hook.headers['webhook-signature']),
        }) as { id: string; type: string; data: { email_id: string } };
        assert.equal(event.type, 'email.delivered');
        assert.equal(event.id, hook.headers['webhook-id']);
        const seen = eventsByEmail.get(event.data.email_id) ?? new Set();
        eventsByEmail.set(event.data.email_id, seen.add(event.id));
      }
      return [...ids].every((id) => eventsByEmail.has(id));
    };
    await waitFor(settled, 30_000, 200);
    for (const [emailId, events] of eventsByEmail) {
      assert.ok(ids.has(emailId), `a webhook for ${emailId}, which was never accepted`);
      assert.equal(events.size, 1, `${emailId} had ${events.size} distinct delivered events`);
    }

    // The workers listen for wake-ups again: their LISTEN connections are back.
    await waitFor(
      async () => {
        const client = new pg.Client({ connectionString: db.url });
        await client.connect();
        const { rows } = await client.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'LISTEN %'",
        );
        await client.end();
        return rows[0]!.n >= 2; // email delivery and webhook delivery
      },
      10_000,
      250,
    );
    assert.equal(server.child.exitCode, null, `the server exited:\n${server.output()}`);
    assert.doesNotMatch(server.output(), /unhandled error|uncaught/i);
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0);
  });
} else {
  test('the SMTP relay refusing connections: messages are deferred (in their timeline), then all delivered once it is back', async () => {
    const bed = await startRelayTestBed('relay-outage', {
      MAILROOM_DELIVERY_RETRY_SCHEDULE: Array(30).fill('1').join(','),
      MAILROOM_SMTP_TIMEOUT_MS: '2000',
    });
    const { t, org } = bed;
    let sink = bed.sink;
    try {
      const port = sink.port;
      const events = async (id: string) => {
        const res = await t.app.inject({ method: 'GET', url: `/emails/${id}/events`, headers: bearer(org.fullKey) });
        return (res.json() as { data: Array<{ type: string; data?: Record<string, unknown> }> }).data;
      };
      const before = (await send(t.app, org.fullKey, message(org, { subject: 'before' }))).json().id as string;
      await waitFor(() => sink.transactions.length === 1, 10_000);

      await sink.close();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await send(t.app, org.fullKey, message(org, { subject: `during-${i}`, to: `r${i}@example.com` }));
        assert.equal(res.statusCode, 200, res.body);
        ids.push(res.json().id as string);
      }
      // Each is deferred, at least twice, while nothing listens.
      await waitFor(
        async () => {
          for (const id of ids) {
            if ((await events(id)).filter((e) => e.type === 'delivery_delayed').length < 2) return false;
          }
          return true;
        },
        15_000,
        100,
      );
      const delayed = (await events(ids[0]!)).find((e) => e.type === 'delivery_delayed')!;
      assert.equal(delayed.data!.attempt, 1);
      assert.equal(typeof delayed.data!.next_attempt_at, 'string');

      sink = await startSmtpSink({ starttls: false, port });
      await waitFor(async () => {
        for (const id of ids) if (!(await events(id)).some((e) => e.type === 'delivered')) return false;
        return true;
      }, 15_000);
      const counts = subjectCounts(sink);
      for (let i = 0; i < 5; i++) assert.equal(counts.get(`during-${i}`), 1);
      assert.equal(counts.size, 5, 'nothing else went out');
      for (const id of [before, ...ids]) {
        const read = await t.app.inject({ method: 'GET', url: `/emails/${id}`, headers: bearer(org.fullKey) });
        assert.equal(read.json().last_event, 'delivered');
        const types = (await events(id)).map((e) => e.type);
        assert.equal(types.filter((type) => type === 'delivered').length, 1);
        if (id !== before) assert.ok(types.indexOf('delivery_delayed') < types.indexOf('delivered'));
      }
    } finally {
      await bed.close();
      if (sink !== bed.sink) await sink.close();
    }
  });
}
