import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const MAILROOM_BIN = fileURLToPath(new URL('../../bin/mailroom.ts', import.meta.url));

/** The longest a command may run in a test: every command of the tests takes seconds. */
const CLI_TIME_LIMIT_MS = 120_000;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed, for --json commands. */
  json: Record<string, unknown> | undefined;
}

/**
 * Runs `mailroom ARGS` in a child process with the given environment added to a clean one; `bin` is the
 * entry point of another checkout (an older release).
 */
export function runCli(
  args: string[],
  env: Record<string, string | undefined>,
  bin: string = MAILROOM_BIN,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, MAILROOM_LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    // A command that hangs fails its test (exit code null) instead of holding the test run open.
    const limit = setTimeout(() => child.kill('SIGKILL'), CLI_TIME_LIMIT_MS);
    child.on('close', (code) => {
      clearTimeout(limit);
      let json: Record<string, unknown> | undefined;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}
