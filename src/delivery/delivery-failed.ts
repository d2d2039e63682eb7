import type { Queryable } from '../platform/db/database.ts';
import { cappedText } from '../platform/text.ts';
import { timelineEntryRow } from '../emails/timeline.ts';
import { countOutcome } from '../platform/metrics.ts';
import type { FailedJobHook } from '../queue/leases.ts';
import { writeOutcomeRows, type OutcomeRow } from './record-outcome.ts';

// A delivery job that fails for good (its handler threw on every run up to MAILROOM_JOB_MAX_ATTEMPTS, or
// threw a PermanentJobError) must not leave its message `sending` for ever with nothing said: each
// recipient still pending fails with reason `delivery_error` and the error, with its `failed` timeline
// entry and email.failed webhook, and the message reads `sent`. The job itself stays listed as failed
// (`mailroom jobs list --failed`); retrying it then finds nothing left to send.

export const deliveryFailed: FailedJobHook = async (tx: Queryable, job, reason) => {
  const emailId = job.payload.email_id;
  if (typeof emailId !== 'string') return;
  const { rows } = await tx.query<{ address: string; attempts: number; organization_id: string }>(
    `SELECT r.address, r.attempts, e.organization_id FROM email_recipients r JOIN emails e ON e.id = r.email_id
      WHERE r.email_id = $1 AND r.status = 'pending' ORDER BY r.address`,
    [emailId],
  );
  if (rows.length === 0) return;
  // A run may have failed before it took the message (still queued): it was due, and is now given up.
  await tx.query(`UPDATE emails SET status = 'sending' WHERE id = $1 AND status IN ('queued', 'scheduled')`, [emailId]);
  const error = cappedText(reason, 1000);
  const outcomes: OutcomeRow[] = rows.map((recipient) => ({
    ...timelineEntryRow({
      emailId,
      organizationId: recipient.organization_id,
      recipient: recipient.address,
      kind: 'failed',
      data: { reason: 'delivery_error', error },
    }),
    address: recipient.address,
    status: 'failed',
    attempts: recipient.attempts,
    failure_reason: 'delivery_error',
    last_response: error,
    suppress: null,
    mark_sent: true,
    site: null,
    hold_reason: null,
  }));
  await writeOutcomeRows(tx, outcomes);
  for (const { address } of outcomes) countOutcome('failed', address);
};
