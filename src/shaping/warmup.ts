import type { Database, Queryable } from '../platform/db/database.ts';
import type { SiteKey } from './destination-store.ts';

// Automatic warm-up of a new sending address. Mailbox providers distrust an address they have not seen:
// it starts at a small daily volume per site (the schedule's first stage) and earns the next stage by a
// good day. Like the ESPs' warm-ups (SparkPost, SendGrid, SES), the day's allowance is released over the
// day, not spent at midnight: one 24th of it each hour, so a burst at 00:05 cannot take the whole day.
//
// - A stage advances at the first send of a new day (UTC) when the day before delivered over 90% of the
//   stage's volume, deferred under 5% of what it sent, and met no block.
// - A block (a policy or reputation refusal, a provider's hold) steps the stage back one at once, and
//   the day cannot advance it.
// - Past the last stage the source is warm at that site: no allowance any more.
//
// Everything is counted per source and site, in the database, so every worker process shares it.

/** Advance only after a day that delivered more than this share of the stage's volume ... */
export const ADVANCE_DELIVERED_SHARE = 0.9;
/** ... and deferred less than this share of what it sent. */
export const ADVANCE_DEFERRED_SHARE = 0.05;

export interface WarmupState {
  source: string;
  site: string;
  /** 0-based; equal to the number of stages once warm. */
  stage: number;
  /** The day counted now, `YYYY-MM-DD` (UTC). */
  day: string;
  sent: number;
  delivered: number;
  deferred: number;
  blocked: boolean;
  startedAt: Date;
  lastChange: string | null;
  changedAt: Date | null;
}

interface Row {
  source: string;
  site: string;
  stage: number;
  day: string;
  sent: number;
  delivered: number;
  deferred: number;
  blocked: boolean;
  started_at: Date;
  last_change: string | null;
  changed_at: Date | null;
}

const stateOf = (row: Row): WarmupState => ({
  source: row.source,
  site: row.site,
  stage: row.stage,
  day: row.day,
  sent: row.sent,
  delivered: row.delivered,
  deferred: row.deferred,
  blocked: row.blocked,
  startedAt: row.started_at,
  lastChange: row.last_change,
  changedAt: row.changed_at,
});

/** The UTC day of a moment, `YYYY-MM-DD`. */
export const dayOf = (at: Date) => at.toISOString().slice(0, 10);

/** The day's allowance of a stage; undefined once warm. */
export const allowanceOf = (stage: number, stages: readonly number[]) => stages[stage];

/** How much of the day's allowance may be sent by `at`: one 24th more at the start of each UTC hour. */
export function releasedBy(allowance: number, at: Date): number {
  return Math.ceil((allowance * (at.getUTCHours() + 1)) / 24);
}

/** The start of the next UTC hour: when the next part of the allowance is released. */
export function nextRelease(at: Date): Date {
  const next = new Date(at);
  next.setUTCMinutes(0, 0, 0);
  next.setUTCHours(next.getUTCHours() + 1);
  return next;
}

/**
 * The state on `today`: unchanged on the same day; on a later day, the last day counted judged (a good
 * day advances the stage) and the counts started again.
 */
export function rollOver(state: WarmupState, stages: readonly number[], today: string, at: Date): WarmupState {
  if (state.day >= today) return state;
  const fresh = { ...state, day: today, sent: 0, delivered: 0, deferred: 0, blocked: false };
  const allowance = allowanceOf(state.stage, stages);
  if (allowance === undefined) return fresh;
  const stageName = `stage ${state.stage + 1} (${allowance} a day)`;
  if (state.blocked) return fresh; // the block already stepped it back and said so
  const deferredShare = state.sent === 0 ? 0 : state.deferred / state.sent;
  if (state.delivered > ADVANCE_DELIVERED_SHARE * allowance && deferredShare < ADVANCE_DEFERRED_SHARE) {
    const next = allowanceOf(state.stage + 1, stages);
    const change =
      `${state.day}: ${stageName} delivered ${state.delivered} (over 90%), deferred ${percent(deferredShare)}: ` +
      (next === undefined ? 'warm-up complete' : `advanced to stage ${state.stage + 2} (${next} a day)`);
    return { ...fresh, stage: state.stage + 1, lastChange: change, changedAt: at };
  }
  if (state.sent === 0) return fresh; // a quiet day says nothing
  const why =
    deferredShare >= ADVANCE_DEFERRED_SHARE
      ? `deferred ${percent(deferredShare)} (5% or more)`
      : `delivered ${state.delivered} of the ${Math.floor(ADVANCE_DELIVERED_SHARE * allowance) + 1} needed`;
  return { ...fresh, lastChange: `${state.day}: stayed at ${stageName}: ${why}`, changedAt: at };
}

const percent = (share: number) => `${Math.round(share * 1000) / 10}%`;

const COLUMNS = 'source, site, stage, day, sent, delivered, deferred, blocked, started_at, last_change, changed_at';

/** Reads the state under its row lock (making it at stage 1 the first time), rolled over to today. */
async function lockedState(tx: Queryable, key: SiteKey, stages: readonly number[], at: Date): Promise<WarmupState> {
  await tx.query(
    `INSERT INTO warmup_state (source, site, day, started_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
    [key.source, key.site, dayOf(at), at],
  );
  const { rows } = await tx.query<Row>(
    `SELECT ${COLUMNS} FROM warmup_state WHERE source = $1 AND site = $2 FOR UPDATE`,
    [key.source, key.site],
  );
  return rollOver(stateOf(rows[0]!), stages, dayOf(at), at);
}

async function save(tx: Queryable, state: WarmupState): Promise<void> {
  await tx.query(
    `UPDATE warmup_state SET stage = $3, day = $4, sent = $5, delivered = $6, deferred = $7, blocked = $8,
            last_change = $9, changed_at = $10
      WHERE source = $1 AND site = $2`,
    [
      state.source,
      state.site,
      state.stage,
      state.day,
      state.sent,
      state.delivered,
      state.deferred,
      state.blocked,
      state.lastChange,
      state.changedAt,
    ],
  );
}

export type WarmupTurn = { taken: true } | { taken: false; until: Date; allowance: number; sent: number };

/** Takes `count` messages of today's allowance released so far, or says when more is released. */
export function takeWarmupTurn(
  db: Database,
  key: SiteKey,
  stages: readonly number[],
  count: number,
  at: Date,
): Promise<WarmupTurn> {
  return db.transaction(async (tx) => {
    const state = await lockedState(tx, key, stages, at);
    const allowance = allowanceOf(state.stage, stages);
    if (allowance === undefined) {
      await save(tx, { ...state, sent: state.sent + count });
      return { taken: true };
    }
    // A message to several recipients at once is not split: it goes when one more may go.
    if (state.sent < releasedBy(allowance, at)) {
      await save(tx, { ...state, sent: state.sent + count });
      return { taken: true };
    }
    await save(tx, state);
    const until = state.sent >= allowance ? new Date(`${nextDay(state.day)}T00:00:00Z`) : nextRelease(at);
    return { taken: false, until, allowance, sent: state.sent };
  });
}

/**
 * A taken turn that was not used (the message then waited for a connection): it goes back to the day it
 * was taken on (`at`, when it was taken), not to the next one.
 */
export async function giveBackWarmupTurn(db: Queryable, key: SiteKey, count: number, at: Date): Promise<void> {
  await db.query(`UPDATE warmup_state SET sent = greatest(0, sent - $3) WHERE source = $1 AND site = $2 AND day = $4`, [
    key.source,
    key.site,
    count,
    dayOf(at),
  ]);
}

export type WarmupReply = 'delivered' | 'deferred' | 'blocked';

/**
 * Counts a reply (given to `count` recipients) towards the day's judgement; a block steps the stage back
 * (once a day).
 */
export function recordWarmupReply(
  db: Database,
  key: SiteKey,
  stages: readonly number[],
  reply: { kind: WarmupReply; text: string; count: number },
  at: Date,
): Promise<void> {
  return db.transaction(async (tx) => {
    const state = await lockedState(tx, key, stages, at);
    if (reply.kind === 'delivered') return save(tx, { ...state, delivered: state.delivered + reply.count });
    if (reply.kind === 'deferred') return save(tx, { ...state, deferred: state.deferred + reply.count });
    if (state.blocked) return save(tx, state);
    const stage = Math.max(0, Math.min(state.stage, stages.length) - 1);
    const change = `${state.day}: blocked (${reply.text.slice(0, 200)}): back to stage ${stage + 1} (${stages[stage]} a day)`;
    return save(tx, { ...state, stage, blocked: true, lastChange: change, changedAt: at });
  });
}

/** Every source and site met while warming, as stored (not rolled over: the next send does that). */
export async function listWarmup(db: Queryable): Promise<WarmupState[]> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM warmup_state ORDER BY source, site`);
  return rows.map(stateOf);
}

function nextDay(day: string): string {
  const next = new Date(`${day}T00:00:00Z`);
  next.setUTCDate(next.getUTCDate() + 1);
  return dayOf(next);
}
