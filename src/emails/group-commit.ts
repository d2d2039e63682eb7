import type { Database, Queryable } from '../platform/db/database.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import { acceptGroupSize } from '../platform/metrics.ts';
import type { IdempotencyKey } from '../platform/idempotency.ts';
import type { PreparedMessage } from './prepare-message.ts';
import { quotaChargeRows, quotaGuardCtes, reserveQuota } from './sending-limits.ts';
import { storeMessages, type MessageToStore } from './store-messages.ts';

// Group commit on the accept path. Every send (a single message or a batch) becomes one acceptance;
// acceptances that arrive while a group is being written wait, and the next group writes all of them
// with one statement (store-messages.ts): every message with its recipients, timeline entry, webhook
// fan-out and delivery job, each request's idempotent result, and the monthly quota's charge. One
// statement outside a transaction is one round trip and one commit. Each request is answered only
// after the commit that holds it. Under no load a group is one request, written at once; under load a
// group holds what arrived while the previous one was written, so the database counts groups, not
// requests.
//
// Far from the quota, the case almost every send is in, the statement checks the quota itself and
// charges it without locking (quotaGuardCtes in sending-limits.ts). Near the limit it writes nothing,
// and the group takes the exact path instead: a transaction that locks the organization's usage rows,
// counts exactly, takes the quota request by request in order, and stores what fits with the same
// statement. One group at a time keeps a process's quota exact and in arrival order. (Two in flight
// were measured: smaller groups, more work per message, fewer messages a second.)
//
// The rules of one request do not change in a group: its messages take the quota in order after the
// requests before it (all of them or none when it is all-or-nothing), and a request that fails must not
// fail its neighbours: when a group's statement fails (the database refused it, a message could not be
// encoded), each of its requests is written again alone, so only the one at fault fails. When the
// connection was lost the outcome of the commit is unknown, and when the group waited too long (a lock
// held elsewhere) writing each alone would only wait again: then each request gets the error.
// A group waits at most LOCK_TIMEOUT for a lock (and on the exact path STATEMENT_TIMEOUT for a
// statement), so one stuck row cannot hold every later send of the process for longer than that.

/** What one request asks to write: the messages that got rate-limit tokens, in order. */
export interface Acceptance {
  organizationId: string;
  messages: PreparedMessage[];
  /** Either every message is accepted or none is. */
  allOrNothing: boolean;
  /** Remembered with the request's result, in the statement that stores its messages. */
  idempotency: IdempotencyKey | undefined;
  /** The request's result, given how many of its messages were accepted (called only when some were). */
  resultOf(accepted: number): unknown;
}

/** A group stops growing at this many messages, or about this many bytes of content; the rest waits. */
const MAX_GROUP_MESSAGES = 1000;
const MAX_GROUP_BYTES = 32 * 1024 * 1024;
const LOCK_TIMEOUT = '5s';
const STATEMENT_TIMEOUT = '30s';

/**
 * The exact path: writes acceptances in the caller's transaction, taking the quota request by request,
 * and says how many messages of each were accepted (a prefix of its messages; 0 writes nothing for it).
 */
export async function writeAcceptances(tx: Queryable, acceptances: Acceptance[]): Promise<number[]> {
  const accepted = acceptances.map(() => 0);
  // Organizations in a fixed order, each charged right after its reservation: the quota locks usage rows
  // (near the limit all of an organization's), and two processes committing groups of the same
  // organizations must take those locks in the same order.
  for (const organizationId of organizationsOf(acceptances)) {
    const theirs = acceptances.map((a, i) => [a, i] as const).filter(([a]) => a.organizationId === organizationId);
    const quota = await reserveQuota(
      tx,
      organizationId,
      theirs.reduce((sum, [a]) => sum + recipientsOf(a), 0),
    );
    for (const [a, i] of theirs) {
      accepted[i] = quota.fit(
        a.messages.map((m) => m.recipientCount),
        a.allOrNothing,
      );
    }
    await quota.charge();
  }
  await storeMessages(tx, toStore(acceptances, accepted), { remember: remembered(acceptances, accepted) });
  return accepted;
}

/**
 * Writes a group: far from the quota with one statement that checks and charges it, else on the exact
 * path. Says how many messages of each acceptance were accepted.
 */
async function writeGroup(db: Database, acceptances: Acceptance[]): Promise<number[]> {
  const all = acceptances.map((a) => a.messages.length);
  const charges = organizationsOf(acceptances).map((organizationId) => ({
    organizationId,
    recipients: acceptances.filter((a) => a.organizationId === organizationId).reduce((n, a) => n + recipientsOf(a), 0),
  }));
  const written = await storeMessages(db, toStore(acceptances, all), {
    remember: remembered(acceptances, all),
    guard: {
      ctes: (first) => quotaGuardCtes(`$${first}::jsonb`, LOCK_TIMEOUT),
      values: [JSON.stringify(quotaChargeRows(charges))],
    },
  });
  if (written) return all;
  return db.transaction((tx) => writeAcceptances(tx, acceptances), {
    lock_timeout: LOCK_TIMEOUT,
    statement_timeout: STATEMENT_TIMEOUT,
  });
}

/** The organizations of a group, in a fixed order. */
function organizationsOf(acceptances: Acceptance[]): string[] {
  return [...new Set(acceptances.map((a) => a.organizationId))].sort();
}

function recipientsOf(acceptance: Acceptance): number {
  return acceptance.messages.reduce((n, m) => n + m.recipientCount, 0);
}

/** The first `accepted[i]` messages of each acceptance. */
function toStore(acceptances: Acceptance[], accepted: number[]): MessageToStore[] {
  return acceptances.flatMap((a, i) =>
    a.messages.slice(0, accepted[i]).map((message) => ({ organizationId: a.organizationId, message })),
  );
}

/** The results to remember: each idempotent request that had messages accepted. */
function remembered(acceptances: Acceptance[], accepted: number[]) {
  return acceptances.flatMap((a, i) =>
    a.idempotency && accepted[i]! > 0 ? [{ key: a.idempotency, result: a.resultOf(accepted[i]!) }] : [],
  );
}

/** About how many bytes a message adds to a group's statement. */
function contentBytes(m: PreparedMessage): number {
  const attachments = m.attachments.reduce((sum, a) => sum + a.content.length, 0);
  return (m.html?.length ?? 0) + (m.text?.length ?? 0) + attachments + 1024;
}

// One writer per database handle: it writes one group at a time and gathers the next meanwhile. Each
// group is one statement, its own transaction (or the exact path's).
const groupCommitter = batcherPerDatabase<Acceptance, number>({
  transaction: false,
  run: (_db, acceptances, database) => writeGroup(database, acceptances),
  size: (acceptance) => acceptance.messages.length,
  maxSize: MAX_GROUP_MESSAGES,
  bytes: (acceptance) => acceptance.messages.reduce((sum, m) => sum + contentBytes(m), 0),
  maxBytes: MAX_GROUP_BYTES,
  done: (requests) => acceptGroupSize.observe(requests),
});

/** Writes one request's acceptance in the next group commit of this database handle. */
export function commitAcceptance(db: Database, acceptance: Acceptance): Promise<number> {
  return groupCommitter(db).add(acceptance);
}
