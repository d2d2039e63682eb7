import { setTimeout as sleep } from 'node:timers/promises';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';

// A real SMTP server on loopback that records every transaction it accepts, and can be told how to
// answer: per recipient at RCPT TO, at the end of DATA, or slowly. STARTTLS is offered with
// smtp-server's built-in self-signed certificate unless `starttls: false`.

export interface SmtpReply {
  code: number;
  message: string;
}

export interface ReceivedTransaction {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  /** Whether the session had been upgraded with STARTTLS. */
  secure: boolean;
  /** The name the client gave in EHLO/HELO. */
  clientHostname: string;
  parse(): Promise<ParsedMail>;
}

export interface SmtpSink {
  host: string;
  port: number;
  /** `smtp://host:port`, for MAILROOM_SMTP_URL. */
  url: string;
  transactions: ReceivedTransaction[];
  /** Connections accepted, whether or not a transaction followed. */
  connections: number;
  /** Answer RCPT TO for this address with a failure, e.g. 451 (defer) or 550 (reject). */
  replyToRecipient(address: string, reply: SmtpReply): void;
  /** Answer the end of DATA with a failure instead of accepting the message. */
  failData(reply: SmtpReply): void;
  /** Wait this long before the greeting, or before answering DATA. */
  slow(where: 'greeting' | 'data', ms: number): void;
  /**
   * Once `count` transactions are recorded, every message after them is neither answered nor recorded
   * until the returned function is called (then it is, as a relay that was only slow).
   */
  holdAfter(count: number): () => void;
  /**
   * Closes every open connection at once, as a relay drops clients it finds idle. Resolves once each is
   * closed here, which takes the client's own end of it: the client has seen the drop by then.
   */
  dropConnections(): Promise<void>;
  /** Back to accepting everything promptly; the record is emptied. */
  reset(): void;
  close(): Promise<void>;
}

export interface SmtpSinkOptions {
  host?: string;
  /** 0 (the default) picks a free port. */
  port?: number;
  starttls?: boolean;
  /** Whether AUTH with these credentials succeeds (AUTH is optional; every login succeeds by default). */
  checkCredentials?: (username: string, password: string) => boolean;
  /** Offer STARTTLS, then abort every TLS handshake (a broken TLS setup, as found on some MX hosts). */
  failTlsHandshake?: boolean;
  /** The key and certificate STARTTLS presents (default: smtp-server's own self-signed one). */
  tls?: { key: string; cert: string };
}

export async function startSmtpSink(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const host = options.host ?? '127.0.0.1';
  const recipientReplies = new Map<string, SmtpReply>();
  let dataReply: SmtpReply | undefined;
  let delays = { greeting: 0, data: 0 };
  let hold: { count: number; released: Promise<void> } | undefined;
  const transactions: ReceivedTransaction[] = [];
  let connections = 0;
  /** Sessions being dropped, by id: told when their socket has closed. */
  const dropping = new Map<string, () => void>();

  const serverOptions: SMTPServerOptions = {
    authOptional: true,
    logger: false,
    // No PTR look-up of each client: tests send no traffic off loopback, DNS included.
    disableReverseLookup: true,
    // A client's pooled connection must not hold close() for smtp-server's default 30 s.
    closeTimeout: 200,
    disabledCommands: options.starttls === false ? ['STARTTLS'] : [],
    ...(options.tls && { key: options.tls.key, cert: options.tls.cert }),
    // Only TLS 1.0 and 1.1, which Node's clients refuse: the handshake fails as with an outdated MX.
    ...(options.failTlsHandshake && { minVersion: 'TLSv1', maxVersion: 'TLSv1.1' }),
    onAuth(auth, _session, callback) {
      const ok = options.checkCredentials?.(auth.username ?? '', auth.password ?? '') ?? true;
      if (ok) callback(null, { user: auth.username });
      else callback(smtpError({ code: 535, message: '5.7.8 Authentication credentials invalid' }));
    },
    onConnect(_session, callback) {
      connections++;
      void sleep(delays.greeting).then(() => callback());
    },
    onClose(session) {
      dropping.get(session.id)?.();
      dropping.delete(session.id);
    },
    onRcptTo(address, _session, callback) {
      const reply = recipientReplies.get(address.address.toLowerCase());
      callback(reply ? smtpError(reply) : undefined);
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', async () => {
        await sleep(delays.data);
        if (hold && transactions.length >= hold.count) await hold.released;
        if (dataReply) return callback(smtpError(dataReply));
        const raw = Buffer.concat(chunks);
        const mailFrom = session.envelope.mailFrom;
        transactions.push({
          mailFrom: mailFrom ? mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((rcpt) => rcpt.address),
          raw,
          secure: session.secure,
          clientHostname: session.hostNameAppearsAs,
          parse: () => simpleParser(raw),
        });
        callback();
      });
    },
  };
  const server = new SMTPServer(serverOptions);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  // Connections cut by a client on purpose (timeouts under test) are not the test's failure.
  server.on('error', () => {});
  const port = (server.server.address() as { port: number }).port;

  return {
    host,
    port,
    url: `smtp://${host}:${port}`,
    transactions,
    get connections() {
      return connections;
    },
    replyToRecipient: (address, reply) => void recipientReplies.set(address.toLowerCase(), reply),
    failData: (reply) => void (dataReply = reply),
    slow: (where, ms) => void (delays = { ...delays, [where]: ms }),
    holdAfter(count) {
      let release!: () => void;
      hold = { count, released: new Promise<void>((resolve) => (release = resolve)) };
      return () => {
        hold = undefined;
        release();
      };
    },
    async dropConnections() {
      // smtp-server keeps its open connections in a set it does not type.
      const open = [...(server as unknown as { connections: Set<{ id: string; close(): void }> }).connections];
      const closed = open.map((connection) => new Promise<void>((resolve) => dropping.set(connection.id, resolve)));
      for (const connection of open) connection.close();
      await Promise.all(closed);
    },
    reset() {
      recipientReplies.clear();
      dataReply = undefined;
      delays = { greeting: 0, data: 0 };
      transactions.length = 0;
      connections = 0;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function smtpError({ code, message }: SmtpReply): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

/** The subjects the sink received, with how many times each. */
export function subjectCounts(sink: SmtpSink): Map<string, number> {
  const counts = new Map<string, number>();
  for (const tx of sink.transactions) {
    const subject = /^Subject: (.*)$/m.exec(tx.raw.toString('utf8'))?.[1]?.trim() ?? '';
    counts.set(subject, (counts.get(subject) ?? 0) + 1);
  }
  return counts;
}
