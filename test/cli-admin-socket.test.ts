// The admin socket a server holding the embedded database answers CLI commands on, started directly and
// reached over real connections: a client that connects and never writes is disconnected after the read
// timeout and does not keep close() (the server's stop) waiting, while a command being run is waited for.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { access, mkdtemp, rm } from 'node:fs/promises';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { askServer, startAdminSocket } from '../src/cli/admin-socket.ts';
import type { CommandReply } from '../src/cli/command.ts';

let dir: string;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'mailroom-admin-socket-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const echo = async (argv: string[]): Promise<CommandReply> => ({
  ok: true,
  output: { json: { argv }, text: argv.join(' ') },
});

/** A connection that writes nothing, with what it received and a promise of its closing. */
async function idleClient(socketPath: string) {
  const socket: Socket = createConnection(socketPath);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, closed, received: () => received };
}

/** Resolves with how long the promise took, or rejects when it takes longer than `limitMs`. */
async function within<T>(promise: Promise<T>, limitMs: number, what: string): Promise<number> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${limitMs} ms`)), limitMs);
  });
  try {
    await Promise.race([promise, limit]);
    return performance.now() - started;
  } finally {
    clearTimeout(timer);
  }
}

test('a client that connects and writes nothing does not keep close() from finishing', async () => {
  // A read timeout far longer than the test: close() must not wait for it.
  const admin = await startAdminSocket(dir, echo, { readTimeoutMs: 60_000 });
  const client = await idleClient(admin.path);
  assert.deepEqual(await askServer(dir, ['org', 'list']), {
    ok: true,
    output: { json: { argv: ['org', 'list'] }, text: 'org list' },
  });

  await within(admin.close(), 2_000, 'close() with an idle client connected');
  await within(client.closed, 2_000, 'the idle connection closing');
  await assert.rejects(access(admin.path), { code: 'ENOENT' });
  assert.equal(await askServer(dir, ['org', 'list']), undefined, 'nobody listens once closed');
});

test('a client that sends no whole request in time gets an error line and is disconnected', async () => {
  const admin = await startAdminSocket(dir, echo, { readTimeoutMs: 200 });
  try {
    const client = await idleClient(admin.path);
    client.socket.write('{"argv": ["org"'); // part of a request, never finished
    const waited = await within(client.closed, 3_000, 'the idle connection closing');
    assert.ok(waited >= 150, `disconnected after ${waited} ms, before the timeout`);
    const reply = JSON.parse(client.received()) as CommandReply;
    assert.deepEqual(reply, {
      ok: false,
      code: 2,
      error: { name: 'usage', message: 'no whole request within 200 ms' },
    });
  } finally {
    await admin.close();
  }
});

test('close() waits for a command being run, whose reply still reaches its client', async () => {
  let finish!: () => void;
  const running = new Promise<void>((resolve) => (finish = resolve));
  let started!: () => void;
  const begun = new Promise<void>((resolve) => (started = resolve));
  const admin = await startAdminSocket(dir, async (argv) => {
    started();
    await running;
    return echo(argv);
  });
  const asked = askServer(dir, ['key', 'list']);
  await begun;
  let closed = false;
  const closing = admin.close().then(() => (closed = true));
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(closed, false, 'close() finished while a command was still running');
  finish();
  assert.deepEqual(await asked, { ok: true, output: { json: { argv: ['key', 'list'] }, text: 'key list' } });
  await within(closing, 2_000, 'close() once the command finished');
});
