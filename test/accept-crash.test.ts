// An API process killed (SIGKILL) while group commits are in flight: every send it answered 200 is
// stored whole (recipients, timeline, delivery job: it is delivered after a restart), and nothing it
// answered with an error is stored. Sends still waiting for their commit got no answer at all.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { databaseForProcesses } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startServerProcess } from './helpers/server-process.ts';
import { waitFor } from './helpers/wait.ts';

const IN_FLIGHT = 30;
let env: Record<string, string>;
let cleanup: () => Promise<void>;
let key: string;

before(async () => {
  ({ env, cleanup } = await databaseForProcesses('accept-crash'));
  env.MAILROOM_TRANSPORT = 'capture';
  const cli = async (...args: string[]) => (await runCli([...args, '--json'], env)).json!;
  const org = await cli('org', 'create', '--name', 'Crash', '--rate-limit', '100000');
  await cli('domain', 'add', '--org', String(org.id), 'crash.example');
  await cli('domain', 'verify', '--org', String(org.id), 'crash.example', '--trust');
  key = String(
    (await cli('key', 'create', '--org', String(org.id), '--name', 'k', '--permission', 'full_access')).token,
  );
});
after(() => cleanup());

test('killed mid group commit: every send answered 200 is stored and delivered, none answered otherwise is', async () => {
  // The API alone: what it stored stays queued until the restarted process delivers it.
  const server = await startServerProcess(env, ['--role', 'api']);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const answered = new Map<string, string>(); // subject → id (200) or 'refused'
  let unanswered = 0;
  let sent = 0;
  let stop = false;

  async function sender(lane: number) {
    while (!stop) {
      const n = sent++;
      // One in five is refused before any commit (a domain the organization does not own).
      const refused = n % 5 === 4;
      const subject = `m${lane}-${n}`;
      try {
        const res = await fetch(`${server.base}/emails`, {
          method: 'POST',
          headers,
          body: JSON.stringify({
            from: refused ? 'x@not-ours.example' : 'Crash <ops@crash.example>',
            to: [`r${n}@example.com`, `s${n}@example.com`],
            subject,
            text: 'survive',
          }),
        });
        const body = (await res.json()) as { id?: string };
        if (res.status === 200) answered.set(subject, body.id!);
        else answered.set(subject, 'refused');
        assert.equal(res.status === 200, !refused, `${subject} answered ${res.status}`);
      } catch {
        unanswered += 1; // the process died before answering
        return;
      }
    }
  }

  const lanes = Array.from({ length: IN_FLIGHT }, (_, lane) => sender(lane));
  await waitFor(() => answered.size >= 200, 60_000, 10);
  server.child.kill('SIGKILL');
  stop = true;
  await server.exited;
  await Promise.all(lanes);
  assert.ok(unanswered > 0, 'no send was in flight at the kill; the test proves nothing');

  const accepted = [...answered].filter(([, id]) => id !== 'refused');
  const refusedSubjects = new Set([...answered].filter(([, id]) => id === 'refused').map(([subject]) => subject));
  const restarted = await startServerProcess(env);
  try {
    // Every message stored, answered or not, read back through the list (newest first, keyset pages).
    const stored = new Map<string, { id: string; last_event: string }>();
    let after: string | undefined;
    for (;;) {
      const res = await fetch(`${restarted.base}/emails?limit=100${after ? `&after=${after}` : ''}`, { headers });
      const page = (await res.json()) as {
        data: Array<{ id: string; subject: string; last_event: string }>;
        has_more: boolean;
      };
      for (const email of page.data) stored.set(email.subject, email);
      if (!page.has_more) break;
      after = page.data.at(-1)!.id;
    }
    for (const [subject, id] of accepted) assert.equal(stored.get(subject)?.id, id, `${subject} answered 200`);
    for (const subject of stored.keys()) assert.ok(!refusedSubjects.has(subject), `${subject} was refused`);
    // Stored whole: each has its delivery job, so each is delivered (capture) after the restart.
    await waitFor(
      async () => {
        let delivered = 0;
        for (const email of stored.values()) {
          const res = await fetch(`${restarted.base}/emails/${email.id}`, { headers });
          if (((await res.json()) as { last_event: string }).last_event === 'delivered') delivered += 1;
        }
        return delivered === stored.size;
      },
      60_000,
      500,
    );
  } finally {
    restarted.child.kill('SIGTERM');
    await restarted.exited;
  }
});
