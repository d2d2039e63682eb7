import type { Database, Queryable } from '../platform/db/database.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import { acceptGroupSize } from '../platform/metrics.ts';
import { rememberResult, type IdempotencyKey } from '../platform/idempotency.ts';
import type { PreparedMessage } from './prepare-message.ts';
import { reserveQuota } from './sending-limits.ts';
import { storeMessages, type MessageToStore } from './store-messages.ts';

// Group commit on the accept path. Every send (a single message or a batch) becomes one acceptance;
// acceptances that arrive while a commit is in flight wait, and the next transaction writes all of them
// together: the monthly quota reserved once per organization, every message stored by a few multi-row
// statements (store-messages.ts), each request's idempotent result remembered, one commit. Each request
// is answered only after the commit that holds it. Under no load a group is one request, written at
// once; under load a group holds what arrived during the previous commit, so commits, not requests, are
// what the database counts. One group at a time is what keeps a process's quota exact and in arrival
// order: two in flight would each read the usage without the other's charge (far from the limit), and
// near it the later could lock the usage rows first. (Two in flight were 10% faster.)
//
// The rules of one request do not change in a group: its messages take the quota in order after the
// requests before it (all of them or none when it is all-or-nothing), and a request that fails must not
// fail its neighbours: when a group's transaction fails (the database refused a statement, a message
// could not be encoded), each of its requests is written again alone, so only the one at fault fails.
// When the connection was lost the outcome of the commit is unknown, and when the group waited too long
// (a lock held elsewhere) writing each alone would only wait again: then each request gets the error.
// A group waits at most LOCK_TIMEOUT for a lock and STATEMENT_TIMEOUT for a statement, so one stuck
// row cannot hold every later send of the process for longer than that.

/** What one request asks to write: the messages that got rate-limit tokens, in order. */
export interface Acceptance {
  organizationId: string;
  messages: PreparedMessage[];
  /** Either every message is accepted or none is. */
  allOrNothing: boolean;
  /** Remembered with the request's result, in the transaction that stores its messages. */
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
 * Writes acceptances in one transaction and says how many messages of each were accepted (a prefix of
 * its messages; 0 writes nothing for it).
 */
export async function writeAcceptances(tx: Queryable, acceptances: Acceptance[]): Promise<number[]> {
  const accepted = acceptances.map(() => 0);
  // Organizations in a fixed order, each charged right after its reservation: the quota locks usage rows
  // (one, or near the limit all of an organization's), and two processes committing groups of the same
  // organizations must take those locks in the same order.
  const organizations = [...new Set(acceptances.map((a) => a.organizationId))].sort();
  for (const organizationId of organizations) {
    const theirs = acceptances.map((a, i) => [a, i] as const).filter(([a]) => a.organizationId === organizationId);
    const wanted = theirs.reduce((sum, [a]) => sum + a.messages.reduce((n, m) => n + m.recipientCount, 0), 0);
    const quota = await reserveQuota(tx, organizationId, wanted);
    for (const [a, i] of theirs) {
      accepted[i] = quota.fit(
        a.messages.map((m) => m.recipientCount),
        a.allOrNothing,
      );
    }
    await quota.charge();
  }
  const toStore: MessageToStore[] = acceptances.flatMap((a, i) =>
    a.messages.slice(0, accepted[i]).map((message) => ({ organizationId: a.organizationId, message })),
  );
  await storeMessages(tx, toStore);
  for (const [i, a] of acceptances.entries()) {
    if (a.idempotency && accepted[i]! > 0) await rememberResult(tx, a.idempotency, a.resultOf(accepted[i]!));
  }
  return accepted;
}

// One writer per database handle: it commits one group at a time and gathers the next meanwhile.
const groupCommitter = batcherPerDatabase<Acceptance, number>({
  run: writeAcceptances,
  settings: { lock_timeout: LOCK_TIMEOUT, statement_timeout: STATEMENT_TIMEOUT },
  size: (acceptance) => acceptance.messages.length,
  maxSize: MAX_GROUP_MESSAGES,
  bytes: (acceptance) => acceptance.messages.reduce((sum, m) => sum + contentBytes(m), 0),
  maxBytes: MAX_GROUP_BYTES,
  done: (requests) => acceptGroupSize.observe(requests),
});

/** About how many bytes a message adds to a group's statements. */
function contentBytes(m: PreparedMessage): number {
  const attachments = m.attachments.reduce((sum, a) => sum + a.content.length, 0);
  return (m.html?.length ?? 0) + (m.text?.length ?? 0) + attachments + 1024;
}

/** Writes one request's acceptance in the next group commit of this database handle. */
export function commitAcceptance(db: Database, acceptance: Acceptance): Promise<number> {
  return groupCommitter(db).add(acceptance);
}
