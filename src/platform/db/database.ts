// The narrow seam every domain talks to: plain SQL in, plain rows out. Two implementations, node-postgres
// and PGlite, run the same SQL; nothing above this file knows which one it has.

export interface QueryResult<Row> {
  rows: Row[];
  rowCount: number;
}

export interface Queryable {
  query<Row = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<Row>>;
}

export interface Transaction extends Queryable {
  /** Runs a script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

/**
 * A statement that other processes should hear about once it commits (it queued work) carries this tag
 * in its text. The seam sends `NOTIFY <channel>` after the commit: right after the statement outside a
 * transaction, after COMMIT inside one, never after a rollback. Sending it inside the transaction would
 * serialise the commits of every notifying transaction (PostgreSQL takes a global lock for them).
 */
export function notifyAfterCommitTag(channel: string): string {
  if (!/^[a-z_]+$/.test(channel)) throw new Error(`Invalid channel name ${channel}`);
  return `/* notify-after-commit: ${channel} */`;
}

const NOTIFY_TAG = /\/\* notify-after-commit: ([a-z_]+) \*\//g;

/** The channels a statement's text asks to notify after its commit. */
export function channelsToNotify(text: string): string[] {
  if (!text.includes('notify-after-commit')) return [];
  return [...text.matchAll(NOTIFY_TAG)].map((match) => match[1]!);
}

/**
 * Sends notifications without payload, at most one per channel every 20 ms per process: a listener that
 * wakes looks for all its work anyway, so one notification stands for all those in between.
 */
export function coalescingNotifier(send: (channel: string) => Promise<unknown>): (channel: string) => void {
  const INTERVAL_MS = 20;
  const state = new Map<string, { at: number; pending: boolean }>();
  return (channel) => {
    const entry = state.get(channel) ?? { at: 0, pending: false };
    state.set(channel, entry);
    if (entry.pending) return;
    entry.pending = true;
    setTimeout(
      () => {
        entry.pending = false;
        entry.at = Date.now();
        send(channel).catch(() => {}); // listeners poll as well: a lost notification costs one interval
      },
      Math.max(0, entry.at + INTERVAL_MS - Date.now()),
    ).unref();
  };
}

/** Settings for one transaction only (`SET LOCAL`), e.g. `{ lock_timeout: '5s' }`. */
export type TransactionSettings = Readonly<Record<string, string>>;

/** The `SET LOCAL` statements of `settings`: names and values are checked, never quoted into SQL blindly. */
export function setLocalStatements(settings: TransactionSettings): string {
  return Object.entries(settings)
    .map(([name, value]) => {
      if (!/^[a-z_]+$/.test(name) || !/^[a-z0-9]+$/i.test(value)) throw new Error(`Invalid setting ${name}=${value}`);
      return `SET LOCAL ${name} = '${value}';`;
    })
    .join(' ');
}

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /**
   * Runs fn in one transaction: committed when fn resolves, rolled back when it throws. `settings` hold
   * for this transaction only, and go to the database with its BEGIN (no round trip of their own).
   */
  transaction<T>(fn: (tx: Transaction) => Promise<T>, settings?: TransactionSettings): Promise<T>;
  /**
   * Calls onNotify for each NOTIFY on the channel (from any process sharing the database) until the
   * returned function is called. Notifications can be lost (a dropped connection): listeners also poll.
   * When the listening connection drops, onLost is called; once it is back, onNotify is called (the
   * notifications sent meanwhile are lost). Rejects with ListeningUnavailableError where nothing can
   * listen (behind a transaction pooler with no direct connection): listenOrPoll then leaves it to polls.
   */
  listen(channel: string, onNotify: () => void, onLost?: () => void): Promise<() => Promise<void>>;
  /** The connection pool's use (PostgreSQL); undefined where there is no pool (PGlite). */
  poolStats?(): { total: number; idle: number; waiting: number } | undefined;
  /**
   * The embedded database's files as a gzipped tarball, taken between transactions after a checkpoint
   * (PGlite only: PostgreSQL has pg_dump and base backups).
   */
  dumpDataDir?(): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** SQLSTATE of a unique-constraint violation, the same on both engines. */
export const UNIQUE_VIOLATION = '23505';
/** SQLSTATE of a foreign-key violation (a row referenced was deleted meanwhile). */
export const FOREIGN_KEY_VIOLATION = '23503';

const sqlState = (error: unknown) =>
  typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;

export function isUniqueViolation(error: unknown): boolean {
  return sqlState(error) === UNIQUE_VIOLATION;
}

export function isForeignKeyViolation(error: unknown): boolean {
  return sqlState(error) === FOREIGN_KEY_VIOLATION;
}

// SQLSTATEs of a server that is going away or not there yet: 57P01 admin_shutdown (a fast or immediate
// stop), 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up or shutting down), class 08
// (connection exceptions; 08P01 too, which PgBouncer answers when it refuses a client), and 25P03, the
// session ended for sitting idle in a transaction (its client fell silent, as behind a cut link), and
// 25006, a write refused by a server that is read-only: a primary demoted to a standby is no primary to
// write to, the same outage as one gone (its connection is dropped, and the next one looks for the new
// primary).
const CONNECTION_LOST_STATES = /^(57P0[123]|08[0-9A-Z]{3}|25P03|25006)$/;
// Node's codes for a connection that could not be made or was cut.
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);
// node-postgres and its pool say so in words only: a connection that ended, could not be had in time, or
// whose answer did not come back in time (lost on the way: the connection is dropped).
const CONNECTION_LOST_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable|Query read timeout)/;

/**
 * Whether an error says the database could not be reached or the connection was lost: the statement
 * did not run, or (a lost COMMIT) it is unknown whether it did. Such an error is the database's outage,
 * not the request's fault; the same request may succeed once the database is back.
 */
export function isConnectionLost(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message, errors } = error as { code?: unknown; message?: unknown; errors?: unknown };
  if (typeof code === 'string' && (CONNECTION_LOST_STATES.test(code) || NETWORK_CODES.has(code))) return true;
  if (typeof message === 'string' && CONNECTION_LOST_MESSAGES.test(message)) return true;
  // A host name with several addresses, each refused, gives an AggregateError of them.
  return Array.isArray(errors) && errors.length > 0 && errors.every(isConnectionLost);
}

/**
 * Whether a statement gave up waiting: lock_not_available (lock_timeout) or query_canceled
 * (statement_timeout). The database is busy, not broken; the same request may succeed a moment later.
 */
export function waitedTooLong(error: unknown): boolean {
  const code = sqlState(error);
  return code === '55P03' || code === '57014';
}

/**
 * Runs fn, and runs it again every `everyMs` while it fails because the database is unreachable, as long
 * as a try started now would end before `deadline` (epoch ms): the last try starts `reserveMs` before it,
 * room for a connection attempt (MAILROOM_DB_CONNECT_TIMEOUT_MS, 5 s by default) and the statements (a job's lease: past it another worker may take the
 * job, so a try still running then could record what the other worker is redoing). For work that must be written down once done (a message sent, a job
 * finished): waiting out a short outage beats doing the work again. `again` tells fn that an earlier
 * try may have committed after all (its COMMIT was cut off).
 */
export async function retryWhileUnreachable<T>(
  fn: (again: boolean) => Promise<T>,
  deadline: number,
  everyMs = 500,
  reserveMs = 6_000,
): Promise<T> {
  for (let again = false; ; again = true) {
    try {
      return await fn(again);
    } catch (error) {
      if (!isConnectionLost(error) || Date.now() + everyMs + reserveMs > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  }
}
