// At most a few connections to one recipient domain at once, per process: receivers limit how many
// connections one sender may hold (and count more as a sign of abuse), so a burst to one domain is
// queued here rather than opened all at once. The limit is Postfix's default for one destination.

/** Connections to one recipient domain at once, per process (Postfix's default_destination_concurrency_limit). */
export const CONNECTIONS_PER_DOMAIN = 20;

export class DomainSlots {
  private readonly limit: number;
  private readonly inUse = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();

  constructor(limit = CONNECTIONS_PER_DOMAIN) {
    this.limit = limit;
  }

  /** Runs `task` once a slot of `domain` is free, and frees it when the task settles. */
  async run<T>(domain: string, task: () => Promise<T>): Promise<T> {
    await this.acquire(domain);
    try {
      return await task();
    } finally {
      this.release(domain);
    }
  }

  private acquire(domain: string): Promise<void> {
    const used = this.inUse.get(domain) ?? 0;
    if (used < this.limit) {
      this.inUse.set(domain, used + 1);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const queue = this.waiting.get(domain) ?? [];
      queue.push(resolve);
      this.waiting.set(domain, queue);
    });
  }

  private release(domain: string): void {
    const queue = this.waiting.get(domain);
    const next = queue?.shift();
    if (next) {
      if (queue!.length === 0) this.waiting.delete(domain);
      next(); // the slot passes straight to the next in line
      return;
    }
    const used = this.inUse.get(domain)! - 1;
    if (used === 0) this.inUse.delete(domain);
    else this.inUse.set(domain, used);
  }
}
