import { startDelivery } from '../../src/delivery/start-delivery.ts';
import { startBroadcastFanOut } from '../../src/broadcasts/start-broadcasts.ts';
import { createTransport } from '../../src/delivery/transports/index.ts';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './app.ts';
import { startSmtpSink, type SmtpSink } from './smtp-sink.ts';

export interface TestDelivery {
  /** Lets the messages in flight finish, then closes the transport. */
  stop(): Promise<void>;
}

/** A delivery worker for the test app, with the transport its configuration names, logging nothing. */
export async function startTestDelivery(t: TestApp): Promise<TestDelivery> {
  const transport = createTransport(t.config, t.db);
  const worker = await startDelivery(t.db, t.config, transport, { error: () => {}, warn: () => {} });
  const fanOut = await startBroadcastFanOut(t.db, t.config, { error: () => {}, warn: () => {} });
  return {
    async stop() {
      await fanOut.stop();
      await worker.stop();
      await transport.close();
    },
  };
}

export interface RelayTestBed {
  t: TestApp;
  org: TestOrganization;
  sink: SmtpSink;
  delivery: TestDelivery;
  /** Stops the worker (letting messages in flight finish), then the app and the sink. */
  close(): Promise<void>;
}

/**
 * The app delivering through the `smtp` relay transport to a loopback sink (no STARTTLS), with its
 * delivery worker running and one organization; `env` adds settings.
 */
export async function startRelayTestBed(label: string, env: Record<string, string> = {}): Promise<RelayTestBed> {
  const sink = await startSmtpSink({ starttls: false });
  const t = await buildTestApp({ MAILROOM_TRANSPORT: 'smtp', MAILROOM_SMTP_URL: sink.url, ...env });
  const org = await createTestOrganization(t.db, t.config, label);
  const delivery = await startTestDelivery(t);
  return {
    t,
    org,
    sink,
    delivery,
    async close() {
      await delivery.stop();
      await t.close();
      await sink.close();
    },
  };
}
