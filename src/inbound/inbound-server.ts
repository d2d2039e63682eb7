import type { Logger } from '../platform/logger.ts';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerAddress, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { Database } from '../platform/db/database.ts';
import type { Signer } from '../platform/signing.ts';
import { REPORT_PARSER_OPTIONS, readDeliveryReports } from './delivery-reports.ts';
import { broadcastAutoPause, existingAutoPause, type AutoPauseSettings } from '../broadcasts/auto-pause.ts';
import { recordReports } from './record-report.ts';
import { readReturnPath, type ReturnPathTarget } from '../delivery/return-path.ts';
import { collectMessage, listenSmtp, SmtpReply, type Listening } from '../platform/smtp-listener.ts';
import { DmarcReportError, isReportFile, readDmarcReport } from './dmarc-reports.ts';
import { storeDmarcReport } from '../domains/dmarc.ts';
import { dmarcAddress } from '../domains/dmarc-address.ts';
import { decideRecipient } from '../receiving/routes.ts';
import {
  receiveMessage,
  UnreadableMessage,
  type ReceiveDeps,
  type ReceivedRecipient,
} from '../receiving/receive-message.ts';
import type { Authenticator } from '../receiving/authentication.ts';
import type { SpamChecker } from '../receiving/spam-check.ts';

// The inbound SMTP listener: the MX of the return-path domain and of every receiving domain.
//
// Reports. It takes the bounce reports (RFC 3464) and feedback-loop complaints (RFC 5965) that come back
// to a copy's VERP return path: reports cannot be forged for messages by guessing their ids, since only
// a return path Mailroom signed is one. A report counts only for the recipient its return path names.
// Only the local part is read (return-path.ts), so the listener takes the return paths at the server's
// return-path domain and at every domain's own custom return path (<label>.<domain>, whose MX points
// here) alike. Anything sent to a return path that is not a report (auto-replies, spam) is accepted and
// dropped, so that it does not bounce back and forth. It also takes DMARC aggregate reports at
// `dmarc@<return-path domain>` (the `rua` address): each report file attached is read within its limits
// (dmarc-reports.ts) and stored for the sending domain it is about; a message there that carries no
// valid report is refused (550) with the reason.
//
// Received mail. Any other recipient is put to the inbound routes (receiving/routes.ts) at RCPT TO:
// accepted for the organization whose receiving domain it is at, or refused there with the routes'
// code. Mail is never accepted and bounced later (no backscatter), and the listener is no relay. After
// DATA the message is stored once per organization among its recipients (receiving/receive-message.ts):
// parsed, its sender's authentication checked, scanned, routed, announced.
//
// For both: one size limit for the session (MAILROOM_INBOUND_MAX_BYTES), advertised in EHLO and
// enforced while the message arrives (past it nothing more is kept, and the answer is 552); STARTTLS
// with the installation's certificate. A message is answered 250 only once everything it brings is
// committed, so if anything fails before that the sending server keeps it and tries again (451 for a
// database error; storing again the same bytes stores nothing new). A connection lost in DATA stores
// nothing.

export interface InboundServerOptions {
  db: Database;
  signer: Signer;
  host: string;
  /** 0 picks a free port. */
  port: number;
  log: Logger;
  /** MAILROOM_RETURN_PATH_DOMAIN: DMARC reports are taken at dmarc@ it. Unset: none. */
  returnPathDomain?: string | undefined;
  /** MAILROOM_INBOUND_MAX_BYTES. Unset: 10 MiB, as much as reports need. */
  maxMessageBytes?: number | undefined;
  /** The certificate STARTTLS offers. Unset: no STARTTLS. */
  tls?: { key: string; cert: string } | undefined;
  /** Checks a received message's sender authentication. Unset: not checked. */
  authenticate?: Authenticator | undefined;
  /** Scans a received message. Unset: not scanned. */
  spamCheck?: SpamChecker | undefined;
  /**
   * MAILROOM_BROADCAST_PAUSE_*: a broadcast copy's hard bounce or complaint may pause its broadcast.
   * Unset: the process's automatic pause if its delivery worker made one, else none.
   */
  autoPause?: AutoPauseSettings | undefined;
}

export type InboundServer = Listening;

/** The limit when none is given: reports are small, even with the original message attached. */
const REPORTS_MAX_BYTES = 10 * 1024 * 1024;
/** RFC 5321 §4.5.3.1.8: a server must take at least 100 recipients per transaction. */
const MAX_RECIPIENTS = 100;
/** Sessions at once; one more is told 421 (try again later), as an MTA expects of a busy server. */
const MAX_CLIENTS = 100;
/** On close, how long a transaction in progress may take before its session is cut (421). */
const CLOSE_GRACE_MS = 5000;

export async function startInboundServer(options: InboundServerOptions): Promise<InboundServer> {
  const { db, signer, log } = options;
  const autoPause = options.autoPause ? broadcastAutoPause(db, options.autoPause) : existingAutoPause(db);
  const maxBytes = options.maxMessageBytes ?? REPORTS_MAX_BYTES;
  const receiveDeps: ReceiveDeps = {
    db,
    signer,
    log,
    authenticate: options.authenticate,
    spamCheck: options.spamCheck,
  };
  /** What RCPT TO decided for each recipient accepted for received mail (smtp-server keeps the object). */
  const accepted = new WeakMap<SMTPServerAddress, ReceivedRecipient>();
  const dmarcMailbox = options.returnPathDomain === undefined ? undefined : dmarcAddress(options.returnPathDomain);
  const isDmarcMailbox = (address: string) => dmarcMailbox !== undefined && address.toLowerCase() === dmarcMailbox;
  /** Sessions whose DATA is being received or recorded: close() waits for these, not for idle ones. */
  const inData = new Map<string, Promise<void>>();

  const server = new SMTPServer({
    banner: 'Mailroom',
    logger: false,
    authOptional: true,
    disabledCommands: options.tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(options.tls ? { key: options.tls.key, cert: options.tls.cert } : {}),
    // No DNS look-up of every client: nothing here needs its host name.
    disableReverseLookup: true,
    size: maxBytes,
    maxRecipients: MAX_RECIPIENTS,
    maxClients: MAX_CLIENTS,
    closeTimeout: CLOSE_GRACE_MS,

    onRcptTo(address, _session, callback) {
      if (readReturnPath(signer, address.address) !== null || isDmarcMailbox(address.address)) return callback();
      decideRecipient(db, address.address).then(
        (decision) => {
          if (!decision.accept) return callback(new SmtpReply(decision.code, decision.message));
          const { organizationId, domainId } = decision;
          accepted.set(address, { address: address.address, organizationId, domainId });
          callback();
        },
        (error: unknown) => {
          log.error({ err: error, recipient: address.address }, 'could not decide on a recipient; told to retry');
          callback(new SmtpReply(451, '4.3.0 Try again later'));
        },
      );
    },

    onData(stream, session, callback) {
      const handled = receive(stream, session)
        .then(
          () => callback(),
          (error: unknown) =>
            callback(error instanceof SmtpReply ? error : new SmtpReply(451, '4.3.0 Try again later')),
        )
        .finally(() => inData.delete(session.id));
      inData.set(session.id, handled);
    },
  });

  async function receive(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<void> {
    const raw = await collectMessage(stream, maxBytes);
    const mailFrom = session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address;
    const recipients = session.envelope.rcptTo.flatMap((rcpt) => accepted.get(rcpt) ?? []);
    if (recipients.length === 0) return receiveReports(raw, session);
    try {
      const { ids } = await receiveMessage(receiveDeps, {
        raw,
        mailFrom,
        recipients,
        // An IPv4 client of a listener on '::' appears as ::ffff:a.b.c.d; stored as the IPv4 address it is.
        clientAddress: session.remoteAddress.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, ''),
        helo: session.hostNameAppearsAs,
        tls: session.secure,
      });
      log.info({ ids, from: mailFrom, recipients: recipients.length, size: raw.length }, 'message received');
    } catch (error) {
      if (error instanceof UnreadableMessage) {
        log.info({ from: mailFrom, err: error }, 'received message refused: it cannot be read');
        throw new SmtpReply(554, '5.6.0 Message cannot be read (malformed or too many MIME parts)');
      }
      log.error({ from: mailFrom, err: error }, 'could not store a received message; the sender was told to retry');
      throw error;
    }
    // Return paths or the rua address named in the same transaction: what they would refuse is not
    // refused any more, since the message was taken for the others.
    if (recipients.length < session.envelope.rcptTo.length) {
      await receiveReports(raw, session).catch((error: unknown) => {
        if (!(error instanceof SmtpReply) || error.responseCode < 500) throw error;
        log.info({ from: mailFrom, err: error }, 'report part of a received message refused; the message was taken');
      });
    }
  }

  async function receiveReports(raw: Buffer, session: SMTPServerSession): Promise<void> {
    if (session.envelope.rcptTo.some((rcpt) => isDmarcMailbox(rcpt.address))) {
      return receiveDmarc(raw, session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address);
    }
    // One target per distinct return path (a report sent to the same address twice counts once).
    const targets = new Map<string, ReturnPathTarget>();
    for (const rcpt of session.envelope.rcptTo) {
      const target = readReturnPath(signer, rcpt.address);
      if (target) targets.set(`${target.emailId}/${target.recipientDigest}`, target);
    }
    const emailIds = [...new Set([...targets.values()].map((target) => target.emailId))];
    const from = session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address;

    let mail: ParsedMail;
    try {
      mail = await simpleParser(raw, REPORT_PARSER_OPTIONS);
    } catch (error) {
      log.info({ emailIds, from, err: error }, 'inbound message could not be parsed: dropped');
      return;
    }
    const { reports, originalRecipients } = readDeliveryReports(mail);
    if (reports.length === 0) {
      log.info({ emailIds, from, subject: mail.subject }, 'inbound message is not a delivery report: dropped');
      return;
    }
    let recorded = 0;
    try {
      for (const target of targets.values()) {
        recorded += await recordReports(db, signer, target, reports, originalRecipients, autoPause);
      }
    } catch (error) {
      log.error({ emailIds, err: error }, 'could not record a delivery report; the sender was told to retry');
      throw error;
    }
    const kinds = reports.map((report) => report.kind);
    log.info({ emailIds, from, reports: kinds, recorded }, 'delivery report received');
  }

  /** A message to the rua address: every report file in it stored, or the message refused with why. */
  async function receiveDmarc(raw: Buffer, from: string): Promise<void> {
    let mail: ParsedMail;
    try {
      mail = await simpleParser(raw, { skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true });
    } catch {
      throw new SmtpReply(550, '5.6.0 Not a message this server can read');
    }
    // Some reporters send the file as the message's body itself (Content-Type: application/gzip).
    const files = mail.attachments.filter((attachment) => isReportFile(attachment));
    if (files.length === 0) throw new SmtpReply(550, '5.6.0 No DMARC aggregate report attached (XML, gzip or zip)');
    const reports = [];
    for (const file of files) {
      try {
        reports.push(await readDmarcReport(file));
      } catch (error) {
        if (!(error instanceof DmarcReportError)) throw error;
        log.info({ from, err: error }, 'DMARC report refused');
        throw new SmtpReply(550, `5.6.0 Not a valid DMARC aggregate report: ${error.message}`.slice(0, 400));
      }
    }
    for (const report of reports) {
      const stored = await storeDmarcReport(db, report);
      log.info(
        { from, domain: report.domain, reporter: report.reporter, records: report.records.length, stored },
        'DMARC report received',
      );
    }
  }

  return listenSmtp(server, { host: options.host, port: options.port, log, name: 'inbound SMTP', inData });
}
