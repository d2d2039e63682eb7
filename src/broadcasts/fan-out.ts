import { publicBaseUrl, type Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { newRowId } from '../platform/ids.ts';
import { parseMailbox, type Mailbox } from '../platform/addresses.ts';
import type { Signer } from '../platform/signing.ts';
import type { Job, JobResult } from '../queue/worker.ts';
import { findSendingDomain, type SendingDomain } from '../domains/domains.ts';
import type { PreparedMessage } from '../emails/prepare-message.ts';
import { storeMessages } from '../emails/store-messages.ts';
import { DELIVERY_QUEUE, broadcastShareKey } from '../emails/delivery-job.ts';
import { countSoonDueSharedJobs, soonestSharedJob } from '../queue/jobs.ts';
import { reserveQuota } from '../emails/sending-limits.ts';
import { replyAddress } from '../emails/reply-address.ts';
import { unsubscribeUrl } from '../contacts/unsubscribe-link.ts';
import { personalizeContent, type ContactFields } from './personalize.ts';
import { SNAPSHOT_STATUSES, takeSnapshotIn } from './snapshot.ts';
import { pauseBroadcast } from './send-broadcast.ts';

// The 'broadcast-fan-out' job: the snapshot of the audience when the job first runs (snapshot.ts), then
// the copies. Each batch is ONE transaction that claims up to BATCH pending recipients (FOR UPDATE SKIP
// LOCKED, in contact order), stores one ordinary email per contact with its delivery job
// (store-messages.ts, emails.broadcast_id set), marks those recipients `queued` with their email's id,
// and charges the monthly quota. A crash at any moment therefore leaves each contact with exactly its one
// email or still pending: never both, never neither. Several runs at once (two processes, a run whose
// lease ran out) take disjoint rows and the rows one holds are skipped by the others.
//
// Each batch first takes the broadcast's row FOR SHARE and goes on only while the broadcast is queued:
// pause and cancel take it FOR UPDATE, so they wait for a batch in flight (and then act on its copies
// too) or the batch waits for them and stops.

/** Recipients turned into emails per transaction. */
export const BATCH = 500;

/**
 * Copies made ahead of delivery at most: the fan-out makes more only while fewer of the broadcast's
 * copies than this are waiting to be sent (due within WINDOW_DUE_MS; copies deferred for longer, by a
 * throttled destination, do not hold it up). So a broadcast stays `queued` until its last copies are
 * near the front, pause and the automatic pause stop all but this many, and the jobs table does not hold
 * a whole audience at once.
 */
export const WINDOW = 2000;
const WINDOW_DUE_MS = 60_000;
/** How long a run whose window is full waits (its worker slot free) before it looks again. */
const WINDOW_RETRY_MS = 500;

/** How long a run whose pending rows are all held by another run waits before it looks again. */
const HELD_RETRY_MS = 5000;

interface BroadcastContent {
  organization_id: string;
  status: string;
  from: string;
  subject: string;
  reply_to: string[] | null;
  preview_text: string | null;
  html: string | null;
  text: string | null;
  topic_id: string | null;
}

export interface FanOutContext {
  db: Database;
  config: Config;
  signer: Signer;
  /** True once the process is stopping: the run ends after its batch and the job runs again elsewhere. */
  stopping?: () => boolean;
  /** Copies made ahead of delivery at most (WINDOW when absent). */
  window?: number;
}

/** The job handler of 'broadcast-fan-out' (payload `broadcast_id`). */
export function fanOutHandler(context: FanOutContext): (job: Job) => Promise<JobResult> {
  return async (job) => {
    const broadcastId = job.payload.broadcast_id;
    if (typeof broadcastId !== 'string') return { done: true };
    return fanOut(context, broadcastId);
  };
}

/** Runs the fan-out of one broadcast until it is sent, paused or canceled (or the process stops). */
export async function fanOut(context: FanOutContext, broadcastId: string): Promise<JobResult> {
  const { db } = context;
  const snapshot = await db.transaction((tx) => takeSnapshotIn(tx, broadcastId, SNAPSHOT_STATUSES));
  if (!snapshot.taken && 'failed' in snapshot) return { done: true };

  const { rows } = await db.query<BroadcastContent>(
    `SELECT organization_id, status, "from", subject, reply_to, preview_text, html, text, topic_id
       FROM broadcasts WHERE id = $1`,
    [broadcastId],
  );
  const broadcast = rows[0];
  if (!broadcast || broadcast.status !== 'queued') return { done: true };
  const org = broadcast.organization_id;

  // The sender is checked again now: its domain may have lost its verification since the send was asked.
  let from: Mailbox;
  let domain: SendingDomain | undefined;
  try {
    from = parseMailbox(broadcast.from, 'from');
    domain = await findSendingDomain(db, org, from.domain);
  } catch (error) {
    if (!(error instanceof ServiceError)) throw error;
    await pauseIfQueued(db, org, broadcastId, `The from address cannot be sent from: ${error.message}`);
    return { done: true };
  }
  if (!domain) {
    await pauseIfQueued(
      db,
      org,
      broadcastId,
      `The domain ${from.domain} is no longer a verified domain of this organization`,
    );
    return { done: true };
  }
  const fallbacks = await propertyFallbacks(db, org);
  const make = copyMaker(context, broadcastId, broadcast, from, domain, fallbacks);

  for (;;) {
    if (context.stopping?.()) return { retryAt: new Date(), reason: 'the process is stopping' };
    const window = context.window ?? WINDOW;
    const waiting = await countSoonDueSharedJobs(
      db,
      DELIVERY_QUEUE,
      broadcastShareKey(broadcastId),
      WINDOW_DUE_MS,
      window,
    );
    // The window is topped up in batches of a quarter of it (BATCH at most), not copy by copy as they
    // leave: each batch is a transaction with a commit and a fixed set of statements, so a few large
    // ones cost the database far less per copy than many small ones. A quarter keeps three quarters of
    // the window queued for delivery meanwhile.
    if (window - waiting < Math.min(BATCH, window / 4)) {
      // Every recipient has its copy already: nothing to wait for.
      const { rowCount } = await db.query(
        "SELECT 1 FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'pending' LIMIT 1",
        [broadcastId],
      );
      if (rowCount === 0) break;
      return { retryAt: new Date(Date.now() + WINDOW_RETRY_MS), reason: `${waiting} copies waiting to be sent` };
    }
    const batch = await db.transaction((tx) =>
      fanOutBatch(tx, broadcastId, org, make, Math.min(BATCH, window - waiting)),
    );
    if (batch.quotaExhausted) {
      await pauseIfQueued(
        db,
        org,
        broadcastId,
        'The monthly quota of this organization is used up: the broadcast goes on when it is resumed',
      );
      return { done: true };
    }
    if (batch.stopped) return { done: true };
    if (batch.claimed === 0) break;
  }
  return finish(db, broadcastId);
}

interface BatchResult {
  /** Recipients claimed (stored, or canceled for a contact deleted since the snapshot). */
  claimed: number;
  /** The broadcast is no longer queued (paused, canceled, gone). */
  stopped: boolean;
  quotaExhausted: boolean;
}

type CopyMaker = (recipient: ClaimedRecipient) => PreparedMessage;

interface ClaimedRecipient {
  contact_id: string;
  /** The address when the audience was taken. */
  email: string;
  /** The contact's address now; null when the contact was deleted. */
  current_email: string | null;
  /** Null when the contact was deleted after the snapshot. */
  found: boolean | null;
  first_name: string | null;
  last_name: string | null;
  properties: Record<string, string | number> | null;
}

async function fanOutBatch(
  tx: Queryable,
  broadcastId: string,
  org: string,
  make: CopyMaker,
  limit: number,
): Promise<BatchResult> {
  const { rows: status } = await tx.query<{ status: string }>('SELECT status FROM broadcasts WHERE id = $1 FOR SHARE', [
    broadcastId,
  ]);
  if (status[0]?.status !== 'queued') return { claimed: 0, stopped: true, quotaExhausted: false };

  const { rows: claimed } = await tx.query<ClaimedRecipient>(
    `SELECT r.contact_id, r.email, c.email AS current_email, c.id IS NOT NULL AS found, c.first_name, c.last_name, c.properties
       FROM broadcast_recipients r LEFT JOIN contacts c ON c.id = r.contact_id
      WHERE r.broadcast_id = $1 AND r.status = 'pending'
      ORDER BY r.contact_id LIMIT ${limit}
      FOR UPDATE OF r SKIP LOCKED`,
    [broadcastId],
  );
  if (claimed.length === 0) return { claimed: 0, stopped: false, quotaExhausted: false };

  // A contact deleted since the snapshot gets nothing: its row is canceled.
  const gone = claimed.filter((r) => !r.found).map((r) => r.contact_id);
  const live = claimed.filter((r) => r.found);
  // Each copy has one recipient, charged to the monthly quota like any email; those past the end of the
  // quota stay pending, and the broadcast pauses (the caller) until it is resumed.
  const quota = await reserveQuota(tx, org, live.length);
  const fitting = live.slice(
    0,
    quota.fit(
      live.map(() => 1),
      false,
    ),
  );
  const messages = fitting.map(make);
  if (messages.length > 0) {
    await storeMessages(
      tx,
      messages.map((message) => ({ organizationId: org, message })),
      { remember: [] },
    );
  }
  const queued = fitting.map((r, i) => ({ contact_id: r.contact_id, email_id: messages[i]!.id }));
  await tx.query(
    `WITH given AS (
       SELECT * FROM jsonb_to_recordset($2::jsonb) AS g(contact_id uuid, email_id uuid)
       UNION ALL SELECT unnest($3::uuid[]), NULL
     )
     UPDATE broadcast_recipients r SET status = CASE WHEN given.email_id IS NULL THEN 'canceled' ELSE 'queued' END,
            email_id = given.email_id
       FROM given WHERE r.broadcast_id = $1 AND r.contact_id = given.contact_id`,
    [broadcastId, JSON.stringify(queued), gone],
  );
  // Last before COMMIT: a usage row stays locked from the charge to the end of the transaction.
  await quota.charge();
  return {
    claimed: gone.length + fitting.length,
    stopped: false,
    quotaExhausted: fitting.length < live.length,
  };
}

/** How often a broadcast whose copies are all made looks whether they have all left. */
const LEAVING_RETRY_MS = 2000;
/** At most this long between looks when its remaining copies are deferred for longer. */
const LEAVING_RETRY_MAX_MS = 60_000;

/**
 * No pending recipient is left to claim. The broadcast is `sent` once every copy has left too (its
 * delivery job finished: delivered, bounced or failed): until then it stays `queued`, so that a pause,
 * the automatic one included, and a cancel can still stop the copies not yet sent, and this run looks
 * again later. Also later when some pending rows are held by another run right now (it finishes them;
 * this one looks again in case that run dies).
 */
async function finish(db: Database, broadcastId: string): Promise<JobResult> {
  const soonest = await soonestSharedJob(db, DELIVERY_QUEUE, broadcastShareKey(broadcastId));
  if (soonest !== null) {
    const wait = Math.min(
      LEAVING_RETRY_MAX_MS,
      Math.max(LEAVING_RETRY_MS, new Date(soonest).getTime() - Date.now() || Infinity),
    );
    return { retryAt: new Date(Date.now() + wait), reason: 'copies on their way' };
  }
  const { rows } = await db.query<{ sent: boolean; pending: boolean }>(
    `WITH pending AS (
       SELECT EXISTS (SELECT 1 FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'pending') AS pending
     ),
     sent AS (
       UPDATE broadcasts SET status = 'sent', completed_at = now(), updated_at = now()
        WHERE id = $1 AND status = 'queued' AND NOT (SELECT pending FROM pending)
       RETURNING id
     )
     SELECT EXISTS (SELECT 1 FROM sent) AS sent, (SELECT pending FROM pending) AS pending`,
    [broadcastId],
  );
  if (rows[0]!.pending) {
    return { retryAt: new Date(Date.now() + HELD_RETRY_MS), reason: 'pending recipients held by another run' };
  }
  return { done: true };
}

async function pauseIfQueued(db: Database, org: string, broadcastId: string, reason: string): Promise<void> {
  try {
    await pauseBroadcast(db, org, broadcastId, reason);
  } catch (error) {
    // Paused or canceled meanwhile: nothing left to stop.
    if (!(error instanceof ServiceError && error.name === 'invalid_state')) throw error;
  }
}

/** Each property's fallback value, for contacts without a value of their own. */
async function propertyFallbacks(db: Queryable, org: string): Promise<Record<string, string | number>> {
  const { rows } = await db.query<{ key: string; fallback_value: string | number }>(
    'SELECT key, fallback_value FROM contact_properties WHERE organization_id = $1 AND fallback_value IS NOT NULL',
    [org],
  );
  return Object.fromEntries(rows.map((row) => [row.key, row.fallback_value]));
}

/** Makes one contact's copy: an ordinary message with one recipient, marked with its broadcast. */
function copyMaker(
  context: FanOutContext,
  broadcastId: string,
  broadcast: BroadcastContent,
  from: Mailbox,
  domain: SendingDomain,
  fallbacks: Record<string, string | number>,
): CopyMaker {
  const baseUrl = publicBaseUrl(context.config);
  const replyTo = broadcast.reply_to ?? [];
  return (recipient) => {
    const id = newRowId();
    // The contact's address now (changed since the audience was taken, the copy goes to the new one).
    const address = recipient.current_email ?? recipient.email;
    const contact: ContactFields = {
      email: address,
      first_name: recipient.first_name,
      last_name: recipient.last_name,
      properties: { ...fallbacks, ...(recipient.properties ?? {}) },
    };
    const unsubscribe = unsubscribeUrl(context.signer, baseUrl, {
      organizationId: broadcast.organization_id,
      address,
      topicId: broadcast.topic_id,
      emailId: id,
    });
    // Placeholders work in the preview text too; hiddenPreheader escapes what it is given.
    const preheader = broadcast.preview_text
      ? hiddenPreheader(personalizeContent(broadcast.preview_text, contact, unsubscribe, false))
      : '';
    const html =
      broadcast.html === null
        ? undefined
        : withPreheader(personalizeContent(broadcast.html, contact, unsubscribe, true), preheader);
    const text = broadcast.text === null ? undefined : personalizeContent(broadcast.text, contact, unsubscribe, false);
    return {
      from,
      to: [address],
      cc: [],
      bcc: [],
      replyTo,
      replyTracking: undefined,
      recipients: [{ address, kind: 'to' }],
      recipientCount: 1,
      // Placeholders work in the subject too; a value's line breaks would end the header line.
      subject: personalizeContent(broadcast.subject, contact, unsubscribe, false).replace(/[\r\n]+/g, ' '),
      html,
      text,
      template: undefined,
      scheduledAt: undefined,
      tags: undefined,
      headers: undefined,
      topicId: broadcast.topic_id ?? undefined,
      attachments: [],
      id,
      domainId: domain.id,
      messageId: `<${id}@${domain.name}>`,
      // As for any send: a reply address where the domain asks for one and the sender named no reply_to.
      replyAddress: domain.replyTracking && replyTo.length === 0 ? replyAddress(context.signer, id, domain.name) : null,
      broadcastId,
    };
  };
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** The preview text as mail clients show it beside the subject, hidden in the message itself. */
function hiddenPreheader(previewText: string): string {
  const escaped = previewText.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
  return (
    '<div style="display:none;max-height:0;max-width:0;overflow:hidden;opacity:0;mso-hide:all;font-size:1px;' +
    `line-height:1px;color:transparent">${escaped}</div>`
  );
}

/** The preheader first in the body: right after <body …> when there is one, else at the very start. */
function withPreheader(html: string, preheader: string): string {
  if (preheader === '') return html;
  const body = /<body\b[^>]*>/i.exec(html);
  if (!body) return preheader + html;
  const at = body.index + body[0].length;
  return html.slice(0, at) + preheader + html.slice(at);
}
