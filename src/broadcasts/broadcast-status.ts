// A broadcast's statuses (the CHECK constraint of broadcasts.status) and what may happen in each.
//
//   draft ──send──▶ queued ──(every recipient has its copy)──▶ sent
//     │  ▲            │  ▲
//     │  └─cancel─┐   │  └─resume── paused ◀─(pause, or the automatic check)
//     └─send at─▶ scheduled        │
//                  (due) ▶ queued   cancel (from queued or paused) ▶ canceled
//
// failed: the audience could not be taken (its segment was deleted before it was due, say), or the
// fan-out job failed for good (fanOutFailed); failure_reason says why.
// Resend's statuses are draft, scheduled, queued, sent, canceled, failed; paused is Mailroom's own.

export const BROADCAST_STATUSES = ['draft', 'scheduled', 'queued', 'paused', 'sent', 'canceled', 'failed'] as const;
export type BroadcastStatus = (typeof BROADCAST_STATUSES)[number];

/** Statuses in which the broadcast may still be edited or deleted. */
export const EDITABLE_STATUSES: readonly BroadcastStatus[] = ['draft', 'scheduled'];

/** Why a recipient of the audience was left out when it was taken (broadcast_recipients.skip_reason). */
export type SkipReason = 'unsubscribed' | 'topic' | 'suppressed';
