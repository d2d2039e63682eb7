import type { RecipientResult } from '../transport.ts';

// At most a few connections to one destination at once, per process: receivers limit how many
// connections one sender may hold (and count more as a sign of abuse), so a burst to one domain (or to
// the relay) is queued here rather than opened all at once. A message does not wait in that queue for
// long: past MAX_WAIT_MS it is given up on for now (its recipients deferred and tried again later), so
// waiting cannot eat the job's lease, after which another worker would send the message too.

/** Connections to one recipient domain at once, per process (Postfix's default_destination_concurrency_limit). */
export const CONNECTIONS_PER_DOMAIN = 20;
/** How long a message waits for a free connection before its recipients are deferred. */
export const MAX_WAIT_MS = 60_000;

/** Thrown by ConnectionSlots.run when no slot came free in time; the task was not run. */
export class NoFreeSlot extends Error {
  constructor(destination: string, limit: number, waitedMs: number) {
    super(
      `4.4.5 Not sent yet: all ${limit} connections to ${destination} were busy for ${Math.round(waitedMs / 1000)} s; tried again later`,
    );
  }
}

interface Waiter {
  resolve(): void;
  timer: NodeJS.Timeout;
}

export class ConnectionSlots {
  private readonly limit: number;
  private readonly maxWaitMs: number;
  private readonly inUse = new Map<string, number>();
  private readonly waiting = new Map<string, Waiter[]>();

  constructor(limit = CONNECTIONS_PER_DOMAIN, maxWaitMs = MAX_WAIT_MS) {
    this.limit = limit;
    this.maxWaitMs = maxWaitMs;
  }

  /** Runs `task` once a slot of `destination` is free (or throws NoFreeSlot), and frees it after. */
  async run<T>(destination: string, task: () => Promise<T>): Promise<T> {
    await this.acquire(destination);
    try {
      return await task();
    } finally {
      this.release(destination);
    }
  }

  private acquire(destination: string): Promise<void> {
    const used = this.inUse.get(destination) ?? 0;
    if (used < this.limit) {
      this.inUse.set(destination, used + 1);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const queue = this.waiting.get(destination) ?? [];
      const waiter: Waiter = {
        resolve,
        timer: setTimeout(() => {
          queue.splice(queue.indexOf(waiter), 1);
          if (queue.length === 0) this.waiting.delete(destination);
          reject(new NoFreeSlot(destination, this.limit, this.maxWaitMs));
        }, this.maxWaitMs),
      };
      queue.push(waiter);
      this.waiting.set(destination, queue);
    });
  }

  private release(destination: string): void {
    const queue = this.waiting.get(destination);
    const next = queue?.shift();
    if (next) {
      if (queue!.length === 0) this.waiting.delete(destination);
      clearTimeout(next.timer);
      next.resolve(); // the slot passes straight to the next in line
      return;
    }
    const used = this.inUse.get(destination)! - 1;
    if (used === 0) this.inUse.delete(destination);
    else this.inUse.set(destination, used);
  }
}

/** The outcome of recipients whose message found no free connection in time: deferred, not sent. */
export function deferredForNoSlot(recipients: string[], error: NoFreeSlot): RecipientResult[] {
  return recipients.map((address) => ({ address, outcome: 'deferred', smtpCode: undefined, response: error.message }));
}
