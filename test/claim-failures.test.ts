// A worker's claims failing at every poll while the database is away: one error line, then one warning a
// minute with the count, and one warning when claims work again; never an error line per poll.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { claimFailureLog } from '../src/queue/claim-failures.ts';

test('claims failing for minutes: one error, a warning a minute, one warning on recovery', () => {
  const lines: Array<[string, string, Record<string, unknown>]> = [];
  const log = {
    error: (fields: Record<string, unknown>, message?: string) => void lines.push(['error', message ?? '', fields]),
    warn: (fields: Record<string, unknown>, message?: string) => void lines.push(['warn', message ?? '', fields]),
  };
  let clock = 0;
  const failures = claimFailureLog(log, { queue: 'deliver-email' }, () => clock);
  const outage = new Error('connect ECONNREFUSED 127.0.0.1:5432');
  // Three minutes of polls every 250 ms: 720 failed claims.
  for (let poll = 0; poll < 720; poll++, clock += 250) failures.failed(outage);
  failures.succeeded();
  failures.succeeded();
  assert.deepEqual(
    lines.map(([level, message]) => `${level} ${message}`),
    [
      'error could not claim jobs',
      'warn still cannot claim jobs',
      'warn still cannot claim jobs',
      'warn claims jobs again',
    ],
  );
  assert.equal(lines[3]![2].failures, 720);
  assert.equal(lines[0]![2].queue, 'deliver-email');
  // A later outage is told again as an error.
  failures.failed(outage);
  assert.equal(lines.at(-1)![0], 'error');
});
