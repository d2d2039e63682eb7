// What a benchmark starts or creates (databases, processes, temporary directories), undone in reverse order
// when it ends, fails, or is interrupted (SIGINT, SIGTERM). Once interrupted, nothing new may be created,
// and whatever is being created when the signal comes is waited for, so that it is undone too.

export class Teardown {
  #steps: (() => unknown)[] = [];
  #creating = 0;
  #interrupted = false;
  #done: Promise<void> | undefined;

  constructor() {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => void this.#interrupt(signal));
    }
  }

  /** Whether a signal came: the benchmark's own errors after it are the teardown's doing, not failures. */
  get interrupted() {
    return this.#interrupted;
  }

  /** Creates something and registers how to undo it. Refused once interrupted. */
  async own<T>(create: () => Promise<T> | T, undo: (value: T) => unknown): Promise<T> {
    if (this.#interrupted || this.#done) throw new Error('interrupted');
    this.#creating++;
    try {
      const value = await create();
      this.#steps.push(() => undo(value));
      return value;
    } finally {
      this.#creating--;
    }
  }

  /** Undoes everything, newest first, once; a step that fails is reported and the rest still run. */
  run(): Promise<void> {
    this.#done ??= (async () => {
      for (const step of this.#steps.reverse()) {
        try {
          await step();
        } catch (error) {
          console.error('teardown:', error instanceof Error ? error.message : error);
        }
      }
    })();
    return this.#done;
  }

  async #interrupt(signal: string) {
    console.error(`${signal}: cleaning up`);
    this.#interrupted = true;
    // The interrupted work fails as its database and processes go away (a dropped database's connections
    // are cut); that must not end the process before the rest is undone.
    const report = (error: unknown) =>
      console.error('after the signal:', error instanceof Error ? error.message : error);
    process.on('uncaughtException', report);
    process.on('unhandledRejection', report);
    while (this.#creating > 0) await new Promise((resolve) => setTimeout(resolve, 50));
    await this.run();
    process.exit(130);
  }
}

/** Runs a benchmark's body, then its teardown; after a signal the signal's handler ends the process. */
export async function withTeardown(body: (teardown: Teardown) => Promise<void>) {
  const teardown = new Teardown();
  try {
    await body(teardown);
  } catch (error) {
    if (!teardown.interrupted) {
      await teardown.run();
      throw error;
    }
    return;
  }
  if (!teardown.interrupted) await teardown.run();
}
