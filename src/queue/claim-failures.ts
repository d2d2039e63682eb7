import type { Logger } from '../platform/logger.ts';

// A worker polls every fraction of a second; while the database is away every poll's claim fails. One
// error line per poll would repeat for as long as the outage lasts, so: the first failure is an error,
// the next ones one warning a minute with their count, and the first claim that works again one warning
// saying how many failed.

const REPEAT_EVERY_MS = 60_000;

export interface ClaimFailures {
  failed(error: unknown): void;
  succeeded(): void;
}

export function claimFailureLog(
  log: Pick<Logger, 'error' | 'warn'>,
  fields: Record<string, unknown> = {},
  now: () => number = Date.now,
): ClaimFailures {
  let failures = 0;
  let toldAt = 0;
  return {
    failed(error) {
      failures += 1;
      if (failures === 1) {
        toldAt = now();
        log.error({ ...fields, err: error }, 'could not claim jobs');
      } else if (now() - toldAt >= REPEAT_EVERY_MS) {
        toldAt = now();
        log.warn({ ...fields, err: error, failures }, 'still cannot claim jobs');
      }
    },
    succeeded() {
      if (failures === 0) return;
      log.warn({ ...fields, failures }, 'claims jobs again');
      failures = 0;
    },
  };
}
