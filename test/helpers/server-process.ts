import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { MAILROOM_BIN } from './cli.ts';

export interface ServerProcess {
  child: ChildProcess;
  base: string;
  output(): string;
  exited: Promise<number | null>;
}

// Ports already handed out by this process. The kernel may hand the same just-closed port to the next
// listen(0), so two freePort() calls in a row (an HTTP port and an SMTP port for one server) could collide.
const handedOut = new Set<number>();

/** A loopback port nobody listens on, never one this process has handed out before. */
export async function freePort(): Promise<number> {
  for (;;) {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/**
 * `mailroom serve ARGS` in a child process with the given environment; resolves once it has started.
 * `bin` is the entry point of another checkout (an older release).
 */
export async function startServerProcess(
  env: Record<string, string>,
  args: string[] = [],
  bin: string = MAILROOM_BIN,
): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [bin, 'serve', ...args], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: String(port),
      MAILROOM_LOG_LEVEL: 'info',
      // Test servers run side by side: the embedded default's fixed submission port is asked for explicitly.
      MAILROOM_SUBMISSION_PORT: 'off',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 30_000;
  while (!output.includes('mailroom started')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL'); // not left running behind a failed test or benchmark
      throw new Error(`server did not start:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, base: `http://127.0.0.1:${port}`, output: () => output, exited };
}

/** The server's log without its info lines, each line cut short, the last `chars` characters: what a failed test shows. */
export function logTail(server: ServerProcess, chars: number): string {
  return server
    .output()
    .split('\n')
    .filter((line) => !line.startsWith('{"level":30'))
    .map((line) => line.slice(0, 400))
    .join('\n')
    .slice(-chars);
}
