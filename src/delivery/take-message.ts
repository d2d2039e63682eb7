import type { Database } from '../platform/db/database.ts';
import type { EmailStatus } from '../emails/statuses.ts';

// Step 1, take the message: move it to `sending` and read the recipients that still have no outcome.
//
// The move happens in a transaction that holds the message's row lock, the same lock a cancel takes:
// whichever commits first wins, so a message is either cancelled or sent, never both. A message already
// `sending` is one whose job came back (a deferral, or a worker that died mid-send): it is taken again
// as it is, and only its pending recipients are read, so no one who has an outcome is sent to twice.

/** The message as the worker needs it: what it sends, and the organization's and domain's settings. */
export interface EmailToSend {
  id: string;
  organization_id: string;
  status: EmailStatus;
  created_at: Date;
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
  /** The switches in force: the sending domain's own, else the organization's. */
  open_tracking: boolean;
  click_tracking: boolean;
  domain_name: string | null;
  dkim_selector: string | null;
  dkim_private_key: string | null;
  /** Whether it has attachments to read (most messages have none: no query for them then). */
  has_attachments: boolean;
}

/** A recipient without an outcome yet. */
export interface PendingRecipient {
  address: string;
  /** Attempts made so far. */
  attempts: number;
  /** On the organization's suppression list. */
  suppressed: boolean;
}

/** The statuses of a message a worker takes. */
const TAKEN: readonly EmailStatus[] = ['queued', 'scheduled', 'sending'];

/**
 * Moves the message to `sending` and returns it with its pending recipients; 'finished' when there is
 * nothing to do (cancelled, done, deleted); a Date when it is scheduled later than this job ran.
 */
export async function takeMessage(
  db: Database,
  emailId: string,
): Promise<{ email: EmailToSend; recipients: PendingRecipient[] } | 'finished' | Date> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<EmailToSend>(
      `SELECT e.id, e.organization_id, e.status, e.scheduled_at, e.created_at, e."from", e."to", e.cc, e.reply_to, e.subject,
              e.html, e.text, e.headers, e.topic_id, e.message_id,
              coalesce(d.open_tracking, o.open_tracking) AS open_tracking,
              coalesce(d.click_tracking, o.click_tracking) AS click_tracking,
              d.name AS domain_name, d.dkim_selector, d.dkim_private_key,
              EXISTS (SELECT 1 FROM email_attachments a WHERE a.email_id = e.id) AS has_attachments
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
    const recipients = await tx.query<PendingRecipient>(
      `SELECT r.address, r.attempts,
              EXISTS (SELECT 1 FROM suppressions s
                       WHERE s.organization_id = $2 AND s.address = lower(r.address)) AS suppressed
         FROM email_recipients r WHERE r.email_id = $1 AND r.status = 'pending' ORDER BY r.address`,
      [emailId, email.organization_id],
    );
    return { email, recipients: recipients.rows };
  });
}
