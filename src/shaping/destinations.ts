import type { Queryable } from '../platform/db/database.ts';
import type { DestinationStats } from '../platform/metrics.ts';
import { siteLabel } from './sites.ts';
import type { ShapingPolicy } from './shaping-file.ts';
import { configuredLimits } from './site-replies.ts';
import { updateSite, type SiteKey } from './destination-store.ts';
import type { Database } from '../platform/db/database.ts';

// What the Destinations page, GET /destinations and `mailroom destinations list` show: every site met so
// far with the limits in force (and those configured), its connections open across every process, the
// messages waiting for it, its hold and the last reply that changed its limits. Sites are shared by the
// whole install; the messages waiting are counted for one organization when one asks.

export interface Destination {
  object: 'destination';
  site: string;
  source: string;
  limits: {
    connection_limit: number;
    configured_connection_limit: number;
    max_deliveries_per_connection: number;
    /** Messages a minute in force, null: none. */
    max_message_rate: number | null;
    configured_max_message_rate: number | null;
    max_connection_rate: number | null;
  };
  connections: number;
  queued: number;
  paused_until: string | null;
  pause_reason: 'throttled' | 'site_paused' | null;
  pause_reply: string | null;
  throttle_replies: number;
  last_reply: { code: number | null; text: string; at: string } | null;
  /** Holds of the asking organization's sending domains at this site. */
  sender_holds: Array<{ sender_domain: string; paused_until: string; reply: string }>;
}

interface Row {
  source: string;
  site: string;
  connection_limit: number;
  message_rate: number | null;
  paused_until: Date | null;
  pause_reason: 'throttled' | 'site_paused' | null;
  pause_reply: string | null;
  throttle_replies: string;
  last_reply_code: number | null;
  last_reply_text: string | null;
  last_reply_at: Date | null;
  connections: number;
  queued: number;
  sender_holds: Array<{ sender_domain: string; paused_until: string; reply: string }>;
}

/** Every site, in name order; `organizationId` counts that organization's waiting messages only. */
export async function listDestinations(
  db: Queryable,
  policy: ShapingPolicy,
  now: Date,
  organizationId?: string,
): Promise<Destination[]> {
  const { rows } = await db.query<Row>(
    `SELECT d.source, d.site, d.connection_limit, d.message_rate, d.paused_until, d.pause_reason, d.pause_reply,
            d.throttle_replies, d.last_reply_code, d.last_reply_text, d.last_reply_at,
            (SELECT count(*)::int FROM destination_connections c
              WHERE c.source = d.source AND c.site = d.site AND c.leased_until > $1) AS connections,
            (SELECT count(*)::int FROM email_recipients r
              WHERE r.site = d.site AND r.status = 'pending'
                AND ($2::uuid IS NULL OR r.email_id IN (SELECT id FROM emails WHERE organization_id = $2))) AS queued,
            coalesce((SELECT json_agg(json_build_object('sender_domain', h.sender_domain, 'paused_until', h.paused_until,
                                                        'reply', h.reply) ORDER BY h.sender_domain)
                        FROM destination_sender_holds h
                       WHERE h.site = d.site AND h.paused_until > $1
                         AND ($2::uuid IS NULL OR h.sender_domain IN (SELECT name FROM domains WHERE organization_id = $2 AND status = 'verified'))),
                     '[]') AS sender_holds
       FROM destination_sites d ORDER BY d.site, d.source`,
    [now, organizationId ?? null],
  );
  return rows.map((row) => {
    const limits = policy.limitsFor(row.site, row.source);
    const configured = configuredLimits(limits);
    const paused = row.paused_until !== null && row.paused_until > now;
    return {
      object: 'destination',
      site: row.site,
      source: row.source,
      limits: {
        connection_limit: row.connection_limit,
        configured_connection_limit: limits.connectionLimit,
        max_deliveries_per_connection: limits.maxDeliveriesPerConnection,
        max_message_rate: row.message_rate === null ? null : round(row.message_rate),
        configured_max_message_rate: configured.messageRate === undefined ? null : round(configured.messageRate),
        max_connection_rate: configured.connectionRate === undefined ? null : round(configured.connectionRate),
      },
      connections: row.connections,
      queued: row.queued,
      paused_until: paused ? row.paused_until!.toISOString() : null,
      pause_reason: paused ? row.pause_reason : null,
      pause_reply: paused ? row.pause_reply : null,
      throttle_replies: Number(row.throttle_replies),
      last_reply:
        row.last_reply_at === null
          ? null
          : { code: row.last_reply_code, text: row.last_reply_text ?? '', at: row.last_reply_at.toISOString() },
      sender_holds: row.sender_holds.map((hold) => ({
        ...hold,
        paused_until: new Date(hold.paused_until).toISOString(),
      })),
    };
  });
}

const round = (value: number) => Math.round(value * 100) / 100;

/** The operator pauses a site until `until` (every process stops starting deliveries to it). */
export async function pauseSite(
  db: Database,
  policy: ShapingPolicy,
  key: SiteKey,
  until: Date,
  now: Date,
  why: string,
) {
  return updateSite(db, key, configuredLimits(policy.limitsFor(key.site)), now, (state) => ({
    ...state,
    pausedUntil: until,
    pauseReason: 'site_paused',
    pauseReply: why,
  }));
}

/** The operator ends a site's pause (a provider's hold included); its limits stay where back-off left them. */
export async function resumeSite(db: Database, policy: ShapingPolicy, key: SiteKey, now: Date) {
  return updateSite(db, key, configuredLimits(policy.limitsFor(key.site)), now, (state) => ({
    ...state,
    pausedUntil: undefined,
    pauseReason: undefined,
    pauseReply: undefined,
  }));
}

/** The sites as the Prometheus gauges show them. */
export async function destinationStats(db: Queryable, policy: ShapingPolicy): Promise<DestinationStats[]> {
  // A site's waiting recipients are the site's, whichever source takes them: counted once.
  const counted = new Set<string>();
  return (await listDestinations(db, policy, new Date())).map((d) => {
    const first = !counted.has(d.site);
    counted.add(d.site);
    return {
      site: siteLabel(d.site),
      connections: d.connections,
      connectionLimit: d.limits.connection_limit,
      queued: first ? d.queued : 0,
      paused: d.paused_until !== null,
    };
  });
}
