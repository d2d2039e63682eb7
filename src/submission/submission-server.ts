import ipaddr from 'ipaddr.js';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { idempotencyKey } from '../platform/idempotency.ts';
import type { Logger } from '../platform/logger.ts';
import { findUnstorableText } from '../platform/text.ts';
import { collectMessage, listenSmtp, SmtpReply, type Listening } from '../platform/smtp-listener.ts';
import { isApiKeyLive, resolveApiKey } from '../tenancy/credentials.ts';
import { keyUsageOf } from '../tenancy/key-usage.ts';
import { keyDomainOf, type Principal } from '../tenancy/principal.ts';
import { countAccepted, sendEmails } from '../emails/send-emails.ts';
import { MAX_RECIPIENTS } from '../emails/validate-message.ts';
import { checkMessageShape, type EmailMessage } from '../emails/message-schema.ts';
import { messageFromMime } from './message-from-mime.ts';
import { smtpReplyFor } from './smtp-replies.ts';
import type { TlsCertificate } from './tls-certificate.ts';

// SMTP submission (RFC 6409): any application that can send mail over SMTP sends through Mailroom,
// with an API key as the password. Each message goes through the same accept core as POST /emails and
// gets the same rules; the 250 comes only once the message, its recipients, its timeline entry and its
// delivery job are committed, and names the email's id. Two listeners share this code: STARTTLS
// (conventionally 587) and implicit TLS (465).
//
// - AUTH PLAIN or LOGIN, user name `mailroom` (or `resend`, for applications configured for Resend),
//   password an API key of either permission. AUTH is refused before TLS except from loopback.
// - Several messages per connection, and pipelining (smtp-server's).

const AUTH_REQUIRED = '5.7.0 Authentication required: AUTH with user name mailroom and an API key';

/** smtp-server reads a session's own list of disabled commands, set in onConnect. */
type SessionWithCommands = SMTPServerSession & { disabledCommands?: string[] };

const MAX_AUTH_FAILURES = 3;
const authFailures = new WeakMap<SMTPServerSession, number>();

/** Per transaction (keyed by its envelope): RCPT TO commands accepted, and addresses refused over the limit. */
const transactions = new WeakMap<object, { accepted: number; refusedOverLimit: string[] }>();
function recipientsOf(session: SMTPServerSession): { accepted: number; refusedOverLimit: string[] } {
  let transaction = transactions.get(session.envelope);
  if (!transaction) {
    transaction = { accepted: 0, refusedOverLimit: [] };
    transactions.set(session.envelope, transaction);
  }
  return transaction;
}

/** User names accepted with an API key as the password. */
const USER_NAMES = new Set(['mailroom', 'resend']);
/** Sessions at once; one more is told 421 (try again later). */
const MAX_CLIENTS = 200;
/**
 * Messages being read and accepted at once, per listener; more wait their turn. Each holds its message
 * several times over while it is parsed, so this bounds memory under many large messages at once.
 */
const ACCEPTING_AT_ONCE = 16;

export interface SubmissionServerOptions {
  db: Database;
  config: Config;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Implicit TLS from the first byte (465); otherwise STARTTLS is offered (587). */
  implicitTls: boolean;
  tls: TlsCertificate;
  log: Logger;
}

export type SubmissionServer = Listening;

export async function startSubmissionServer(options: SubmissionServerOptions): Promise<SubmissionServer> {
  const { db, config, log } = options;
  const maxBytes = config.bodyLimitBytes;
  /** Sessions whose DATA is being received or accepted: close() waits for these, not for idle ones. */
  const inData = new Map<string, Promise<void>>();

  const server = new SMTPServer({
    ...(config.heloName === undefined ? {} : { name: config.heloName }),
    banner: 'Mailroom submission',
    logger: false,
    secure: options.implicitTls,
    key: options.tls.key,
    cert: options.tls.cert,
    authMethods: ['PLAIN', 'LOGIN'],
    authRequiredMessage: AUTH_REQUIRED,
    // Decided per session in onAuth: loopback may authenticate without TLS, anyone else may not.
    allowInsecureAuth: true,
    disableReverseLookup: true,
    size: maxBytes,
    maxClients: MAX_CLIENTS,
    // A session in DATA is not cut before the process's own deadline: its message may be committing.
    closeTimeout: config.shutdownTimeoutMs,

    onConnect(session, callback) {
      // A client elsewhere is not offered AUTH until TLS is up, so that a misconfigured one never sends
      // its key in the clear (smtp-server resets the session's commands on STARTTLS: see onSecure).
      if (!mayAuthenticate(session)) (session as SessionWithCommands).disabledCommands = ['AUTH'];
      callback();
    },

    onSecure(_socket, session, callback) {
      delete (session as SessionWithCommands).disabledCommands;
      callback();
    },

    onAuth(auth, session, callback) {
      if (!mayAuthenticate(session)) {
        return callback(new SmtpReply(538, '5.7.11 Encryption required: use STARTTLS (or port 465) before AUTH'));
      }
      // A connection gets MAX_AUTH_FAILURES tries; the last failure closes it (421), so a client cannot
      // spend one connection trying keys at the speed of the database.
      const refused = () => {
        const failures = (authFailures.get(session) ?? 0) + 1;
        authFailures.set(session, failures);
        callback(
          failures >= MAX_AUTH_FAILURES
            ? new SmtpReply(421, '4.7.0 Too many failed authentications; closing the connection')
            : new SmtpReply(535, '5.7.8 Authentication credentials invalid'),
        );
      };
      if (!USER_NAMES.has((auth.username ?? '').toLowerCase())) return refused();
      resolveApiKey(db, auth.password ?? '')
        .then(async (principal) => {
          // Signing in with a key is a use of it, as an API call is (its last_used_at).
          if (principal?.kind === 'api_key') await keyUsageOf(db).record(principal.apiKeyId);
          return principal;
        })
        .then(
          (principal) => (principal ? callback(null, { user: principal }) : refused()),
          (error: unknown) => {
            log.error({ err: error }, 'submission: could not check an API key');
            callback(new SmtpReply(454, '4.7.0 Temporary authentication failure'));
          },
        );
    },

    onMailFrom(_address, session, callback) {
      // AUTH is not offered before TLS to clients elsewhere, so smtp-server does not demand it: this does.
      const principal = session.user as unknown as Principal | undefined;
      if (!principal) return callback(new SmtpReply(530, AUTH_REQUIRED));
      // A key revoked since this connection authenticated sends nothing more.
      isApiKeyLive(db, (principal as Extract<Principal, { kind: 'api_key' }>).apiKeyId).then(
        (live) => callback(live ? undefined : new SmtpReply(535, '5.7.8 The API key has been revoked')),
        () => callback(new SmtpReply(451, '4.3.0 Try again later')),
      );
    },

    onRcptTo(address, session, callback) {
      // The API's limit, counted in RCPT TO commands of this transaction (smtp-server gives each
      // transaction a new envelope). The client keeps the recipients accepted so far and sends the
      // rest in another message.
      const transaction = recipientsOf(session);
      if (transaction.accepted >= MAX_RECIPIENTS) {
        transaction.refusedOverLimit.push(address.address);
        return callback(
          new SmtpReply(
            452,
            `4.5.3 Too many recipients: at most ${MAX_RECIPIENTS} recipients per message; send the rest in another message`,
          ),
        );
      }
      transaction.accepted += 1;
      callback();
    },

    onData(stream, session, callback) {
      const handled = acceptInTurn(stream, session)
        .then(
          (id) => callback(null, `2.0.0 OK <${id}>`),
          (error: unknown) => {
            if (!(error instanceof SmtpReply)) log.error({ err: error }, 'submission: could not accept a message');
            callback(error instanceof SmtpReply ? error : new SmtpReply(451, '4.3.0 Try again later'));
          },
        )
        .finally(() => inData.delete(session.id));
      inData.set(session.id, handled);
    },
  });

  let accepting = 0;
  const waiting: Array<() => void> = [];
  async function acceptInTurn(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<string> {
    if (accepting >= ACCEPTING_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
    accepting += 1;
    try {
      return await accept(stream, session);
    } finally {
      accepting -= 1;
      waiting.shift()?.();
    }
  }

  /** Reads, checks and accepts one message; resolves with its email id once committed. */
  async function accept(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<string> {
    const raw = await collectMessage(stream, maxBytes);
    const principal = session.user as unknown as Principal;
    const recipients = session.envelope.rcptTo.map((rcpt) => rcpt.address);
    try {
      const { message, idempotencyKey: key } = await messageFromMime(
        raw,
        recipients,
        recipientsOf(session).refusedOverLimit,
      );
      // What cannot be stored is refused by name, as the HTTP edge refuses it in a JSON body.
      const unstorable = findUnstorableText(message);
      if (unstorable !== undefined) {
        throw new ServiceError(
          'validation_error',
          `${unstorable} contains a character that cannot be stored (U+0000 or an unpaired surrogate)`,
          unstorable,
        );
      }
      // The schema POST /emails checks bodies with; its refusal is remembered under the key like any other.
      let checked: EmailMessage | ServiceError;
      try {
        checked = checkMessageShape(message);
      } catch (error) {
        if (!(error instanceof ServiceError)) throw error;
        checked = error;
      }
      const outcome = await sendEmails(
        db,
        config,
        principal.organizationId,
        { kind: 'single', message: checked, onlyFromDomainId: keyDomainOf(principal) },
        // Fingerprinted by the message as read, not its bytes: a retry made again by a mail library has
        // a new Date and Message-ID, and is still the same message.
        key === undefined
          ? undefined
          : idempotencyKey(principal.organizationId, key, { kind: 'SMTP', target: 'submission', body: message }),
      );
      if ('refused' in outcome.result) throw smtpReplyFor(outcome.result.refused);
      if (!outcome.replayed) countAccepted('smtp', outcome.result);
      const [entry] = outcome.result.entries;
      if (!entry?.accepted) throw new Error('A single send has no accepted message and no refusal');
      log.info(
        { emailId: entry.id, organizationId: principal.organizationId, replayed: outcome.replayed },
        'message submitted over SMTP',
      );
      return entry.id;
    } catch (error) {
      // Refusals raised before the core's own (a message that cannot be read, an idempotency key in use).
      if (error instanceof ServiceError) throw smtpReplyFor(error.detail());
      throw error;
    }
  }

  return listenSmtp(server, {
    host: options.host,
    port: options.port,
    log,
    name: 'submission SMTP',
    inData,
  });
}

/** AUTH needs TLS, except from this machine (loopback), where no network carries the password. */
export function mayAuthenticate(session: { secure: boolean; remoteAddress: string }): boolean {
  if (session.secure) return true;
  try {
    return ipaddr.process(session.remoteAddress).range() === 'loopback';
  } catch {
    return false;
  }
}
