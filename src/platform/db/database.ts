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

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs fn in one transaction: committed when fn resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /**
   * Calls onNotify for each NOTIFY on the channel (from any process sharing the database) until the
   * returned function is called. Notifications can be lost (a dropped connection): listeners also poll.
   */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
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
