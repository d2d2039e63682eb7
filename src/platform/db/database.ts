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

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs fn in one transaction: committed when fn resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /**
   * Calls onNotify for each NOTIFY on the channel (from any process sharing the database) until the
   * returned function is called. Notifications can be lost (a dropped connection): listeners also poll.
   */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  /** The connection pool's use (PostgreSQL); undefined where there is no pool (PGlite). */
  poolStats?(): { total: number; idle: number; waiting: number } | undefined;
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
