// Wake-ups by LISTEN are an optimisation: every listener polls as well. Behind a pooler in transaction
// pooling mode (PgBouncer) a LISTEN would be lost with the server connection the pooler takes back at
// the end of the statement, so without a direct connection of its own the database does not listen at
// all, and its listeners rely on polling alone.
import type { Database } from './database.ts';

/** Listening is not available on this database handle: a transaction pooler and no direct connection for it. */
export class ListeningUnavailableError extends Error {
  override name = 'ListeningUnavailableError';
}

/**
 * db.listen, or when the database cannot listen, a listener that never hears anything: the caller's
 * polling alone finds the work. Any other failure (the database away) is the caller's.
 */
export async function listenOrPoll(
  db: Database,
  channel: string,
  onNotify: () => void,
  onLost?: () => void,
): Promise<() => Promise<void>> {
  try {
    return await db.listen(channel, onNotify, onLost);
  } catch (error) {
    if (error instanceof ListeningUnavailableError) return async () => {};
    throw error;
  }
}
