import type { SMTPServer, SMTPServerDataStream } from 'smtp-server';
import type { Logger } from './logger.ts';

// What Mailroom's SMTP listeners (the inbound listener for reports, the submission listener) share:
// a reply code raised as an error, reading a message under a size limit, listening, and closing without
// cutting a transaction short.

/** An error smtp-server answers with its own reply code (451 for any other error). */
export class SmtpReply extends Error {
  readonly responseCode: number;
  constructor(responseCode: number, message: string) {
    super(message);
    this.responseCode = responseCode;
  }
}

/** Reads the message, keeping at most `maxBytes`; over it, the reply is 552 5.3.4. */
export async function collectMessage(stream: SMTPServerDataStream, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    // Read to the end all the same: the client sends the whole message before it reads a reply.
    if (size + chunk.length <= maxBytes) chunks.push(chunk);
    size += chunk.length;
  }
  if (stream.sizeExceeded || size > maxBytes) {
    throw new SmtpReply(552, `5.3.4 Message too big: at most ${maxBytes} bytes`);
  }
  return Buffer.concat(chunks);
}

export interface Listening {
  /** The port listened on. */
  port: number;
  /** Stops listening, lets transactions in progress finish, then closes every session. */
  close(): Promise<void>;
}

/**
 * Starts `server` on host:port. `inData` holds the sessions whose DATA is being received or handled:
 * on close, sessions between transactions are told 421 at once, those in DATA get their answer first.
 * Once listening, errors are a client's (a reset connection, a timeout): logged, the server goes on.
 */
export async function listenSmtp(
  server: SMTPServer,
  options: { host: string; port: number; log: Logger; name: string; inData: Map<string, Promise<void>> },
): Promise<Listening> {
  let listening = false;
  server.on('error', (error) => {
    if (listening) options.log.warn({ err: error }, `${options.name} session error`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  listening = true;
  const address = server.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  return {
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const connection of server.connections) {
        if (!options.inData.has(connection.session.id)) connection.send(421, 'Server shutting down');
      }
      await closed;
      await Promise.allSettled(options.inData.values());
    },
  };
}
