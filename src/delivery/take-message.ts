import type { Database, Queryable } from '../platform/db/database.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import { workerBatchSize } from '../platform/metrics.ts';
import type { EmailStatus } from '../emails/statuses.ts';

// Step 1, take the message: move it to `sending` and read the recipients that still have no outcome.
//
// The move happens in a transaction that holds the message's row lock, the same lock a cancel takes:
// whichever commits first wins, so a message is either cancelled or sent, never both. A message already
// `sending` is one whose job came back (a deferral, or a worker that died mid-send): it is taken again
// as it is, and only its pending recipients are read, so no one who has an outcome is sent to twice.
// A message in the same take as others is decided the same way: each has its own lock and answer.

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

/** What taking a message gives: the message and its pending recipients, 'finished', or a later Date. */
export type Taken = { email: EmailToSend; recipients: PendingRecipient[] } | 'finished' | Date;

/** Messages taken in one transaction at most. */
const MAX_TAKEN_AT_ONCE = 100;

// Jobs that start while a take is in flight are taken together in the next transaction: a burst of
// messages costs a few statements per batch instead of a transaction per message.
const taker = batcherPerDatabase<string, Taken>({
  run: takeMessages,
  maxSize: MAX_TAKEN_AT_ONCE,
  done: (items) => workerBatchSize.observe({ batch: 'take-messages' }, items),
});

/**
 * Moves the message to `sending` and returns it with its pending recipients; 'finished' when there is
 * nothing to do (cancelled, done, deleted); a Date when it is scheduled later than this job ran.
 */
export function takeMessage(db: Database, emailId: string): Promise<Taken> {
  return taker(db).add(emailId);
}

/** takeMessage for several messages in one transaction (the caller's); one answer per id, in order. */
export async function takeMessages(tx: Queryable, emailIds: string[]): Promise<Taken[]> {
  // Locked in id order, so two transactions that take overlapping sets cannot deadlock.
  const { rows } = await tx.query<EmailToSend>(
    `SELECT e.id, e.organization_id, e.status, e.scheduled_at, e.created_at, e."from", e."to", e.cc, e.reply_to, e.subject,
            e.html, e.text, e.headers, e.topic_id, e.message_id,
            coalesce(d.open_tracking, o.open_tracking) AS open_tracking,
            coalesce(d.click_tracking, o.click_tracking) AS click_tracking,
            d.name AS domain_name, d.dkim_selector, d.dkim_private_key,
            EXISTS (SELECT 1 FROM email_attachments a WHERE a.email_id = e.id) AS has_attachments
       FROM emails e JOIN organizations o ON o.id = e.organization_id LEFT JOIN domains d ON d.id = e.domain_id
      WHERE e.id = ANY($1::uuid[]) ORDER BY e.id FOR UPDATE OF e`,
    [[...new Set(emailIds)]],
  );
  const answers = new Map<string, Taken>();
  const toMove: string[] = [];
  const taken: EmailToSend[] = [];
  for (const email of rows) {
    if (!TAKEN.includes(email.status)) answers.set(email.id, 'finished');
    else if (email.status !== 'sending' && email.scheduled_at && email.scheduled_at.getTime() > Date.now())
      answers.set(email.id, email.scheduled_at);
    else {
      if (email.status !== 'sending') toMove.push(email.id);
      taken.push(email);
    }
  }
  if (toMove.length > 0) {
    await tx.query(
      `UPDATE emails SET status = 'sending', sent_at = coalesce(sent_at, now()) WHERE id = ANY($1::uuid[])`,
      [toMove],
    );
  }
  if (taken.length > 0) {
    const { rows: pending } = await tx.query<PendingRecipient & { email_id: string }>(
      `SELECT r.email_id, r.address, r.attempts,
              EXISTS (SELECT 1 FROM suppressions s
                       WHERE s.organization_id = e.organization_id AND s.address = lower(r.address)) AS suppressed
         FROM email_recipients r JOIN emails e ON e.id = r.email_id
        WHERE r.email_id = ANY($1::uuid[]) AND r.status = 'pending' ORDER BY r.email_id, r.address`,
      [taken.map((email) => email.id)],
    );
    const byEmail = new Map<string, PendingRecipient[]>(taken.map((email) => [email.id, []]));
    for (const { email_id, address, attempts, suppressed } of pending)
      byEmail.get(email_id)!.push({ address, attempts, suppressed });
    for (const email of taken) answers.set(email.id, { email, recipients: byEmail.get(email.id)! });
  }
  return emailIds.map((id) => answers.get(id) ?? 'finished');
}
