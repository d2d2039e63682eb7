import type { Database } from '../platform/db/database.ts';
import { takeToken, type SiteKey } from './destination-store.ts';
import { idOf } from './connection-pool.ts';
import { held, type Held } from './shaper-types.ts';

// A site's message rate, as one process keeps to it: its messages take turns in the site's bucket (in
// the database, shared by every process), and the process counts what it started there lately, the
// pace a rate throttle is measured against.

/** The window over which a process counts the messages it started to a site: a rate throttle's "now". */
const SENDING_WINDOW_MS = 1_000;

export interface PaceOptions {
  db: Database;
  now: () => Date;
  /** The time the bucket is counted in (undefined: the database's). */
  bucketNow: () => Date | undefined;
  maxInlineWaitMs: number;
}

export function createPace(options: PaceOptions) {
  const { db, now, bucketNow, maxInlineWaitMs } = options;
  /** Per site, when this process started its messages there within the last SENDING_WINDOW_MS. */
  const started = new Map<string, number[]>();
  const noteStart = (key: SiteKey) => {
    const at = now().getTime();
    const times = (started.get(idOf(key)) ?? []).filter((time) => at - time < SENDING_WINDOW_MS);
    times.push(at);
    started.set(idOf(key), times);
  };
  /** The rate this process was sending to the site at, as messages a minute (at least the one answered). */
  const sendingPerMinute = (key: SiteKey) => {
    const at = now().getTime();
    const recent = (started.get(idOf(key)) ?? []).filter((time) => at - time < SENDING_WINDOW_MS).length;
    return (Math.max(1, recent) * 60_000) / SENDING_WINDOW_MS;
  };
  /** Per site, this process's messages waiting for the site's pace: how many, and the last one's turn to ask. */
  const paceLines = new Map<string, { waiting: number; tail: Promise<void> }>();

  /**
   * Books the message's turn in the site's pace. The messages of this process waiting for a site's pace
   * stand in one line and ask the database one at a time (one statement a turn, not one per waiting
   * message); each books the next turn within maxInlineWaitMs and waits for it here. A message that
   * would stand behind more than maxInlineWaitMs of turns goes back to the queue for about that long
   * (quietly: it is the site's pace, not a throttle), so a slow site does not take every worker slot.
   */
  async function waitForTurn(key: SiteKey, messageRate: number): Promise<Held | undefined> {
    let line = paceLines.get(idOf(key));
    if (!line) paceLines.set(idOf(key), (line = { waiting: 0, tail: Promise.resolve() }));
    const turnMs = 60_000 / messageRate;
    const rule = `at most ${Math.round(messageRate)} messages a minute to ${key.site}`;
    const behind = line.waiting * turnMs;
    if (behind > maxInlineWaitMs) {
      const until = new Date(now().getTime() + behind + Math.random() * turnMs);
      return { ...held(until, 'throttled', rule), quiet: true };
    }
    line.waiting += 1;
    const previous = line.tail;
    let leave!: () => void;
    line.tail = new Promise<void>((resolve) => (leave = resolve));
    let inLine = true;
    const stepOut = () => {
      if (!inLine) return;
      inLine = false;
      line.waiting -= 1;
      leave();
    };
    try {
      await previous;
      for (;;) {
        const turn = await takeToken(db, key, 'message', bucketNow(), maxInlineWaitMs);
        if (turn.taken) {
          stepOut(); // the next in line may book the turn after this one
          if (turn.waitMs > 0) await new Promise((resolve) => setTimeout(resolve, turn.waitMs));
          return undefined;
        }
        if (turn.waitMs > maxInlineWaitMs) {
          return { ...held(new Date(now().getTime() + turn.waitMs), 'throttled', rule), quiet: true };
        }
        await new Promise((resolve) => setTimeout(resolve, turn.waitMs));
      }
    } finally {
      stepOut();
    }
  }

  return { waitForTurn, noteStart, sendingPerMinute };
}
