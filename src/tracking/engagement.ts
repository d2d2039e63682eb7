import type { Database } from '../platform/db/database.ts';
import { addressKey } from '../platform/address-key.ts';
import { recordTimelineEntry, type TimelineKind } from '../emails/timeline.ts';
import { isUuid } from '../platform/ids.ts';

// Opens and clicks reported by the tracking routes. Each is kept once per recipient (a click once per
// recipient and link): a pixel fetched again, or a link clicked again, records and emits nothing.
//
// Only a recipient of the message counts, and only while that kind of tracking is on for the message:
// its sending domain's switch, or the organization's when the domain has none of its own (or the domain
// is gone). Turning tracking off stops recording at once, for messages already sent too (their links
// keep working; they are just no longer counted).

export interface Open {
  emailId: string;
  recipient: string;
  /** The fetching client, when it said; helps tell image proxies from people. */
  userAgent?: string;
}

export interface Click {
  emailId: string;
  recipient: string;
  /** The link's original URL, as signed in its token. */
  url: string;
  /** The clicking client's address and User-Agent, for the webhook event only (Resend's `click`). */
  ipAddress: string;
  userAgent?: string;
}

/** Longest User-Agent kept: enough to name any real client. */
const USER_AGENT_MAX = 512;

/** Records a recipient's first open of a message; false when nothing was recorded. */
export async function recordOpen(db: Database, open: Open): Promise<boolean> {
  const data = open.userAgent ? { user_agent: open.userAgent.slice(0, USER_AGENT_MAX) } : undefined;
  return recordEngagement(db, open.emailId, open.recipient, 'opened', data);
}

/** Records a recipient's first click of a link in a message; false when nothing was recorded. */
export async function recordClick(db: Database, click: Click, now: Date = new Date()): Promise<boolean> {
  const client = {
    ipAddress: click.ipAddress,
    timestamp: now.toISOString(),
    userAgent: click.userAgent?.slice(0, USER_AGENT_MAX) ?? '',
  };
  const timeline = { click: { link: click.url } };
  return recordEngagement(db, click.emailId, click.recipient, 'clicked', timeline, { click: client });
}

async function recordEngagement(
  db: Database,
  emailId: string,
  recipient: string,
  kind: Extract<TimelineKind, 'opened' | 'clicked'>,
  data: Record<string, unknown> | undefined,
  webhook?: Record<string, unknown>,
): Promise<boolean> {
  if (!isUuid(emailId)) return false;
  const recorded = await db.transaction(async (tx) => {
    // The recipient as the message stored it, so the entry matches its delivered one; the key-share lock
    // keeps the message (and so the entry's foreign key) until this commits, whatever retention does.
    const { rows } = await tx.query<{ organization_id: string; address: string }>(
      `SELECT e.organization_id, r.address
         FROM emails e
         JOIN email_recipients r ON r.email_id = e.id
         JOIN organizations o ON o.id = e.organization_id
         LEFT JOIN domains d ON d.id = e.domain_id
        WHERE e.id = $1 AND lower(r.address) = $2
          AND CASE WHEN $3 = 'opened' THEN coalesce(d.open_tracking, o.open_tracking)
                   ELSE coalesce(d.click_tracking, o.click_tracking) END
          FOR KEY SHARE OF e`,
      [emailId, addressKey(recipient), kind],
    );
    const found = rows[0];
    if (!found) return false;
    const eventId = await recordTimelineEntry(tx, {
      emailId,
      organizationId: found.organization_id,
      kind,
      recipient: found.address,
      data,
      once: true,
      ...(webhook && { webhook }),
    });
    return eventId !== null;
  });
  return recorded;
}
