import type { Database, Queryable } from '../platform/db/database.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import { workerBatchSize } from '../platform/metrics.ts';
import type { EmailStatus } from '../emails/statuses.ts';
import { fanOutCtes } from '../webhooks/fan-out.ts';
import { emailEventFieldsSql } from '../webhooks/event-payloads.ts';
import type { DomainTls } from '../domains/domain-options.ts';

// Step 1, take the message: move it to `sending` and read the recipients that still have no outcome.
//
// The move happens in a statement that holds the message's row lock, the same lock a cancel takes:
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
  /** The broadcast it is a copy of (one recipient, a contact), or null for any other message. */
  broadcast_id: string | null;
  message_id: string;
  /** The signed reply address it goes out with as Reply-To (emails/reply-address.ts); null: its reply_to. */
  reply_address: string | null;
  /** The switches in force: the sending domain's own, else the organization's. */
  open_tracking: boolean;
  click_tracking: boolean;
  domain_name: string | null;
  dkim_selector: string | null;
  dkim_private_key: string | null;
  /** The sending domain's return-path label and tracking subdomain label (domain-options.ts), if any. */
  custom_return_path: string | null;
  tracking_subdomain: string | null;
  /** The sending domain's Resend option: 'enforced' never goes in the clear (null: no domain row). */
  domain_tls: DomainTls | null;
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
  /** A broadcast copy's contact who has unsubscribed (contacts.unsubscribed) since the audience was taken. */
  unsubscribed: boolean;
  /** The traffic-shaping hold it waits in (its delivery_delayed entry is written), if any. */
  hold_reason: string | null;
}

/**
 * The moment a message is sent: taken for its first delivery attempt (a scheduled one when its time has
 * come), it moves from queued or scheduled to `sending`, sent_at is set, and email.sent is emitted, once
 * per message, since only that first take makes the move. CTEs of the take statement over its `locked`
 * rows; the event's created_at is sent_at.
 */
const SENT_MOMENT = `moved AS (
       UPDATE emails e SET status = 'sending', sent_at = coalesce(e.sent_at, now())
         FROM locked WHERE e.id = locked.id AND locked.take = 'take' AND locked.status <> 'sending'
       RETURNING e.id, e.organization_id, e.created_at, e.sent_at, e."from", e."to", e.subject, e.message_id,
                 e.tags, e.headers, e.template, e.broadcast_id
     ),
     event AS (
       SELECT gen_random_uuid() AS id, moved.sent_at AS created_at, moved.organization_id,
              ${emailEventFieldsSql('moved')} AS data
         FROM moved
     )${fanOutCtes({ org: 'event.organization_id', type: `'email.sent'::text`, data: 'event.data' })}`;

/** What taking a message gives: the message and its pending recipients, 'finished', or a later Date. */
export type Taken = { email: EmailToSend; recipients: PendingRecipient[] } | 'finished' | Date;

/** Messages taken by one statement at most. */
const MAX_TAKEN_AT_ONCE = 100;

// Jobs that start while a take is in flight are taken together by the next statement: a burst of
// messages costs one statement per batch instead of a transaction per message.
const taker = batcherPerDatabase<string, Taken>({
  transaction: false,
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

/** takeMessage for several messages with one statement; one answer per id, in order. */
export async function takeMessages(db: Queryable, emailIds: string[]): Promise<Taken[]> {
  // Locked in id order, so two statements that take overlapping sets cannot deadlock. A message is taken
  // when it is `sending` already, or `queued`/`scheduled` and due (by the database's clock, the one job
  // times are kept in); only those are moved to `sending` and have their pending recipients read.
  const { rows } = await db.query<
    EmailToSend & { take: 'take' | 'later' | 'finished'; pending: PendingRecipient[] | null }
  >(
    `WITH locked AS (
       SELECT e.id, e.organization_id, e.status, e.scheduled_at, e.created_at, e."from", e."to", e.cc, e.reply_to,
              e.subject, e.html, e.text, e.headers, e.topic_id, e.broadcast_id, e.message_id, e.reply_address,
              coalesce(d.open_tracking, o.open_tracking) AS open_tracking,
              coalesce(d.click_tracking, o.click_tracking) AS click_tracking,
              d.name AS domain_name, d.dkim_selector, d.dkim_private_key, d.tls AS domain_tls,
              -- A return path or tracking name is used once DNS answers for it: before its MX, bounces
              -- would have nowhere to go (and receivers checking the sender's domain defer); before its
              -- CNAME, every link and pixel would be dead. Until then the server-wide ones serve.
              CASE WHEN d.record_status ->> 'ReturnPathMX' = 'verified' THEN d.custom_return_path END
                AS custom_return_path,
              CASE WHEN d.record_status ->> 'Tracking' = 'verified' THEN d.tracking_subdomain END
                AS tracking_subdomain,
              EXISTS (SELECT 1 FROM email_attachments a WHERE a.email_id = e.id) AS has_attachments,
              CASE WHEN e.status = 'sending' THEN 'take'
                   WHEN e.status NOT IN ('queued', 'scheduled') THEN 'finished'
                   WHEN e.scheduled_at > now() THEN 'later'
                   ELSE 'take' END AS take
         FROM emails e JOIN organizations o ON o.id = e.organization_id LEFT JOIN domains d ON d.id = e.domain_id
        WHERE e.id = ANY($1::uuid[]) ORDER BY e.id FOR UPDATE OF e
     ),
     ${SENT_MOMENT}
     SELECT locked.*,
            CASE WHEN take = 'take' THEN coalesce((
              SELECT json_agg(json_build_object('address', r.address, 'attempts', r.attempts, 'hold_reason', r.hold_reason, 'suppressed',
                       EXISTS (SELECT 1 FROM suppressions s
                                WHERE s.organization_id = locked.organization_id AND s.address = lower(r.address)),
                       'unsubscribed', locked.broadcast_id IS NOT NULL AND EXISTS (
                         SELECT 1 FROM contacts c
                          WHERE c.organization_id = locked.organization_id AND lower(c.email) = lower(r.address)
                            AND c.unsubscribed))
                       ORDER BY r.address)
                FROM email_recipients r WHERE r.email_id = locked.id AND r.status = 'pending'), '[]') END AS pending
       FROM locked`,
    [[...new Set(emailIds)]],
  );
  const answers = new Map<string, Taken>();
  for (const { take, pending, ...email } of rows) {
    if (take === 'finished') answers.set(email.id, 'finished');
    else if (take === 'later') answers.set(email.id, email.scheduled_at!);
    else answers.set(email.id, { email: email as EmailToSend, recipients: pending ?? [] });
  }
  return emailIds.map((id) => answers.get(id) ?? 'finished');
}
