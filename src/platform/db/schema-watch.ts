// A running process checks that it still serves the database's schema: when a contract migration it does
// not know is applied (by `mailroom migrate --contract` of a later release), its code may read or write
// what is gone, so it must stop. It checks on the notification the migration sends, and every minute in
// case the notification was lost.
import type { Database } from './database.ts';
import { listenOrPoll } from './listening.ts';
import { checkSchemaServed, loadMigrations, SCHEMA_CHANNEL, SchemaTooNewError } from './migrate.ts';

const POLL_MS = 60_000;

/** Calls onTooNew (once) when the schema is found past this release; the returned stop() ends the watch. */
export async function watchSchema(
  db: Database,
  onTooNew: (error: SchemaTooNewError) => void,
): Promise<{ stop(): Promise<void> }> {
  const known = await loadMigrations();
  let done = false;
  const check = async () => {
    if (done) return;
    try {
      await checkSchemaServed(db, known);
    } catch (error) {
      // Any other failure (the database away) is for the next look.
      if (!(error instanceof SchemaTooNewError) || done) return;
      done = true;
      onTooNew(error);
    }
  };
  // A LISTEN that cannot be made now (the database away) leaves the minute's look to find a change.
  const unlisten = await listenOrPoll(db, SCHEMA_CHANNEL, () => void check()).catch(() => async () => {});
  const timer = setInterval(() => void check(), POLL_MS);
  timer.unref();
  // A migration notified before the LISTEN was in place is seen at once, not a minute later.
  void check();
  return {
    async stop() {
      done = true;
      clearInterval(timer);
      await unlisten().catch(() => {});
    },
  };
}
