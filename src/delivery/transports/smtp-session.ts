import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { SmtpSendInfo } from '../smtp-outcome.ts';
import type { ShapedConnection } from '../../shaping/shaper.ts';

// One SMTP connection kept open across messages, as both transports use them under traffic shaping: a
// message per transaction, the next transaction on the same connection. After a refused transaction
// (the server said no to the envelope or the message) the session is reset with RSET and goes on.

/** How long a refused transaction's RSET may go unanswered before the connection is given up. */
const RSET_TIMEOUT_MS = 10_000;

export interface SessionOptions extends SMTPConnection.Options {
  auth?: { user: string; pass: string };
}

/** What one transaction gave: the server's answer, or the failure and whether any byte of it was sent. */
export type SendAttempt = { info: SmtpSendInfo } | { error: unknown; nothingSent: boolean };

export class SmtpSession implements ShapedConnection {
  private readonly connection: SMTPConnection;
  private open = true;
  private sent = 0;

  private constructor(connection: SMTPConnection) {
    this.connection = connection;
    connection.on('end', () => (this.open = false));
    connection.on('error', () => (this.open = false));
  }

  /** Connects (greeting, EHLO, STARTTLS as the options say, AUTH when given); rejects with nodemailer's error. */
  static open(options: SessionOptions): Promise<SmtpSession> {
    return new Promise((resolve, reject) => {
      const { auth, ...connectionOptions } = options;
      const connection = new SMTPConnection(connectionOptions);
      let settled = false;
      const fail = (error: unknown) => {
        if (settled) return;
        settled = true;
        connection.close();
        reject(error);
      };
      connection.once('error', fail);
      connection.once('end', () => fail(Object.assign(new Error('Connection closed'), { code: 'ECONNECTION' })));
      connection.connect((error) => {
        if (error) return fail(error);
        const ready = () => {
          if (settled) return;
          settled = true;
          connection.removeListener('error', fail);
          resolve(new SmtpSession(connection));
        };
        if (!auth) return ready();
        connection.login(auth, (loginError) => (loginError ? fail(loginError) : ready()));
      });
    });
  }

  get usable(): boolean {
    return this.open;
  }

  /**
   * Whether the session runs over TLS, and whether the server's certificate is valid for the name it was
   * asked for (checked even when an invalid one was let through, as opportunistic TLS does).
   */
  tlsState(): { secure: boolean; authorized: boolean; problem: string | undefined } {
    const socket = (this.connection as unknown as { _socket?: { authorized?: boolean; authorizationError?: unknown } })
      ._socket;
    const secure = this.connection.secure === true;
    const authorized = secure && socket?.authorized === true;
    const problem = !secure
      ? 'the server did not use TLS'
      : authorized
        ? undefined
        : String(socket?.authorizationError ?? 'certificate not checked');
    return { secure, authorized, problem };
  }

  /** The MX host name this session was opened to (direct delivery; undefined for a relay). */
  mxHost: string | undefined;

  /** One transaction. Never rejects: a failure is returned, with whether the server got any of it. */
  send(envelope: { from: string; to: string[] }, raw: Buffer): Promise<SendAttempt> {
    const reused = this.sent > 0;
    this.sent += 1;
    return new Promise((resolve) => {
      let answered = false;
      // After the send's own callback, which comes first when the server ended with a reply (a 421
      // closes the connection right after it is read): that reply is what the recipients get.
      const onEnd = () =>
        setImmediate(() =>
          finish({
            error: Object.assign(new Error('Connection closed'), { code: 'ECONNECTION' }),
            nothingSent: reused,
          }),
        );
      const finish = (attempt: SendAttempt) => {
        if (answered) return;
        answered = true;
        this.connection.removeListener('end', onEnd);
        resolve(attempt);
      };
      // A kept connection the server dropped while idle fails before a byte of this message is sent.
      this.connection.once('end', onEnd);
      this.connection.send(envelope, raw, (error, info) => {
        // The server's reply is in: it, not a later close, is what the recipients get.
        this.connection.removeListener('end', onEnd);
        if (!error) return finish({ info: info as unknown as SmtpSendInfo });
        const code = (error as { code?: string }).code;
        const answered = (error as { responseCode?: number }).responseCode !== undefined;
        const transient = !answered && (code === 'ECONNECTION' || code === 'ESOCKET' || code === 'ETIMEDOUT');
        const refused = code === 'EENVELOPE' || code === 'EMESSAGE';
        const attempt = { error, nothingSent: reused && transient && !refused && code !== 'ETIMEDOUT' };
        if (refused && (error as { responseCode?: number }).responseCode !== 421 && this.open) {
          // The server refused this transaction; the connection is fine once reset. The attempt ends
          // only when RSET is answered: a next MAIL FROM sent before that answer would have its own
          // reply taken for RSET's, and the session would be out of step with the server.
          const unanswered = setTimeout(() => {
            this.close();
            finish(attempt);
          }, RSET_TIMEOUT_MS);
          this.connection.reset((resetError) => {
            clearTimeout(unanswered);
            if (resetError) this.close();
            finish(attempt);
          });
        } else {
          this.close();
          finish(attempt);
        }
      });
    });
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    this.connection.quit();
    // A server that does not answer QUIT is not waited for.
    setTimeout(() => this.connection.close(), 1000).unref();
  }
}
