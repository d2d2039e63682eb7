import { checkMessageShape, type EmailMessage } from './message-schema.ts';

export const MAX_BATCH = 100;

/**
 * One batch entry's shape, checked on its own so that a bad entry refuses only itself. An entry takes
 * every field of a single send, template and topic_id included (as Resend's batch schema does).
 */
export function validateBatchEntry(entry: unknown): EmailMessage {
  return checkMessageShape(entry);
}
