import type { BroadcastStatus } from '../BroadcastsPage.tsx';

/** A broadcast's counts: its audience as taken, who was left out and why, and what its copies became. */
export interface BroadcastStats {
  audience: number;
  skipped_unsubscribed: number;
  skipped_topic: number;
  skipped_suppressed: number;
  /** Contacts of the audience whose copy is not made yet. */
  pending: number;
  /** Copies made and waiting to leave. */
  queued: number;
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  complained: number;
  unsubscribed: number;
  failed: number;
}

/** GET /broadcasts/:id */
export interface Broadcast {
  object: 'broadcast';
  id: string;
  name: string | null;
  segment_id: string | null;
  from: string | null;
  subject: string | null;
  reply_to: string[] | string | null;
  preview_text: string | null;
  html: string | null;
  text: string | null;
  topic_id: string | null;
  status: BroadcastStatus;
  created_at: string;
  scheduled_at: string | null;
  sent_at: string | null;
  completed_at: string | null;
  pause_reason: string | null;
  failure_reason: string | null;
  stats?: BroadcastStats | null;
}

/** What may still be changed: a broadcast that has not begun sending. */
export const isEditable = (status: BroadcastStatus) => status === 'draft' || status === 'scheduled';
