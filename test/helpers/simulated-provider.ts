// A simulated mailbox provider for shaping tests: a real SMTP server on a loopback address that counts
// the connections open at once and answers each transaction (or greeting) as the test scripts it.
import { SMTPServer } from 'smtp-server';
import { freePort } from './server-process.ts';

/** What the simulated provider says to a transaction; undefined: accept it. */
export type Script = (tx: { from: string; to: string }) => { code: number; message: string } | undefined;

export interface Provider {
  port: number;
  /** Each message accepted: its envelope, when (epoch ms), the client's address and the name it gave in EHLO. */
  accepted: Array<{ from: string; to: string; at: number; client: string; ehlo: string }>;
  /** Connections open at once, at most, since the last reset. */
  maxConcurrent: number;
  /** The same, per client address (each egress source). */
  maxConcurrentFrom: Map<string, number>;
  /** Connections opened since the last reset. */
  connected: number;
  script: Script;
  /** What the simulator says at the greeting; undefined: welcome. */
  greeting: () => { code: number; message: string } | undefined;
  /** Connections open now. */
  open(): number;
  reset(): void;
  close(): Promise<void>;
}

/** A simulated provider's SMTP server on `host`, on a free port; each message takes `dataDelayMs` (20) to accept. */
export async function startProvider(host: string, options: { dataDelayMs?: number } = {}): Promise<Provider> {
  let open = 0;
  const openFrom = new Map<string, number>();
  const provider: Provider = {
    port: 0,
    accepted: [],
    maxConcurrent: 0,
    maxConcurrentFrom: new Map(),
    connected: 0,
    script: () => undefined,
    greeting: () => undefined,
    open: () => open,
    reset() {
      provider.accepted = [];
      provider.maxConcurrent = open;
      provider.maxConcurrentFrom = new Map(openFrom);
      provider.connected = 0;
      provider.script = () => undefined;
      provider.greeting = () => undefined;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const refuse = (reply: { code: number; message: string }) =>
    Object.assign(new Error(reply.message), { responseCode: reply.code });
  const server = new SMTPServer({
    authOptional: true,
    disableReverseLookup: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onConnect(session, callback) {
      open += 1;
      provider.connected += 1;
      provider.maxConcurrent = Math.max(provider.maxConcurrent, open);
      const client = session.remoteAddress.replace(/^::ffff:/, '');
      openFrom.set(client, (openFrom.get(client) ?? 0) + 1);
      const most = Math.max(provider.maxConcurrentFrom.get(client) ?? 0, openFrom.get(client)!);
      provider.maxConcurrentFrom.set(client, most);
      const refused = provider.greeting();
      callback(refused ? refuse(refused) : undefined);
    },
    onClose(session) {
      open -= 1;
      const client = session.remoteAddress.replace(/^::ffff:/, '');
      openFrom.set(client, (openFrom.get(client) ?? 1) - 1);
    },
    onRcptTo(address, session, callback) {
      const reply = provider.script({
        from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        to: address.address,
      });
      callback(reply ? refuse(reply) : undefined);
    },
    onData(stream, session, callback) {
      stream.resume();
      stream.on('end', () => {
        // Slow enough that concurrent deliveries overlap, so a connection limit is really exercised.
        setTimeout(() => {
          const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
          const client = session.remoteAddress.replace(/^::ffff:/, '');
          for (const rcpt of session.envelope.rcptTo)
            provider.accepted.push({ from, to: rcpt.address, at: Date.now(), client, ehlo: session.hostNameAppearsAs });
          callback();
        }, options.dataDelayMs ?? 20);
      });
    },
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  // A client killed mid-session (kill -9 in the process tests) resets its socket: not the test's failure.
  server.on('error', () => {});
  provider.port = port;
  return provider;
}
