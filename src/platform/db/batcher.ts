import {
  isConnectionLost,
  waitedTooLong,
  type Database,
  type Queryable,
  type TransactionSettings,
} from './database.ts';

// Work on the database that arrives while the same work is in flight waits, and the next run takes all
// of it together: one transaction (one commit, one fsync) and multi-row statements for many callers.
// Under no load a batch is one item, run at once; under load a batch holds what arrived during the
// previous run, so the database counts batches, not items.
//
// One item must not fail its neighbours: when a batch fails, each of its items is run again alone, so
// only the one at fault fails. Not when the connection was lost (whether the commit went through is
// unknown) or the batch waited too long for a lock or a statement (each alone would only wait again):
// then every item of the batch gets the error, and its caller decides.

export interface BatcherOptions<T, R> {
  /**
   * Runs a batch, in one transaction (`db`) unless `transaction` is false (then `db` is `database`, the
   * handle the batcher belongs to); one result per item, in order.
   */
  run(db: Queryable, items: T[], database: Database): Promise<R[]>;
  /** Whether a batch runs inside a transaction (default true; false for a single statement). */
  transaction?: boolean;
  /** Settings of each batch's transaction (`SET LOCAL`), sent with its BEGIN. */
  settings?: TransactionSettings;

  /** A batch stops growing at this much `size` (default 1 per item) ... */
  maxSize: number;
  size?: (item: T) => number;
  /** ... or this much `bytes` (default no limit); the rest waits for the next batch. */
  maxBytes?: number;
  bytes?: (item: T) => number;
  /** Called with each done batch's item count (a metric). */
  done?: (items: number) => void;
}

interface Waiting<T, R> {
  item: T;
  resolve(result: R): void;
  reject(error: unknown): void;
}

/** One batcher per purpose and database handle: it runs one batch at a time and gathers the next. */
export class Batcher<T, R> {
  private readonly waiting: Array<Waiting<T, R>> = [];
  private writing = false;
  private readonly db: Database;
  private readonly options: BatcherOptions<T, R>;

  constructor(db: Database, options: BatcherOptions<T, R>) {
    this.db = db;
    this.options = options;
  }

  /** Resolves with the item's result once the batch that holds it is done (committed). */
  add(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      // Started after the items ready in this turn of the event loop have come in too.
      if (!this.writing) {
        this.writing = true;
        setImmediate(() => void this.runBatches());
      }
    });
  }

  private async runBatches(): Promise<void> {
    try {
      while (this.waiting.length > 0) await this.runBatch(this.nextBatch());
    } finally {
      this.writing = false;
    }
  }

  private nextBatch(): Array<Waiting<T, R>> {
    const { size = () => 1, bytes = () => 0, maxSize, maxBytes = Infinity } = this.options;
    let totalSize = 0;
    let totalBytes = 0;
    let count = 0;
    while (count < this.waiting.length) {
      const item = this.waiting[count]!.item;
      const itemSize = size(item);
      const itemBytes = bytes(item);
      if (count > 0 && (totalSize + itemSize > maxSize || totalBytes + itemBytes > maxBytes)) break;
      totalSize += itemSize;
      totalBytes += itemBytes;
      count += 1;
    }
    return this.waiting.splice(0, count);
  }

  private async runBatch(batch: Array<Waiting<T, R>>): Promise<void> {
    const items = batch.map((w) => w.item);
    try {
      const results =
        this.options.transaction === false
          ? await this.options.run(this.db, items, this.db)
          : await this.db.transaction((tx) => this.options.run(tx, items, this.db), this.options.settings);
      this.options.done?.(batch.length);
      batch.forEach((w, i) => w.resolve(results[i]!));
    } catch (error) {
      if (batch.length === 1 || !worthWritingAlone(error)) {
        for (const w of batch) w.reject(error);
        return;
      }
      for (const w of batch) await this.runBatch([w]);
    }
  }
}

/** Whether the items of a failed batch may be run again one by one (see the top of this file). */
export function worthWritingAlone(error: unknown): boolean {
  return !isConnectionLost(error) && !waitedTooLong(error);
}

/**
 * The batcher of these options for a database handle, made the first time it is asked for: one per
 * purpose and handle in a process, so every caller's items share its batches.
 */
export function batcherPerDatabase<T, R>(options: BatcherOptions<T, R>): (db: Database) => Batcher<T, R> {
  const batchers = new WeakMap<Database, Batcher<T, R>>();
  return (db) => {
    let batcher = batchers.get(db);
    if (!batcher) {
      batcher = new Batcher(db, options);
      batchers.set(db, batcher);
    }
    return batcher;
  };
}
