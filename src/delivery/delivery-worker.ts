import { publicBaseUrl, type Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import type { Signer } from '../platform/signing.ts';
import { cappedText } from '../platform/text.ts';
import { recordTimelineEntry } from '../emails/timeline.ts';
import type { EmailStatus, RecipientFailureReason, RecipientStatus } from '../emails/statuses.ts';
import type { Job, JobResult } from '../queue/worker.ts';
import { wakeWorkers } from '../queue/jobs.ts';
import { subscribedAddresses } from '../contacts/subscriptions.ts';
import { unsubscribeUrl } from '../contacts/unsubscribe-link.ts';
import { addTracking } from '../tracking/tracking-links.ts';
import { returnPathAddress } from './return-path.ts';
import { suppressAddress } from '../suppressions/suppressions.ts';
import type { OutgoingMessage, RecipientResult, Transport } from './transport.ts';
import { isBadMailbox } from './smtp-outcome.ts';

// One 'deliver-email' job: hand the message to the transport for every recipient still pending, record
// each recipient's outcome with its timeline entry, and come back later for the deferred ones.
//
// The message moves queued/scheduled → sending in a transaction that holds its row lock, the same lock a
// cancel takes: whichever commits first wins, so a message is either cancelled or sent, never both.
// Outcomes are kept per recipient, so a retry (or a worker that died mid-send and whose job came back)
// sends only to the recipients with no outcome yet.
//
// Recipients who must not receive it fail without being sent to: those on the suppression list
// (reason `suppressed`) and, for a topic send, those not subscribed to the topic (`unsubscribed`), both
// decided now rather than at acceptance, so an unsubscribe before a scheduled send is honoured. A
// message that carries something per recipient (tracked links and pixel, a topic's one-click
// unsubscribe link) goes out as one copy per recipient; any other goes in one SMTP transaction.

interface EmailRow {
  id: string;
  organization_id: string;
  status: EmailStatus;
  scheduled_at: Date | null;
  from: string;
  to: string[];
  cc: string[];
  reply_to: string[];
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string> | null;
  topic_id: string | null;
  message_id: string;
  open_tracking: boolean;
  click_tracking: boolean;
  domain_name: string | null;
  dkim_selector: string | null;
  dkim_private_key: string | null;
}

interface RecipientRow {
  address: string;
  attempts: number;
  /** On the organization's suppression list. */
  suppressed: boolean;
}

/** The statuses of a message a worker takes: sending is one whose job came back (its worker died or deferred). */
const TAKEN: readonly EmailStatus[] = ['queued', 'scheduled', 'sending'];

/** Copies sent at once for a message that goes out one copy per recipient. */
const COPIES_IN_FLIGHT = 4;

export function deliveryHandler(db: Database, config: Config, transport: Transport, signer: Signer) {
  const schedule = config.deliveryRetrySchedule;
  const baseUrl = publicBaseUrl(config);

  return async (job: Job): Promise<JobResult> => {
    const emailId = String(job.payload.email_id);
    const taken = await takeForSending(db, emailId);
    if (taken === 'finished') return { done: true };
    if (taken instanceof Date) return { retryAt: taken, reason: 'scheduled for later' };
    const { email } = taken;
    let recipients = taken.recipients;

    const suppressed = recipients.filter((r) => r.suppressed);
    if (suppressed.length > 0) await failWithoutSending(db, email, suppressed, 'suppressed');
    recipients = recipients.filter((r) => !r.suppressed);
    if (email.topic_id !== null && recipients.length > 0) {
      const subscribed = await subscribedAddresses(
        db,
        email.organization_id,
        email.topic_id,
        recipients.map((r) => r.address),
      );
      const unsubscribed = recipients.filter((r) => !subscribed.has(r.address.toLowerCase()));
      if (unsubscribed.length > 0) await failWithoutSending(db, email, unsubscribed, 'unsubscribed');
      recipients = recipients.filter((r) => subscribed.has(r.address.toLowerCase()));
    }
    if (recipients.length === 0) return finishIfDone(db, email.id);

    const message = await outgoing(db, email, recipients, config, signer);
    const copies = personalized(email)
      ? recipients.map((r) => copyFor(message, email, r.address, { signer, baseUrl }))
      : [message];
    const attemptsOf = new Map(recipients.map((r) => [r.address, r.attempts + 1]));

    // Each copy's outcomes are stored as soon as it is sent, so a crash later in the loop sends again
    // only the copies whose outcome was not stored.
    let deferredUntil: Date | undefined;
    for (let i = 0; i < copies.length; i += COPIES_IN_FLIGHT) {
      await Promise.all(
        copies.slice(i, i + COPIES_IN_FLIGHT).map(async (copy) => {
          const results = await sendOrDefer(transport, copy);
          const next = await db.transaction(async (tx) => {
            let retryAt: Date | undefined;
            for (const result of results) {
              const attempts = attemptsOf.get(result.address) ?? 1;
              const at = await recordOutcome(tx, email, result, attempts, schedule);
              if (at && (!retryAt || at < retryAt)) retryAt = at;
            }
            return retryAt;
          });
          if (next && (!deferredUntil || next < deferredUntil)) deferredUntil = next;
        }),
      );
      wakeWorkers(db); // the outcomes queued webhook deliveries
    }
    if (deferredUntil) return { retryAt: deferredUntil, reason: 'deferred recipients' };
    return finishIfDone(db, email.id);
  };
}

/** Whether each recipient gets a copy of their own: tracking needs an HTML body, a topic needs its link. */
function personalized(email: EmailRow): boolean {
  return email.topic_id !== null || (email.html !== null && (email.open_tracking || email.click_tracking));
}

/** One recipient's copy: their own tracked links and pixel, their own one-click unsubscribe link. */
function copyFor(
  message: OutgoingMessage,
  email: EmailRow,
  recipient: string,
  links: { signer: Signer; baseUrl: string },
): OutgoingMessage {
  const html =
    message.html === undefined
      ? undefined
      : addTracking(message.html, {
          ...links,
          emailId: email.id,
          recipient,
          opens: email.open_tracking,
          clicks: email.click_tracking,
        });
  let headers = message.headers;
  if (email.topic_id !== null) {
    const url = unsubscribeUrl(links.signer, links.baseUrl, {
      organizationId: email.organization_id,
      address: recipient,
      topicId: email.topic_id,
      emailId: email.id,
    });
    // RFC 8058: both fields, covered by the DKIM signature (compose.ts). Senders cannot set them
    // (owned headers, validate-message.ts): the only unsubscribe link is one that works.
    headers = {
      ...headers,
      'List-Unsubscribe': `<${url}>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    };
  }
  return { ...message, html, headers, envelope: { ...message.envelope, to: [recipient] } };
}

/** A transport that throws (a message that cannot be composed, a bug) defers every recipient. */
async function sendOrDefer(transport: Transport, message: OutgoingMessage): Promise<RecipientResult[]> {
  try {
    return await transport.send(message);
  } catch (error) {
    const response = `Could not send: ${error instanceof Error ? error.message : String(error)}`;
    return message.envelope.to.map((address) => ({ address, outcome: 'deferred', smtpCode: undefined, response }));
  }
}

/**
 * Moves the message to `sending` and returns it with its pending recipients; 'finished' when there is
 * nothing to do (cancelled, done, deleted); a Date when it is scheduled later than this job ran.
 */
async function takeForSending(
  db: Database,
  emailId: string,
): Promise<{ email: EmailRow; recipients: RecipientRow[] } | 'finished' | Date> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<EmailRow>(
      `SELECT e.id, e.organization_id, e.status, e.scheduled_at, e."from", e."to", e.cc, e.reply_to, e.subject,
              e.html, e.text, e.headers, e.topic_id, e.message_id, o.open_tracking, o.click_tracking,
              d.name AS domain_name, d.dkim_selector, d.dkim_private_key
         FROM emails e JOIN organizations o ON o.id = e.organization_id LEFT JOIN domains d ON d.id = e.domain_id
        WHERE e.id = $1 FOR UPDATE OF e`,
      [emailId],
    );
    const email = rows[0];
    if (!email || !TAKEN.includes(email.status)) return 'finished';
    if (email.status !== 'sending') {
      if (email.scheduled_at && email.scheduled_at.getTime() > Date.now()) return email.scheduled_at;
      await tx.query(`UPDATE emails SET status = 'sending', sent_at = coalesce(sent_at, now()) WHERE id = $1`, [
        emailId,
      ]);
    }
    const recipients = await tx.query<RecipientRow>(
      `SELECT r.address, r.attempts,
              EXISTS (SELECT 1 FROM suppressions s
                       WHERE s.organization_id = $2 AND s.address = lower(r.address)) AS suppressed
         FROM email_recipients r WHERE r.email_id = $1 AND r.status = 'pending' ORDER BY r.address`,
      [emailId, email.organization_id],
    );
    return { email, recipients: recipients.rows };
  });
}

/** Recipients who must not receive the message fail without being sent to (email.suppressed / email.failed). */
async function failWithoutSending(
  db: Database,
  email: EmailRow,
  recipients: RecipientRow[],
  reason: Extract<RecipientFailureReason, 'suppressed' | 'unsubscribed'>,
): Promise<void> {
  await db.transaction(async (tx) => {
    for (const recipient of recipients) {
      const changed = await tx.query(
        `UPDATE email_recipients SET status = 'failed', failure_reason = $3, updated_at = now()
          WHERE email_id = $1 AND address = $2 AND status = 'pending'`,
        [email.id, recipient.address, reason],
      );
      if (changed.rowCount === 0) continue;
      await recordTimelineEntry(tx, {
        emailId: email.id,
        organizationId: email.organization_id,
        kind: 'failed',
        recipient: recipient.address,
        data: { reason },
      });
    }
  });
  wakeWorkers(db);
}

/**
 * Stores one recipient's result and its timeline entry. Returns when to try the recipient again, for a
 * deferral that has retries left.
 */
async function recordOutcome(
  tx: Queryable,
  email: EmailRow,
  result: RecipientResult,
  attempts: number,
  schedule: number[],
): Promise<Date | undefined> {
  const smtp = { smtp_code: result.smtpCode ?? null, response: cappedText(result.response, 1000) };
  const entry = { emailId: email.id, organizationId: email.organization_id, recipient: result.address };
  const update = (status: RecipientStatus, reason: RecipientFailureReason | null) =>
    tx.query(
      `UPDATE email_recipients SET status = $3, attempts = $4, failure_reason = $5, last_response = $6, updated_at = now()
        WHERE email_id = $1 AND address = $2 AND status = 'pending'`,
      [email.id, result.address, status, attempts, reason, smtp.response],
    );

  if (result.outcome === 'delivered') {
    await update('delivered', null);
    await recordTimelineEntry(tx, { ...entry, kind: 'delivered', data: smtp });
    return undefined;
  }
  if (result.outcome === 'bounced') {
    await update('bounced', null);
    // once: a bounce report (inbound/) may have recorded this recipient's bounce first.
    await recordTimelineEntry(tx, {
      ...entry,
      once: true,
      kind: 'bounced',
      data: { bounce: { type: 'hard', smtp_code: result.smtpCode ?? null, diagnostic: smtp.response } },
    });
    // A bad mailbox is not tried again: later messages to this address fail as suppressed.
    if (isBadMailbox(result)) await suppressAddress(tx, email.organization_id, result.address, 'hard_bounce');
    return undefined;
  }
  // Deferred: try again after the next delay of the schedule, or give up.
  const delay = schedule[attempts - 1];
  if (delay === undefined) {
    await update('failed', 'retries_exhausted');
    await recordTimelineEntry(tx, { ...entry, kind: 'failed', data: { reason: 'retries_exhausted', ...smtp } });
    return undefined;
  }
  await tx.query(
    `UPDATE email_recipients SET attempts = $3, last_response = $4, updated_at = now()
      WHERE email_id = $1 AND address = $2 AND status = 'pending'`,
    [email.id, result.address, attempts, smtp.response],
  );
  const retryAt = new Date(Date.now() + delay * 1000);
  await recordTimelineEntry(tx, {
    ...entry,
    kind: 'delivery_delayed',
    data: { ...smtp, attempt: attempts, next_attempt_at: retryAt.toISOString() },
  });
  return retryAt;
}

/** When no recipient is pending any more, the message is sent (every recipient has its outcome). */
async function finishIfDone(db: Database, emailId: string): Promise<JobResult> {
  await db.query(
    `UPDATE emails SET status = 'sent' WHERE id = $1 AND status = 'sending'
        AND NOT EXISTS (SELECT 1 FROM email_recipients WHERE email_id = $1 AND status = 'pending')`,
    [emailId],
  );
  return { done: true };
}

async function outgoing(
  db: Queryable,
  email: EmailRow,
  recipients: RecipientRow[],
  config: Config,
  signer: Signer,
): Promise<OutgoingMessage> {
  const attachments = await db.query<{
    filename: string;
    content_type: string;
    content_id: string | null;
    content: Uint8Array;
  }>(
    'SELECT filename, content_type, content_id, content FROM email_attachments WHERE email_id = $1 ORDER BY position',
    [email.id],
  );
  const fromAddress = /<([^<>]+)>$/.exec(email.from)?.[1] ?? email.from;
  return {
    emailId: email.id,
    messageId: email.message_id,
    from: email.from,
    to: email.to,
    cc: email.cc,
    replyTo: email.reply_to,
    subject: email.subject,
    html: email.html ?? undefined,
    text: email.text ?? undefined,
    headers: email.headers ?? undefined,
    attachments: attachments.rows.map((a) => ({
      filename: a.filename,
      contentType: a.content_type,
      contentId: a.content_id ?? undefined,
      content: Buffer.from(a.content),
    })),
    // With a return-path domain, bounces come back to this message's own VERP address (inbound/).
    envelope: {
      from: config.returnPathDomain ? returnPathAddress(signer, email.id, config.returnPathDomain) : fromAddress,
      to: recipients.map((r) => r.address),
    },
    dkim: {
      domain: email.domain_name ?? fromAddress.split('@')[1]!,
      selector: email.dkim_selector ?? '',
      privateKey: email.dkim_private_key ?? '',
    },
  };
}
