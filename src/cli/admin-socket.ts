// The embedded database (PGlite) can be opened by one process only. While `mailroom serve` holds it, the
// server listens on a Unix socket in the data directory, and a CLI command that finds the directory in
// use sends its command line there to be run by the server on its own open database. Who may connect is
// who may open the socket file: it is made readable and writable by its owner alone (mode 0600).
import { createConnection, createServer, type Socket } from 'node:net';
import { chmod, rm } from 'node:fs/promises';
import path from 'node:path';
import type { CommandReply } from './command.ts';

/** Where the socket of the server holding `dataDir` is. */
export const adminSocketPath = (dataDir: string) => path.join(path.resolve(dataDir), 'admin.sock');

// A command line is short: a request larger than this is not one.
const MAX_REQUEST_BYTES = 1024 * 1024;

/** Reads one newline-ended JSON value from a connection, failing after `timeoutMs` when one is given. */
function readMessage(socket: Socket, timeoutMs?: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let received = '';
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            socket.off('data', onData);
            reject(new Error(`no whole request within ${timeoutMs} ms`));
          }, timeoutMs);
    const settle = () => {
      clearTimeout(timer);
      socket.off('data', onData);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.toString('utf8');
      const end = received.indexOf('\n');
      if (end >= 0) {
        settle();
        try {
          resolve(JSON.parse(received.slice(0, end)));
        } catch (error) {
          reject(error as Error);
        }
      } else if (received.length > MAX_REQUEST_BYTES) {
        settle();
        reject(new Error('message too large'));
      }
    };
    socket.on('data', onData);
    socket.once('error', (error) => {
      settle();
      reject(error);
    });
    // 'close' covers a connection destroyed on this side too, which ends no stream but must stop the timer.
    for (const event of ['end', 'close']) {
      socket.once(event, () => {
        settle();
        reject(new Error('connection closed before a whole message'));
      });
    }
  });
}

/**
 * Listens on `<dataDir>/admin.sock` (a socket left by a server that died is replaced: the caller holds the
 * data directory's lock) and answers each connection's `{ argv }` with `run(argv)`'s reply. A client that
 * has not sent its whole request within `readTimeoutMs` (10 s unless given) gets an error line and is
 * disconnected, and close() does not wait for such clients: a connection that never writes cannot keep
 * the server from stopping.
 */
export async function startAdminSocket(
  dataDir: string,
  run: (argv: string[]) => Promise<CommandReply>,
  { readTimeoutMs = 10_000 }: { readTimeoutMs?: number } = {},
): Promise<{ path: string; close(): Promise<void> }> {
  const socketPath = adminSocketPath(dataDir);
  await rm(socketPath, { force: true });
  // Each open connection, and whether it is busy: its command being run, or its reply being sent.
  const connections = new Map<Socket, { busy: boolean }>();
  let closing = false;
  // The reply is the connection's last word: once sent, the connection is done with, whatever the client
  // does; a client that stops reading it is let go once the reply has not moved for `readTimeoutMs`.
  const answer = (socket: Socket, state: { busy: boolean }, reply: CommandReply) => {
    state.busy = true;
    socket.setTimeout(readTimeoutMs, () => socket.destroy());
    socket.end(`${JSON.stringify(reply)}\n`, () => socket.destroy());
  };
  const server = createServer((socket) => {
    socket.on('error', () => {}); // a client that went away has nobody to tell
    const state = { busy: false };
    connections.set(socket, state);
    socket.once('close', () => connections.delete(socket));
    readMessage(socket, readTimeoutMs)
      .then(async (request) => {
        const argv = (request as { argv?: unknown }).argv;
        if (!Array.isArray(argv) || !argv.every((arg) => typeof arg === 'string')) {
          answer(socket, state, {
            ok: false,
            code: 2,
            error: { name: 'usage', message: 'expected { "argv": [strings] }' },
          });
          return;
        }
        if (closing) {
          answer(socket, state, { ok: false, code: 1, error: { name: 'error', message: 'the server is stopping' } });
          return;
        }
        state.busy = true;
        answer(socket, state, await run(argv));
      })
      .catch((error: Error) => {
        answer(socket, state, { ok: false, code: 2, error: { name: 'usage', message: error.message } });
      });
  });
  // Created owner-only from the start (the umask covers the moment between bind and chmod).
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    });
  } finally {
    process.umask(umask);
  }
  await chmod(socketPath, 0o600);
  return {
    path: socketPath,
    async close() {
      // Waits for the commands being run (the database closes after this) and their replies, not for clients
      // yet to send one.
      closing = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const [socket, state] of connections) if (!state.busy) socket.destroy();
      await closed;
      await rm(socketPath, { force: true });
    },
  };
}

/**
 * Sends a command line to the server holding `dataDir` and returns its reply, or undefined when no server
 * listens there (no socket, or one left by a server that is gone).
 */
export function askServer(dataDir: string, argv: string[]): Promise<CommandReply | undefined> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(adminSocketPath(dataDir));
    socket.once('connect', () => {
      socket.write(`${JSON.stringify({ argv })}\n`);
      readMessage(socket).then((reply) => resolve(reply as CommandReply), reject);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'ECONNREFUSED') resolve(undefined);
      else reject(error);
    });
  });
}
