// Large-attachment benchmark: one POST /emails carrying a 29 MiB attachment (the largest that fits the
// default 40 MiB body once base64-encoded), timed to its answer and to its delivery at a loopback SMTP
// sink, with the server's peak memory; then SENDS of them in a row, to see that memory does not grow with
// the number of sends. Beside it, a bare Fastify process that does the least any server must with the
// same body (parse the JSON, decode the base64) and answers: the ratio of the two accept times and of the
// two peak memories is printed.
//
//   node bench/large-attachment.ts                                  # embedded PGlite
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/large-attachment.ts
//
// SENDS (default 8) may be set. Memory is read from /proc/<pid>/status: VmHWM (the peak resident set
// since the process started) and VmRSS (resident now), so it runs on Linux.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { finished } from 'node:stream';
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../src/platform/config.ts';
import type { Database } from '../src/platform/db/database.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { openPGliteDirectory } from '../src/platform/db/pglite.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { freePort, startServerProcess, type ServerProcess } from '../test/helpers/server-process.ts';

const MiB = 1024 * 1024;
const SENDS = Number(process.env.SENDS ?? 8);
const BODY_LIMIT = 40 * MiB;

/** The baseline child: a bare Fastify route that parses the body and decodes its attachment. */
async function bare() {
  const { default: Fastify } = await import('fastify');
  const app = Fastify({ bodyLimit: BODY_LIMIT });
  app.post('/emails', async (request) => {
    const body = request.body as { attachments: Array<{ content: string }> };
    const bytes = body.attachments.reduce((sum, a) => sum + Buffer.from(a.content, 'base64').length, 0);
    return { object: 'email', bytes };
  });
  const port = await freePort();
  await app.listen({ port, host: '127.0.0.1' });
  process.stdout.write(`${JSON.stringify({ base: `http://127.0.0.1:${port}` })}\n`);
}

interface Memory {
  peak: number;
  now: number;
}

async function memoryOf(pid: number): Promise<Memory> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { peak: kib('VmHWM'), now: kib('VmRSS') };
}

const mib = (bytes: number) => (bytes / MiB).toFixed(0);

async function run() {
  const content = randomBytes(29 * MiB);
  const digest = createHash('sha256').update(content).digest('hex');

  // The sink: reads each message whole and checks that the attachment arrived byte-equal. Each message
  // lets the send waiting for it go on, a message that does not parse too (counted as corrupted, and
  // accepted, so that it is not sent again): otherwise the benchmark would wait for it for ever.
  const { simpleParser } = await import('mailparser');
  const delivered: Array<() => void> = [];
  let corrupted = 0;
  const sink = new SMTPServer({
    authOptional: true,
    disableReverseLookup: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    size: 64 * MiB,
    onData(stream, _session, callback) {
      const received = (intact: boolean) => {
        if (!intact) corrupted += 1;
        callback();
        delivered.shift()?.();
      };
      simpleParser(stream).then(
        (mail) => {
          const attachment = mail.attachments[0]?.content;
          received(attachment !== undefined && createHash('sha256').update(attachment).digest('hex') === digest);
        },
        () => {
          // The rest of the message is read before the answer, which must come after its end (or the
          // stream's failure).
          finished(stream, () => received(false));
          stream.resume();
        },
      );
    },
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const sinkPort = (sink.server.address() as { port: number }).port;

  // Mailroom: a fresh database with one organization, a real `mailroom serve` relaying to the sink. A
  // failure on the way leaves neither the server process nor the database behind.
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-bench-large-'));
  let created: Awaited<ReturnType<typeof createPostgresDatabase>> | undefined;
  let server: ServerProcess | undefined;
  let body: string;
  let before: Memory;
  const rows: Array<{ accept: number; deliver: number; peak: number; now: number }> = [];
  try {
    created = process.env.DATABASE_URL ? await createPostgresDatabase() : undefined;
    const storage: Record<string, string> = created ? { DATABASE_URL: created.url } : { MAILROOM_DATA_DIR: dataDir };
    const config = loadConfig({ ...storage, MAILROOM_LOG_LEVEL: 'silent' });
    const db: Database = created ? openPostgres(created.url, 2) : await openPGliteDirectory(dataDir);
    await migrate(db);
    const org = await createTestOrganization(db, config, 'large');
    await db.close();
    server = await startServerProcess({
      ...storage,
      MAILROOM_TRANSPORT: 'smtp',
      MAILROOM_SMTP_URL: `smtp://127.0.0.1:${sinkPort}`,
    });
    body = JSON.stringify({
      from: `Files <files@${org.domain}>`,
      to: 'someone@example.com',
      subject: 'The file',
      text: 'Attached.',
      attachments: [{ filename: 'large.bin', content: content.toString('base64') }],
    });
    console.log(`request body ${(body.length / MiB).toFixed(1)} MiB (attachment 29 MiB); ${SENDS} sends in a row`);

    before = await memoryOf(server.child.pid!);
    for (let i = 0; i < SENDS; i++) {
      const arrived = new Promise<void>((resolve) => delivered.push(resolve));
      const started = performance.now();
      const res = await fetch(`${server.base}/emails`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.sendingKey}`, 'content-type': 'application/json' },
        body,
      });
      if (res.status !== 200) throw new Error(`POST /emails answered ${res.status}: ${await res.text()}`);
      const accept = performance.now() - started;
      await arrived;
      const deliver = performance.now() - started;
      rows.push({ accept, deliver, ...(await memoryOf(server.child.pid!)) });
    }
  } finally {
    server?.child.kill('SIGTERM'); // no-op once it has exited
    await server?.exited;
    sink.close();
    await created?.drop();
    await rm(dataDir, { recursive: true, force: true });
  }

  // The baseline, with the same body, as many times.
  const child = spawn(process.execPath, [new URL(import.meta.url).pathname, 'bare'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const bareAccepts: number[] = [];
  let bareBefore: Memory;
  let bareMemory: Memory;
  try {
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const { base } = JSON.parse((await lines.next()).value as string) as { base: string };
    bareBefore = await memoryOf(child.pid!);
    for (let i = 0; i < SENDS; i++) {
      const started = performance.now();
      const res = await fetch(`${base}/emails`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      if (res.status !== 200) throw new Error(`bare Fastify answered ${res.status}`);
      await res.arrayBuffer();
      bareAccepts.push(performance.now() - started);
    }
    bareMemory = await memoryOf(child.pid!);
  } finally {
    child.kill();
  }

  console.log('send  accept ms  delivered ms  peak RSS MiB  RSS now MiB');
  for (const [i, row] of rows.entries()) {
    console.log(
      `${String(i + 1).padStart(4)}  ${row.accept.toFixed(0).padStart(9)}  ${row.deliver.toFixed(0).padStart(12)}  ${mib(row.peak).padStart(12)}  ${mib(row.now).padStart(11)}`,
    );
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const mailroomAccept = median(rows.map((r) => r.accept));
  const bareAccept = median(bareAccepts);
  const first = rows[0]!;
  const last = rows.at(-1)!;
  console.log(`Mailroom before the first send: RSS ${mib(before.now)} MiB`);
  console.log(
    `Mailroom: accept median ${mailroomAccept.toFixed(0)} ms, delivered median ${median(rows.map((r) => r.deliver)).toFixed(0)} ms; ` +
      `peak RSS after 1 send ${mib(first.peak)} MiB, after ${SENDS} ${mib(last.peak)} MiB (growth ${mib(last.peak - first.peak)} MiB); ` +
      `attachments corrupted: ${corrupted}`,
  );
  console.log(
    `bare Fastify: accept median ${bareAccept.toFixed(0)} ms; RSS before ${mib(bareBefore.now)} MiB, peak ${mib(bareMemory.peak)} MiB`,
  );
  console.log(
    `ratio: bare accept time / Mailroom accept time ${(bareAccept / mailroomAccept).toFixed(3)}; ` +
      `Mailroom peak / bare peak ${(last.peak / bareMemory.peak).toFixed(2)}`,
  );
  if (corrupted > 0) process.exitCode = 1;
}

if (process.argv[2] === 'bare') await bare();
else await run();
