// Destination sites written straight into a server process's database, as the shaper leaves them
// (migration 0016, src/shaping/destination-store.ts), for pages that show them. Call while no server has
// the database open (startDashboard's `prepare`): a PGlite directory has one user at a time.
import { randomUUID } from 'node:crypto';
import type { Database } from '../../src/platform/db/database.ts';
import { openPGliteDirectory } from '../../src/platform/db/pglite.ts';
import { openPostgres } from '../../src/platform/db/postgres.ts';

export interface SiteSeed {
  site: string;
  /** The egress source (default: `default`). */
  source?: string;
  /** In force now (back-off may have lowered it below the configured one). */
  connectionLimit: number;
  /** Messages a minute in force; null or left out: none. */
  messageRate?: number | null;
  pausedUntil?: Date;
  pauseReason?: 'throttled' | 'site_paused';
  pauseReply?: string;
  throttleReplies?: number;
  lastReply?: { code: number | null; text: string; at: Date };
  /** Connection slots held with a lease that runs past the test. */
  connections?: number;
  /** Slots whose lease ran out (a dead holder's): not open connections. */
  expiredConnections?: number;
}

export interface DestinationSeed {
  sites: SiteSeed[];
  senderHolds?: Array<{ site: string; senderDomain: string; pausedUntil: Date; reply: string }>;
  /** Messages of an organization with `count` recipients in `status` (pending: waiting) at `site`. */
  recipients?: Array<{ organizationId: string; site: string; count: number; status?: 'pending' | 'delivered' }>;
  /** Warm-up rows as src/shaping/warmup.ts leaves them (migration 0018). */
  warmup?: Array<{
    source: string;
    site: string;
    /** 0-based. */
    stage: number;
    day: string;
    sent: number;
    delivered: number;
    deferred?: number;
    blocked?: boolean;
    lastChange?: string;
    changedAt?: Date;
  }>;
}

/** The database a process environment from databaseForProcesses names. */
export const openProcessDatabase = (env: Record<string, string>): Promise<Database> =>
  env.DATABASE_URL ? Promise.resolve(openPostgres(env.DATABASE_URL, 2)) : openPGliteDirectory(env.MAILROOM_DATA_DIR!);

export async function seedDestinations(env: Record<string, string>, seed: DestinationSeed, now = new Date()) {
  const db = await openProcessDatabase(env);
  try {
    for (const site of seed.sites) {
      await db.query(
        `INSERT INTO destination_sites (source, site, connection_limit, message_rate, tokens_at, connection_tokens_at,
                                        paused_until, pause_reason, pause_reply, throttle_replies,
                                        last_reply_code, last_reply_text, last_reply_at)
         VALUES ($12, $1, $2, $3, $4, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          site.site,
          site.connectionLimit,
          site.messageRate ?? null,
          now,
          site.pausedUntil ?? null,
          site.pauseReason ?? null,
          site.pauseReply ?? null,
          site.throttleReplies ?? 0,
          site.lastReply?.code ?? null,
          site.lastReply?.text ?? null,
          site.lastReply?.at ?? null,
          site.source ?? 'default',
        ],
      );
      const open = site.connections ?? 0;
      for (let slot = 1; slot <= open + (site.expiredConnections ?? 0); slot++) {
        const leasedUntil = new Date(now.getTime() + (slot <= open ? 1 : -1) * 3600_000);
        await db.query(
          `INSERT INTO destination_connections (source, site, slot, holder, leased_until) VALUES ($5, $1, $2, $3, $4)`,
          [site.site, slot, randomUUID(), leasedUntil, site.source ?? 'default'],
        );
      }
    }
    for (const row of seed.warmup ?? []) {
      await db.query(
        `INSERT INTO warmup_state (source, site, stage, day, sent, delivered, deferred, blocked, started_at,
                                   last_change, changed_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          row.source,
          row.site,
          row.stage,
          row.day,
          row.sent,
          row.delivered,
          row.deferred ?? 0,
          row.blocked ?? false,
          now,
          row.lastChange ?? null,
          row.changedAt ?? null,
        ],
      );
    }
    for (const hold of seed.senderHolds ?? []) {
      await db.query(
        'INSERT INTO destination_sender_holds (site, sender_domain, paused_until, reply) VALUES ($1, $2, $3, $4)',
        [hold.site, hold.senderDomain, hold.pausedUntil, hold.reply],
      );
    }
    for (const group of seed.recipients ?? []) {
      // A message with no job: nothing delivers it, so its recipients stay as written.
      const id = randomUUID();
      const addresses = Array.from({ length: group.count }, (_, i) => `r${i}@${group.site.replace(/\W/g, '')}.example`);
      await db.query(
        `INSERT INTO emails (id, organization_id, "from", "to", subject, message_id, status, recipient_count)
         VALUES ($1, $2, 'sender@example.com', $3, 'Waiting', $4, 'sending', $5)`,
        [id, group.organizationId, JSON.stringify(addresses), `<${id}@test.example>`, group.count],
      );
      for (const address of addresses) {
        await db.query(
          `INSERT INTO email_recipients (email_id, address, kind, status, site) VALUES ($1, $2, 'to', $3, $4)`,
          [id, address, group.status ?? 'pending', group.site],
        );
      }
    }
  } finally {
    await db.close();
  }
}
