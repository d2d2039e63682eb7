import { ServiceError } from '../platform/errors.ts';
import { checkMessageShape, type EmailMessage } from './message-schema.ts';

export const MAX_BATCH = 100;

/** Fields a batch entry may not carry (send those with POST /emails): refused, not ignored. */
const NOT_IN_BATCH = ['template', 'topic_id'] as const;

/** One batch entry's shape, checked on its own so that a bad entry refuses only itself. */
export function validateBatchEntry(entry: unknown): EmailMessage {
  if (entry !== null && typeof entry === 'object' && !Array.isArray(entry)) {
    for (const field of NOT_IN_BATCH) {
      if (field in entry) {
        throw new ServiceError(
          'unsupported_in_batch',
          `${field} is not supported in a batch; send it with POST /emails`,
          field,
        );
      }
    }
  }
  return checkMessageShape(entry);
}
