import { ServiceError } from '../platform/errors.ts';
import { checkMessageShape, type EmailMessage } from './message-schema.ts';

export const MAX_BATCH = 100;

/**
 * Fields a batch entry may not carry: refused, not ignored, whether or not the template or topic
 * exists (Resend's batch accepts them; Mailroom sends them only through POST /emails).
 */
const NOT_IN_BATCH = ['template', 'topic_id'] as const;

/** Refuses an entry that carries template or topic_id (present at all): 400 unsupported_in_batch. */
export function refuseFieldsNotInBatch(entry: unknown): void {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return;
  for (const field of NOT_IN_BATCH) {
    if (field in entry) {
      throw new ServiceError(
        'unsupported_in_batch',
        `${field} is not supported in a batch entry; send this message through POST /emails`,
        field,
      );
    }
  }
}

/** One batch entry's shape, checked on its own so that a bad entry refuses only itself. */
export function validateBatchEntry(entry: unknown): EmailMessage {
  refuseFieldsNotInBatch(entry);
  return checkMessageShape(entry);
}
