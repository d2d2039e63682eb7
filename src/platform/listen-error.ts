// A port that cannot be bound is the most common way a start fails: it is said in one plain line that
// names the address and the setting that chooses it, not as a stack trace.

/** A start-up failure the operator can act on; its message is the whole story. */
export class StartupError extends Error {
  override name = 'StartupError';
}

export interface ListenTarget {
  /** What listens there, in words ("the HTTP API"). */
  what: string;
  host: string;
  port: number;
  /** The environment variable that chooses the port. */
  setting: string;
}

/** A failure to bind as a StartupError naming the address and the setting; any other error as it is. */
export function explainListenError(error: unknown, where: ListenTarget): unknown {
  const reason = BIND_FAILURES[(error as NodeJS.ErrnoException).code ?? ''];
  if (!reason) return error;
  const address = `${where.host.includes(':') ? `[${where.host}]` : where.host}:${where.port}`;
  return new StartupError(`cannot listen on ${address} (${where.what}): ${reason(where.setting)}`);
}

/** Runs `listen`, explaining a failure to bind (explainListenError). */
export async function listenOrExplain<T>(where: ListenTarget, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (error) {
    throw explainListenError(error, where);
  }
}

const BIND_FAILURES: Record<string, (setting: string) => string> = {
  EADDRINUSE: (setting) => `the port is already in use; stop what uses it, or set ${setting} to another port`,
  EACCES: (setting) => `permission denied (ports below 1024 need privileges); set ${setting} to a port above 1023`,
  EADDRNOTAVAIL: () => 'the address is not one of this machine; set HOST to one of its addresses',
};
