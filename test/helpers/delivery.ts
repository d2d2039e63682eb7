import { startDelivery } from '../../src/delivery/start-delivery.ts';
import { createTransport } from '../../src/delivery/transports/index.ts';
import type { TestApp } from './app.ts';

export interface TestDelivery {
  /** Lets the messages in flight finish, then closes the transport. */
  stop(): Promise<void>;
}

/** A delivery worker for the test app, with the transport its configuration names, logging nothing. */
export async function startTestDelivery(t: TestApp): Promise<TestDelivery> {
  const transport = createTransport(t.config);
  const worker = await startDelivery(t.db, t.config, transport, { error: () => {}, warn: () => {} });
  return {
    async stop() {
      await worker.stop();
      await transport.close();
    },
  };
}
