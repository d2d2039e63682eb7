import { v7 as uuidv7 } from 'uuid';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether a path or body value can be an id at all: anything else names nothing (404) without a query. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/**
 * A new id for a row that is written often and kept long (messages, timeline entries): a UUID whose
 * first bits are the time (version 7), so new rows land at the right-hand edge of every index keyed by
 * it instead of on a random page of a large index. With millions of messages stored, random UUIDs
 * had each accepted message dirty five random index pages (each written whole to the WAL after a
 * checkpoint); time-ordered ones touch the same few pages. The time it shows is the row's creation,
 * which the API shows anyway.
 */
export function newRowId(): string {
  return uuidv7();
}
