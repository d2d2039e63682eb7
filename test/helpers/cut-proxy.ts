import { connect, createServer, type Socket } from 'node:net';

// A TCP proxy between a process and PostgreSQL whose link can be cut the way a network cut does it: no
// byte gets through either way and neither end hears of it (no FIN, no RST; their kernels keep the
// connections open). It follows PostgreSQL's protocol message by message, so that the cut can land
// right after a chosen request has been handed over, while the answers already on their way to other
// connections still arrive: the cut then loses that one request's answer, and what is sent afterwards.
//
// A connection that lost bytes in the cut stays silent once the link is back (its stream has a hole, as
// if TCP's retransmissions had not got through yet): its ends must notice by their own time limits.
// Once one end closes it, the other end is closed too, as the FIN, or the RST answering a retransmitted
// segment, would do once the link is back. A connection that lost nothing carries on.

const SYNC = 0x53; // 'S': ends an extended-protocol request
const QUERY = 0x51; // 'Q': a simple-protocol request
const READY_FOR_QUERY = 0x5a; // 'Z': the server's end of an answer

/** Splits a stream into protocol messages; the first one of a client has no type byte (start-up). */
function framer(untypedFirst: boolean): (chunk: Buffer) => Buffer[] {
  let buffer: Buffer = Buffer.alloc(0);
  let untyped = untypedFirst;
  return (chunk) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    const messages: Buffer[] = [];
    for (;;) {
      if (buffer.length < (untyped ? 4 : 5)) break;
      const length = untyped ? buffer.readInt32BE(0) : 1 + buffer.readInt32BE(1);
      if (buffer.length < length) break;
      messages.push(buffer.subarray(0, length));
      buffer = buffer.subarray(length);
      untyped = false;
    }
    return messages;
  };
}

interface Link {
  client: Socket;
  server: Socket | undefined;
  /** Requests handed over (start-up included) whose ReadyForQuery has not come back. */
  outstanding: number;
  /** Lost bytes in a cut: nothing goes through any more. */
  dark: boolean;
  /** Had answers on their way when the link was cut: they still arrive. */
  draining: boolean;
  clientClosed: boolean;
  serverClosed: boolean;
  /** The messages of the request being sent, and the last complete request. */
  request: Buffer[];
  previous: Buffer | undefined;
}

/** Whether to cut right after handing over `request` (all its messages), the connection's previous one given. */
export type CutWhen = (request: Buffer, previous: Buffer | undefined) => boolean;

export interface CutProxy {
  port: number;
  /** The local ports of the proxy's connections to the server: the `client_port` PostgreSQL sees. */
  serverSidePorts(): number[];
  /** Cuts the link right after a request `when` picks has been handed over; resolves then. */
  cutAfter(when: CutWhen): Promise<void>;
  /** The link is back. */
  restore(): void;
  close(): Promise<void>;
}

export async function startCutProxy(target: { host: string; port: number }): Promise<CutProxy> {
  const links = new Set<Link>();
  let cut = false;
  let trigger: { when: CutWhen; fired: () => void } | undefined;

  const cutNow = (handedOver: Link) => {
    cut = true;
    // Answers on their way to the other connections still arrive; the one just handed over is lost.
    for (const link of links) link.draining = link !== handedOver && link.outstanding > 0;
  };

  const fromClient = (link: Link, message: Buffer, startup: boolean) => {
    if (cut || link.dark || !link.server) {
      link.dark = true;
      return;
    }
    link.server.write(message);
    link.request.push(message);
    if (!startup && message[0] !== SYNC && message[0] !== QUERY) return;
    link.outstanding += 1;
    const request = Buffer.concat(link.request);
    const previous = link.previous;
    link.request = [];
    link.previous = request;
    if (trigger?.when(request, previous)) {
      const { fired } = trigger;
      trigger = undefined;
      cutNow(link);
      fired();
    }
  };

  const fromServer = (link: Link, message: Buffer) => {
    if (link.dark || (cut && !link.draining)) {
      link.dark = true;
      return;
    }
    link.client.write(message);
    if (message[0] !== READY_FOR_QUERY) return;
    link.outstanding -= 1;
    if (link.outstanding === 0) link.draining = false;
  };

  const server = createServer((client) => {
    const link: Link = {
      client,
      server: undefined,
      outstanding: 0,
      dark: cut, // a connection opened during the cut never reaches the server
      draining: false,
      clientClosed: false,
      serverClosed: false,
      request: [],
      previous: undefined,
    };
    links.add(link);
    client.on('error', () => {});
    const clientMessages = framer(true);
    let first = true;
    client.on('data', (chunk: Buffer) => {
      for (const message of clientMessages(chunk)) {
        fromClient(link, message, first);
        first = false;
      }
    });
    const forget = () => {
      if (link.clientClosed && (link.serverClosed || !link.server)) links.delete(link);
    };
    client.on('close', () => {
      link.clientClosed = true;
      if (!cut) link.server?.destroy();
      forget();
    });
    if (link.dark) return;
    const upstream = connect(target.port, target.host);
    link.server = upstream;
    upstream.on('error', () => {});
    const serverMessages = framer(false);
    upstream.on('data', (chunk: Buffer) => {
      for (const message of serverMessages(chunk)) fromServer(link, message);
    });
    upstream.on('close', () => {
      link.serverClosed = true;
      if (!cut) client.destroy();
      forget();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  return {
    port: (server.address() as { port: number }).port,
    serverSidePorts: () =>
      [...links].flatMap((link) => (link.server?.localPort !== undefined ? [link.server.localPort] : [])),
    cutAfter: (when) => new Promise<void>((fired) => (trigger = { when, fired })),
    restore() {
      cut = false;
      for (const link of links) {
        link.draining = false;
        // What one end did during the cut reaches the other now.
        if (link.clientClosed) link.server?.destroy();
        if (link.serverClosed) link.client.destroy();
      }
    },
    async close() {
      for (const link of links) {
        link.client.destroy();
        link.server?.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
