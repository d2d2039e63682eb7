import type { Database, Queryable } from '../platform/db/database.ts';

// What every worker process shares about each destination site, in PostgreSQL (migration 0016): the
// limits in force (adapted), the message-rate bucket, the holds, and the connection slots in use. Every
// statement takes `now` from the caller's clock (injectable in tests), never the database's.

export interface SiteKey {
  /** The egress source ('default' while there is only one). */
  source: string;
  site: string;
}

/** A site's shared state, as stored. */
export interface SiteState {
  connectionLimit: number;
  /** Messages a minute in force now; undefined: no rate limit. */
  messageRate: number | undefined;
  pausedUntil: Date | undefined;
  pauseReason: 'throttled' | 'site_paused' | undefined;
  pauseReply: string | undefined;
  holdCount: number;
  lastHoldMs: number | undefined;
  lastHoldUntil: Date | undefined;
  successes: number;
  /** A shaping-file rule lowered the limits until then (back-off does not raise them above the cap). */
  capUntil: Date | undefined;
  capConnectionLimit: number | undefined;
  capMessageRate: number | undefined;
  /** When the site last answered with a throttle: written by updateSite with the reply, read only here. */
  lastThrottleAt?: Date | undefined;
}

interface SiteRow {
  connection_limit: number;
  message_rate: number | null;
  paused_until: Date | null;
  pause_reason: 'throttled' | 'site_paused' | null;
  pause_reply: string | null;
  hold_count: number;
  last_hold_ms: string | null;
  last_hold_until: Date | null;
  successes: number;
  capped_until: Date | null;
  cap_connection_limit: number | null;
  cap_message_rate: number | null;
  last_reply_at: Date | null;
}

const SITE_COLUMNS =
  'connection_limit, message_rate, paused_until, pause_reason, pause_reply, hold_count, last_hold_ms, last_hold_until, successes, capped_until, cap_connection_limit, cap_message_rate, last_reply_at';

const stateOf = (row: SiteRow): SiteState => ({
  connectionLimit: row.connection_limit,
  messageRate: row.message_rate ?? undefined,
  pausedUntil: row.paused_until ?? undefined,
  pauseReason: row.pause_reason ?? undefined,
  pauseReply: row.pause_reply ?? undefined,
  holdCount: row.hold_count,
  lastHoldMs: row.last_hold_ms === null ? undefined : Number(row.last_hold_ms),
  lastHoldUntil: row.last_hold_until ?? undefined,
  successes: row.successes,
  capUntil: row.capped_until ?? undefined,
  capConnectionLimit: row.cap_connection_limit ?? undefined,
  capMessageRate: row.cap_message_rate ?? undefined,
  lastThrottleAt: row.last_reply_at ?? undefined,
});

/** The configured limits a site's row starts from. */
export interface ConfiguredLimits {
  connectionLimit: number;
  /** Messages a minute; undefined: no rate limit. */
  messageRate: number | undefined;
  /** New connections a minute; undefined: no rate limit. */
  connectionRate?: number | undefined;
}

/** The site's state, its row made at the configured limits the first time the site is met. */
export async function siteState(db: Queryable, key: SiteKey, limits: ConfiguredLimits, now: Date): Promise<SiteState> {
  for (;;) {
    const { rows } = await db.query<SiteRow>(
      `WITH made AS (
         INSERT INTO destination_sites (source, site, connection_limit, message_rate, tokens, tokens_at,
                                        connection_rate, connection_tokens, connection_tokens_at)
         VALUES ($1, $2, $3, $4, 1, $5, $6, 1, $5) ON CONFLICT (source, site) DO NOTHING
         RETURNING ${SITE_COLUMNS}
       )
       SELECT ${SITE_COLUMNS} FROM made
       UNION ALL SELECT ${SITE_COLUMNS} FROM destination_sites WHERE source = $1 AND site = $2
       LIMIT 1`,
      [key.source, key.site, limits.connectionLimit, limits.messageRate ?? null, now, limits.connectionRate ?? null],
    );
    // Empty only when another process made the row after this statement's snapshot: read it again.
    if (rows[0]) return stateOf(rows[0]);
  }
}

/**
 * Changes a site's state under its row lock (so two processes' changes apply one after the other):
 * `change` gets the state as stored and returns the new one, or undefined to leave it.
 */
export async function updateSite(
  db: Database,
  key: SiteKey,
  limits: ConfiguredLimits,
  now: Date,
  change: (state: SiteState) => SiteState | undefined,
  reply?: { code: number | undefined; text: string; throttle: boolean },
): Promise<SiteState> {
  return db.transaction(async (tx) => {
    await siteState(tx, key, limits, now);
    const { rows } = await tx.query<SiteRow>(
      `SELECT ${SITE_COLUMNS} FROM destination_sites WHERE source = $1 AND site = $2 FOR UPDATE`,
      [key.source, key.site],
    );
    const before = stateOf(rows[0]!);
    const after = change(before) ?? before;
    await tx.query(
      `UPDATE destination_sites SET connection_limit = $3, message_rate = $4, paused_until = $5, pause_reason = $6,
              pause_reply = $7, hold_count = $8, last_hold_ms = $9, successes = $10,
              throttle_replies = throttle_replies + $11,
              last_reply_code = CASE WHEN $12 THEN $13 ELSE last_reply_code END,
              last_reply_text = CASE WHEN $12 THEN $14 ELSE last_reply_text END,
              last_reply_at = CASE WHEN $12 THEN $15 ELSE last_reply_at END,
              last_hold_until = $16, capped_until = $17, cap_connection_limit = $18, cap_message_rate = $19
        WHERE source = $1 AND site = $2`,
      [
        key.source,
        key.site,
        Math.max(1, Math.round(after.connectionLimit)),
        after.messageRate ?? null,
        after.pausedUntil ?? null,
        after.pauseReason ?? null,
        after.pauseReply ?? null,
        after.holdCount,
        after.lastHoldMs ?? null,
        after.successes,
        reply?.throttle ? 1 : 0,
        reply !== undefined,
        reply?.code ?? null,
        reply?.text.slice(0, 1000) ?? null,
        now,
        after.lastHoldUntil ?? null,
        after.capUntil ?? null,
        after.capConnectionLimit ?? null,
        after.capMessageRate ?? null,
      ],
    );
    return after;
  });
}

/**
 * Takes a free connection slot of the site for `holder`, for `leaseMs`: a slot number from 1 to the
 * site's connection limit in force that nobody holds (or whose lease ran out). Undefined when every slot
 * is held. Two processes racing for one slot: the row's unique key lets one win, the other tries the next.
 */
export async function takeSlot(
  db: Queryable,
  key: SiteKey,
  holder: string,
  leaseMs: number,
  now: Date,
): Promise<number | undefined> {
  for (let tries = 0; tries < 4; tries++) {
    const { rows } = await db.query<{ slot: number }>(
      `WITH free AS (
         SELECT s AS slot
           FROM destination_sites d, generate_series(1, d.connection_limit) s
          WHERE d.source = $1 AND d.site = $2
            AND NOT EXISTS (SELECT 1 FROM destination_connections c
                             WHERE c.source = $1 AND c.site = $2 AND c.slot = s AND c.leased_until > $4)
          ORDER BY s LIMIT 1
       )
       INSERT INTO destination_connections (source, site, slot, holder, leased_until)
       SELECT $1, $2, slot, $3, $4::timestamptz + make_interval(secs => $5) FROM free
       ON CONFLICT (source, site, slot) DO UPDATE SET holder = EXCLUDED.holder, leased_until = EXCLUDED.leased_until
         WHERE destination_connections.leased_until <= $4
       RETURNING slot`,
      [key.source, key.site, holder, now, leaseMs / 1000],
    );
    if (rows.length > 0) return rows[0]!.slot;
    // Nothing free, or another process took the free slot first: is any other still free?
    const { rows: free } = await db.query<{ n: number }>(
      `SELECT d.connection_limit - (SELECT count(*)::int FROM destination_connections c
                                     WHERE c.source = $1 AND c.site = $2 AND c.leased_until > $3
                                       AND c.slot <= d.connection_limit) AS n
         FROM destination_sites d WHERE d.source = $1 AND d.site = $2`,
      [key.source, key.site, now],
    );
    if ((free[0]?.n ?? 0) <= 0) return undefined;
  }
  return undefined;
}

/**
 * Renews every slot `holder` holds. Returns the slots still its own with each site's connection limit
 * in force, so that a connection whose slot is now above the limit (back-off lowered it) is closed.
 */
export async function renewSlots(
  db: Queryable,
  holder: string,
  leaseMs: number,
  now: Date,
): Promise<Array<SiteKey & { slot: number; connectionLimit: number }>> {
  const { rows } = await db.query<{ source: string; site: string; slot: number; connection_limit: number }>(
    `UPDATE destination_connections c SET leased_until = $2::timestamptz + make_interval(secs => $3)
       FROM destination_sites d
      WHERE c.holder = $1 AND d.source = c.source AND d.site = c.site
      RETURNING c.source, c.site, c.slot, d.connection_limit`,
    [holder, now, leaseMs / 1000],
  );
  return rows.map((row) => ({
    source: row.source,
    site: row.site,
    slot: row.slot,
    connectionLimit: row.connection_limit,
  }));
}

/** Gives a slot back. */
export async function releaseSlot(db: Queryable, key: SiteKey, slot: number, holder: string): Promise<void> {
  await db.query('DELETE FROM destination_connections WHERE source = $1 AND site = $2 AND slot = $3 AND holder = $4', [
    key.source,
    key.site,
    slot,
    holder,
  ]);
}

// A bucket holds one: sends are paced evenly, never bunched, so that no minute ever sees more than the
// rate (a provider counts over a sliding minute; a bucket of ten seconds' worth let a minute see a sixth
// more, and the first message over Gmail's limit costs a 10-minute hold). It fills at 98% of the rate:
// the processes' clocks and the provider's are not the same clock.
const PACE = 0.98;

const BUCKETS = {
  message: { rate: 'message_rate', tokens: 'tokens', at: 'tokens_at' },
  connection: { rate: 'connection_rate', tokens: 'connection_tokens', at: 'connection_tokens_at' },
} as const;

/**
 * What a take from a bucket gave: a turn (`taken`), due in `waitMs` (0: now), that the caller uses then;
 * or no turn, and when to ask again.
 */
export type TokenTake = { taken: boolean; waitMs: number };

/**
 * Takes one from the site's bucket of messages (or of new connections), or books the next one due
 * within `aheadMs`: the bucket may run that far into debt, so that the messages waiting for a site's
 * pace each get their own turn, one after the other, instead of all asking again when one comes and one
 * of them winning. A site without such a rate is always `{ taken: true, waitMs: 0 }`. `now` undefined:
 * the database's clock, one clock for every process (a process whose clock ran ahead of the others' would
 * otherwise be credited the difference); tests pass their own.
 */
export async function takeToken(
  db: Queryable,
  key: SiteKey,
  bucket: keyof typeof BUCKETS,
  now: Date | undefined,
  aheadMs = 0,
): Promise<TokenTake> {
  const { rate, tokens, at } = BUCKETS[bucket];
  const { rows } = await db.query<{ taken: boolean; available: number; rate: number | null }>(
    `WITH site AS (
       SELECT ${rate} AS rate,
              LEAST(1, ${tokens} + GREATEST(0, extract(epoch FROM coalesce($3::timestamptz, statement_timestamp()) - ${at}))
                       / 60.0 * ${rate} * ${PACE}) AS available
         FROM destination_sites WHERE source = $1 AND site = $2 FOR UPDATE
     ),
     taken AS (
       UPDATE destination_sites d
          SET ${tokens} = s.available - 1, ${at} = GREATEST(d.${at}, coalesce($3::timestamptz, statement_timestamp()))
         FROM site s WHERE d.source = $1 AND d.site = $2 AND s.rate IS NOT NULL
          AND s.available >= 1 - $4 / 60000.0 * s.rate * ${PACE}
       RETURNING 1
     )
     SELECT EXISTS (SELECT 1 FROM taken) AS taken, available, rate FROM site`,
    [key.source, key.site, now, aheadMs],
  );
  const row = rows[0];
  if (!row || row.rate === null) return { taken: true, waitMs: 0 };
  const perToken = 60_000 / (row.rate * PACE);
  // Taken: its turn comes when the bucket is back to one. Not: ask again when a turn is within reach.
  if (row.taken) return { taken: true, waitMs: Math.max(0, Math.ceil((1 - row.available) * perToken)) };
  return { taken: false, waitMs: Math.max(1, Math.ceil((1 - row.available) * perToken - aheadMs)) };
}

/** Every sending domain held at `site` at `now`, by domain. */
export async function senderHoldsAt(
  db: Queryable,
  site: string,
  now: Date,
): Promise<Map<string, { pausedUntil: Date; reply: string }>> {
  const { rows } = await db.query<{ sender_domain: string; paused_until: Date; reply: string }>(
    'SELECT sender_domain, paused_until, reply FROM destination_sender_holds WHERE site = $1 AND paused_until > $2',
    [site, now],
  );
  return new Map(rows.map((row) => [row.sender_domain, { pausedUntil: row.paused_until, reply: row.reply }]));
}

/** Holds `senderDomain`'s mail to `site` until `until` (a later hold already there stands). */
export async function holdSender(
  db: Queryable,
  site: string,
  senderDomain: string,
  until: Date,
  reply: string,
): Promise<void> {
  await db.query(
    `INSERT INTO destination_sender_holds (site, sender_domain, paused_until, reply) VALUES ($1, $2, $3, $4)
     ON CONFLICT (site, sender_domain) DO UPDATE SET paused_until = GREATEST(destination_sender_holds.paused_until, EXCLUDED.paused_until),
       reply = EXCLUDED.reply`,
    [site, senderDomain, until, reply.slice(0, 1000)],
  );
}
