import type { Logger } from '../platform/logger.ts';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { Database } from '../platform/db/database.ts';
import type { Signer } from '../platform/signing.ts';
import { REPORT_PARSER_OPTIONS, readDeliveryReports } from './delivery-reports.ts';
import { recordReports } from './record-report.ts';
import { readReturnPath, type ReturnPathTarget } from '../delivery/return-path.ts';
import { collectMessage, listenSmtp, SmtpReply, type Listening } from '../platform/smtp-listener.ts';
import { DmarcReportError, isReportFile, readDmarcReport } from './dmarc-reports.ts';
import { storeDmarcReport } from '../domains/dmarc.ts';
import { dmarcAddress } from '../domains/dmarc-address.ts';

// The inbound SMTP listener: the MX of the return-path domain. It takes the bounce reports (RFC 3464)
// and feedback-loop complaints (RFC 5965) that come back to a copy's VERP return path, and nothing
// else: a recipient that is not a return-path address Mailroom signed is refused, so it is no relay
// and reports cannot be forged for messages by guessing their ids. A report counts only for the
// recipient its return path names. Only the local part is read (return-path.ts), so the listener takes
// the return paths at the server's return-path domain and at every domain's own custom return path
// (<label>.<domain>, whose MX points here) alike. A message is answered 250 only
// once what it reports is committed, so if anything fails before that the sending server keeps it and
// tries again (451 for a database error). Anything that is not a report (auto-replies, spam) is
// accepted and dropped, so that it does not bounce back and forth.
//
// It also takes DMARC aggregate reports at `dmarc@<return-path domain>` (the `rua` address): each
// report file attached is read within its limits (dmarc-reports.ts) and stored for the sending domain it
// is about. A message there that carries no valid report is refused (550) with the reason.

export interface InboundServerOptions {
  db: Database;
  signer: Signer;
  host: string;
  /** 0 picks a free port. */
  port: number;
  log: Logger;
  /** MAILROOM_RETURN_PATH_DOMAIN: DMARC reports are taken at dmarc@ it. Unset: none. */
  returnPathDomain?: string | undefined;
}

export type InboundServer = Listening;

/** Largest message taken (10 MiB): reports are small, even with the original message attached. */
const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;
/** A report goes to one return path; a transaction naming many is not a report. */
const MAX_RECIPIENTS = 100;
/** Sessions at once; one more is told 421 (try again later), as an MTA expects of a busy server. */
const MAX_CLIENTS = 100;
/** On close, how long a transaction in progress may take before its session is cut (421). */
const CLOSE_GRACE_MS = 5000;

export async function startInboundServer(options: InboundServerOptions): Promise<InboundServer> {
  const { db, signer, log } = options;
  const dmarcMailbox = options.returnPathDomain === undefined ? undefined : dmarcAddress(options.returnPathDomain);
  const isDmarcMailbox = (address: string) => dmarcMailbox !== undefined && address.toLowerCase() === dmarcMailbox;
  /** Sessions whose DATA is being received or recorded: close() waits for these, not for idle ones. */
  const inData = new Map<string, Promise<void>>();

  const server = new SMTPServer({
    banner: 'Mailroom: delivery reports only',
    logger: false,
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    // No DNS look-up of every client: nothing here needs its host name.
    disableReverseLookup: true,
    size: MAX_MESSAGE_BYTES,
    maxRecipients: MAX_RECIPIENTS,
    maxClients: MAX_CLIENTS,
    closeTimeout: CLOSE_GRACE_MS,

    onRcptTo(address, _session, callback) {
      if (readReturnPath(signer, address.address) !== null || isDmarcMailbox(address.address)) return callback();
      callback(new SmtpReply(550, '5.1.1 No such recipient here: this server takes delivery reports only'));
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
    const raw = await collectMessage(stream, MAX_MESSAGE_BYTES);
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
        recorded += await recordReports(db, signer, target, reports, originalRecipients);
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
