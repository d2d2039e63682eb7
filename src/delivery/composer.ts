import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { composeMessage } from './compose.ts';
import type { OutgoingMessage } from './transport.ts';

// Composing a message and DKIM-signing it (an RSA signature) is about a quarter of a delivery worker's
// time, all of it on the processor. Where there are cores to spare, threads do it, so the event loop
// that runs the SMTP conversations and the database's bookkeeping does not wait behind signatures. The
// threads run the very composeMessage the event loop would (compose-thread.ts); the bytes come back.

export interface Composer {
  /** The message as it goes on the wire (composeMessage). */
  compose(message: OutgoingMessage): Promise<Buffer>;
  close(): Promise<void>;
}

/** Composes on the caller's own thread. */
export const composeInline: Composer = { compose: composeMessage, close: async () => {} };

/** Threads when MAILROOM_COMPOSE_THREADS is unset: the cores beyond the event loop's, at most 4. */
export function defaultComposeThreads(): number {
  return Math.max(0, Math.min(4, availableParallelism() - 1));
}

/** A composer with `threads` threads (none: composeInline). */
export function createComposer(threads: number): Composer {
  return threads > 0 ? new ComposeThreads(threads) : composeInline;
}

/** What a compose thread answers: the message's bytes, or why it could not be composed. */
export type ComposeAnswer = { id: number; raw: Uint8Array } | { id: number; error: string };

interface Thread {
  worker: Worker;
  waiting: Map<number, { resolve(raw: Buffer): void; reject(error: Error): void }>;
}

class ComposeThreads implements Composer {
  private readonly threads: Thread[] = [];
  private lastId = 0;
  private closed = false;

  constructor(count: number) {
    for (let i = 0; i < count; i++) this.threads.push(this.start());
  }

  compose(message: OutgoingMessage): Promise<Buffer> {
    if (this.closed) return Promise.reject(new Error('The composer is closed'));
    // The thread with the least work waiting.
    const thread = this.threads.reduce((least, t) => (t.waiting.size < least.waiting.size ? t : least));
    const id = ++this.lastId;
    return new Promise((resolve, reject) => {
      if (thread.waiting.size === 0) thread.worker.ref(); // work in hand keeps the process alive
      thread.waiting.set(id, { resolve, reject });
      try {
        thread.worker.postMessage({ id, message });
      } catch (error) {
        // Not something a thread can be handed (it cannot be copied): this message fails alone.
        thread.waiting.delete(id);
        if (thread.waiting.size === 0) thread.worker.unref();
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.threads.map((thread) => thread.worker.terminate()));
  }

  private start(): Thread {
    const worker = new Worker(new URL('./compose-thread.ts', import.meta.url));
    const thread: Thread = { worker, waiting: new Map() };
    worker.on('message', (answer: ComposeAnswer) => {
      const waiter = thread.waiting.get(answer.id);
      thread.waiting.delete(answer.id);
      if (thread.waiting.size === 0) worker.unref();
      if ('error' in answer) waiter?.reject(new Error(answer.error));
      else waiter?.resolve(Buffer.from(answer.raw.buffer, answer.raw.byteOffset, answer.raw.byteLength));
    });
    // A thread that dies (out of memory, a bug) fails what it held, and another takes its place.
    worker.once('exit', (code) => {
      for (const waiter of thread.waiting.values()) waiter.reject(new Error(`The compose thread stopped (${code})`));
      thread.waiting.clear();
      const i = this.threads.indexOf(thread);
      if (!this.closed && i >= 0) this.threads[i] = this.start();
    });
    worker.on('error', () => {}); // followed by 'exit'
    // An idle thread does not keep the process alive: its own work (a server, a test) decides when it
    // ends. (After the listeners: adding a 'message' listener refs the thread again.)
    worker.unref();
    return thread;
  }
}
