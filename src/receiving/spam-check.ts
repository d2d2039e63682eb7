// Spam scanning by a filter the operator runs. SEAM (filled in by the spam-check work).

export interface SpamVerdict {
  verdict: 'ham' | 'spam';
  score: number;
  /** At or over the configured threshold: stored but kept out of the list and not announced. */
  quarantined: boolean;
}

/** Scans a raw message; null when no filter is configured or it could not be reached. */
export type SpamChecker = (raw: Buffer) => Promise<SpamVerdict | null>;

export function createSpamChecker(): SpamChecker {
  return async () => null;
}
