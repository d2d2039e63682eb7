import { rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setImmediate as yieldToOthers } from 'node:timers/promises';
import type { Database } from '../platform/db/database.ts';
import { IDEMPOTENCY_WINDOW_HOURS } from '../platform/idempotency.ts';
import { capturedMessagePath } from '../delivery/transports/capture.ts';

// Retention: one function per kind of data, each removing what is past its period in small batches.
// A batch is one short statement (or transaction) over at most `batchSize` rows, picked oldest first by
// primary key from an index that holds only candidates, locked with SKIP LOCKED: rows another pruner (in
// another process) or a request holds are left for the next batch instead of waited for, so pruners
// never block each other or the API for longer than one batch. A kind is done when a batch comes back
// short; between batches the event loop gets a turn.
//
// Only messages that are finished (sent or canceled) are ever pruned: queued, scheduled and sending
// messages keep everything. A message's content always goes before its metadata (the metadata step only
// takes messages whose content is gone), so its captured .eml is always deleted by the content step.
//
// Finished jobs need no pruning: the worker deletes a job when it is done, and a cancel deletes its job.
// A job failed for good is kept for the operator (`mailroom jobs list --failed`) as long as metadata is.

export const DEFAULT_BATCH_SIZE = 1000;

export interface PruneOptions {
  retentionDays: number;
  metadataRetentionDays: number;
  /** Where the capture transport stores <dataDir>/captured/<emailId>.eml. */
  dataDir: string;
  batchSize?: number;
  /** Checked between batches: true stops early (the process is shutting down). */
  stopping?: () => boolean;
}

export interface PruneCounts {
  /** Messages whose content was deleted. */
  bodies: number;
  /** Messages deleted with their recipients and timeline. */
  messages: number;
  idempotencyKeys: number;
  /** Settled webhook deliveries deleted with their attempts. */
  webhookDeliveries: number;
  /** Hourly outcome counts (GET /overview) deleted. */
  eventCounts: number;
  /** DMARC aggregate reports deleted with their records. */
  dmarcReports: number;
  /** API request log entries deleted. */
  requestLogs: number;
  /** Received messages deleted whole (raw, parsed and attachments). */
  receivedEmails: number;
  /** Jobs failed for good, deleted. */
  failedJobs: number;
  /** Events sent to automations, deleted with their payload. */
  receivedEvents: number;
  /** Finished automation runs, deleted with their steps. */
  automationRuns: number;
}

/** Runs every kind once, content before metadata; on PGlite, then vacuums what changed. */
export async function pruneAll(db: Database, options: PruneOptions): Promise<PruneCounts> {
  const counts: PruneCounts = {
    bodies: await pruneBodies(db, options),
    messages: await pruneMessages(db, options),
    idempotencyKeys: await pruneIdempotencyKeys(db, options),
    webhookDeliveries: await pruneWebhookDeliveries(db, options),
    eventCounts: await pruneEventCounts(db, options),
    dmarcReports: await pruneDmarcReports(db, options),
    requestLogs: await pruneRequestLogs(db, options),
    receivedEmails: await pruneReceivedEmails(db, options),
    failedJobs: await pruneFailedJobs(db, options),
    receivedEvents: await pruneReceivedEvents(db, options),
    automationRuns: await pruneAutomationRuns(db, options),
  };
  if (db.kind === 'pglite') await vacuumChanged(db, counts);
  return counts;
}

/**
 * Content of finished messages sent (or, never sent, accepted) more than `retentionDays` ago: html,
 * text, headers and the template's variables are cleared, the attachments deleted, the captured .eml
 * removed, and body_pruned_at set. Subject, addresses, tags and the timeline stay.
 */
export async function pruneBodies(db: Database, options: PruneOptions): Promise<number> {
  const capturedDir = dirname(capturedMessagePath(options.dataDir, 'x'));
  return inBatches(options, (limit) =>
    db.transaction(async (tx) => {
      // FOR NO KEY UPDATE: a timeline entry being added to the message (which takes KEY SHARE) is not
      // blocked, and does not block this.
      const { rows } = await tx.query<{ id: string }>(
        `SELECT id FROM emails
          WHERE body_pruned_at IS NULL AND status IN ('sent', 'canceled')
            AND coalesce(sent_at, created_at) < now() - make_interval(days => $1)
          ORDER BY coalesce(sent_at, created_at)
          LIMIT $2
          FOR NO KEY UPDATE SKIP LOCKED`,
        [options.retentionDays, limit],
      );
      if (rows.length === 0) return 0;
      const ids = rows.map((row) => row.id);
      // Files first, inside the transaction: a failure leaves the rows as they were, to be tried again.
      if (await exists(capturedDir)) {
        await Promise.all(ids.map((id) => rm(capturedMessagePath(options.dataDir, id), { force: true })));
      }
      await tx.query(
        `WITH attachments AS (DELETE FROM email_attachments WHERE email_id = ANY($1::uuid[]))
         UPDATE emails
            SET html = NULL, text = NULL, headers = NULL,
                template = CASE WHEN template IS NULL THEN NULL ELSE template - 'variables' END,
                body_pruned_at = now()
          WHERE id = ANY($1::uuid[])`,
        [ids],
      );
      return ids.length;
    }),
  );
}

/**
 * Finished messages sent (or accepted) more than `metadataRetentionDays` ago, once their content is
 * gone: the row with its recipients and timeline entries (ON DELETE CASCADE).
 */
export async function pruneMessages(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM emails WHERE id IN (
         SELECT id FROM emails
          WHERE body_pruned_at IS NOT NULL
            AND coalesce(sent_at, created_at) < now() - make_interval(days => $1)
          ORDER BY coalesce(sent_at, created_at)
          LIMIT $2
          FOR UPDATE SKIP LOCKED)`,
      [options.metadataRetentionDays, limit],
    );
    return rowCount;
  });
}

/** Idempotency keys past their window: a request with the same key is new again anyway. */
export async function pruneIdempotencyKeys(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM idempotency_keys WHERE (organization_id, key) IN (
         SELECT organization_id, key FROM idempotency_keys
          WHERE created_at < now() - make_interval(hours => $1)
          ORDER BY created_at
          LIMIT $2
          FOR UPDATE SKIP LOCKED)`,
      [IDEMPOTENCY_WINDOW_HOURS, limit],
    );
    return rowCount;
  });
}

/**
 * Webhook deliveries created more than `metadataRetentionDays` ago that are settled (succeeded or
 * failed), with their attempts (ON DELETE CASCADE). A pending delivery stays whatever its age.
 */
export async function pruneWebhookDeliveries(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM webhook_deliveries WHERE id IN (
         SELECT id FROM webhook_deliveries
          WHERE status <> 'pending' AND created_at < now() - make_interval(days => $1)
          ORDER BY created_at
          LIMIT $2
          FOR UPDATE SKIP LOCKED)`,
      [options.metadataRetentionDays, limit],
    );
    return rowCount;
  });
}

/**
 * The overview's hourly outcome counts older than `metadataRetentionDays`: the overview reads 30 days,
 * and a count outliving the timeline it counted says nothing more.
 */
export async function pruneEventCounts(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM email_event_counts WHERE (organization_id, hour, type, shard) IN (
         SELECT organization_id, hour, type, shard FROM email_event_counts
          WHERE hour < now() - make_interval(days => $1)
          LIMIT $2
          FOR UPDATE SKIP LOCKED)`,
      [options.metadataRetentionDays, limit],
    );
    return rowCount;
  });
}

/** DMARC aggregate reports about days more than `metadataRetentionDays` ago, with their records. */
export async function pruneDmarcReports(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM dmarc_reports WHERE id IN (
         SELECT id FROM dmarc_reports WHERE end_at < now() - make_interval(days => $1)
          LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [options.metadataRetentionDays, limit],
    );
    return rowCount;
  });
}

/**
 * API request log entries older than `retentionDays`: their bodies are copies of requests (addresses,
 * subjects, tags), kept no longer than a message's content.
 */
export async function pruneRequestLogs(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM request_logs WHERE id IN (
         SELECT id FROM request_logs WHERE created_at < now() - make_interval(days => $1)
          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [options.retentionDays, limit],
    );
    return rowCount;
  });
}

/**
 * Events sent to automations more than `retentionDays` ago: their payload is content. An event that a
 * running run still reads (its trigger's payload, for fields and variables) is kept until the run ends.
 */
export async function pruneReceivedEvents(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM received_events WHERE id IN (
         SELECT e.id FROM received_events e WHERE e.received_at < now() - make_interval(days => $1)
            AND NOT EXISTS (SELECT 1 FROM automation_runs r WHERE r.event_id = e.id AND r.status = 'running')
          ORDER BY e.received_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [options.retentionDays, limit],
    );
    return rowCount;
  });
}

/** Automation runs finished more than `metadataRetentionDays` ago, with their steps (ON DELETE CASCADE). */
export async function pruneAutomationRuns(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM automation_runs WHERE id IN (
         SELECT id FROM automation_runs
          WHERE status <> 'running' AND completed_at < now() - make_interval(days => $1)
          ORDER BY completed_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [options.metadataRetentionDays, limit],
    );
    return rowCount;
  });
}

/**
 * Received messages taken more than `retentionDays` ago, whole: a received message is all content (its
 * addresses, subject and headers are what someone wrote, as much as its body), so nothing of it outlives
 * the content period. Its raw bytes and attachments go with it (ON DELETE CASCADE).
 */
export async function pruneReceivedEmails(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM received_emails WHERE id IN (
         SELECT id FROM received_emails WHERE created_at < now() - make_interval(days => $1)
          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [options.retentionDays, limit],
    );
    return rowCount;
  });
}

/** Jobs that failed for good more than `metadataRetentionDays` ago (a retried one is no longer failed). */
export async function pruneFailedJobs(db: Database, options: PruneOptions): Promise<number> {
  return inBatches(options, async (limit) => {
    const { rowCount } = await db.query(
      `DELETE FROM jobs WHERE id IN (
         SELECT id FROM jobs WHERE failed_at IS NOT NULL AND failed_at < now() - make_interval(days => $1)
          ORDER BY failed_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [options.metadataRetentionDays, limit],
    );
    return rowCount;
  });
}

/** Runs `batch` until it handles fewer rows than asked (or the process stops); the total handled. */
async function inBatches(options: PruneOptions, batch: (limit: number) => Promise<number>): Promise<number> {
  const limit = options.batchSize ?? DEFAULT_BATCH_SIZE;
  let total = 0;
  for (;;) {
    const handled = await batch(limit);
    total += handled;
    if (handled < limit || options.stopping?.()) return total;
    await yieldToOthers();
  }
}

/**
 * PGlite runs no autovacuum: without a VACUUM, the space of deleted rows (and of their TOASTed html and
 * attachments) would never be reused. A plain VACUUM (not FULL) marks it free for new rows; it does not
 * shrink the files. PostgreSQL's autovacuum does the same on its own.
 */
async function vacuumChanged(db: Database, counts: PruneCounts): Promise<void> {
  const tables = [
    ...(counts.bodies + counts.messages > 0 ? ['emails', 'email_attachments'] : []),
    ...(counts.messages > 0 ? ['email_recipients', 'email_events'] : []),
    ...(counts.idempotencyKeys > 0 ? ['idempotency_keys'] : []),
    ...(counts.webhookDeliveries > 0 ? ['webhook_deliveries', 'webhook_attempts'] : []),
    ...(counts.eventCounts > 0 ? ['email_event_counts'] : []),
    ...(counts.dmarcReports > 0 ? ['dmarc_reports', 'dmarc_report_rows'] : []),
    ...(counts.requestLogs > 0 ? ['request_logs'] : []),
    ...(counts.receivedEmails > 0 ? ['received_emails', 'received_email_raw', 'received_attachments'] : []),
    ...(counts.failedJobs > 0 ? ['jobs'] : []),
    ...(counts.receivedEvents > 0 ? ['received_events'] : []),
    ...(counts.automationRuns > 0 ? ['automation_runs', 'automation_run_steps'] : []),
  ];
  if (tables.length > 0) await db.query(`VACUUM (SKIP_LOCKED) ${tables.join(', ')}`);
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
