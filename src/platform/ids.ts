import { randomFillSync } from 'node:crypto';
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
  const random = randomBytes16();
  const now = Date.now();
  // Monotonic within this process, as the library's own state keeps it: a new millisecond starts a
  // random 31-bit sequence, ids of the same millisecond count up from it (past its end, into the next).
  if (now > v7State.msecs) {
    v7State.msecs = now;
    v7State.seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
  } else {
    v7State.seq = (v7State.seq + 1) | 0;
    if (v7State.seq === 0) v7State.msecs += 1;
  }
  return uuidv7({ random, msecs: v7State.msecs, seq: v7State.seq });
}

const v7State = { msecs: -Infinity, seq: 0 };

// Random bytes are drawn from the system 4 KiB at a time: the library asks for 16 per id, and a call
// into the system per id was 5% of the accept path's CPU.
const randomPool = Buffer.alloc(4096);
let randomOffset = randomPool.length;
function randomBytes16(): Uint8Array {
  if (randomOffset + 16 > randomPool.length) {
    randomFillSync(randomPool);
    randomOffset = 0;
  }
  const bytes = randomPool.subarray(randomOffset, randomOffset + 16);
  randomOffset += 16;
  return bytes;
}
