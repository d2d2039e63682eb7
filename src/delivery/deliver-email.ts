import { publicBaseUrl, type Config } from '../platform/config.ts';
import { retryWhileUnreachable, type Database } from '../platform/db/database.ts';
import type { Signer } from '../platform/signing.ts';
import type { Job, JobHandler, JobResult } from '../queue/worker.ts';
import type { Transport } from './transport.ts';
import { takeMessage } from './take-message.ts';
import { gateRecipients } from './gate-recipients.ts';
import { simulateTestAddresses } from './simulate-test-addresses.ts';
import { outgoingMessage } from './outgoing-message.ts';
import { personalizeCopies } from './personalize-copy.ts';
import { sendCopy } from './send-copy.ts';
import { attemptNumbers, earliest, recordOutcomes, recordOutcomesAgain } from './record-outcome.ts';
import { finishOrRetry, retryForDeferred } from './finish-or-retry.ts';
import type { ReturnPath } from './return-path.ts';
import { autoPauseSettings, broadcastAutoPause } from '../broadcasts/auto-pause.ts';

// One 'deliver-email' job delivers one message to every recipient that has no outcome yet, in steps,
// each in its own file: take the message, gate the recipients, simulate the test addresses (recorded
// without being sent), build the outgoing message, personalize each copy, send, record each outcome,
// finish or retry. Outcomes are kept per recipient, so a retry (or
// a worker that died mid-send and whose job came back) sends only to the recipients with no outcome yet.

/** Copies sent at once for a message that goes out one copy per recipient. */
const COPIES_IN_FLIGHT = 4;

export function deliverEmailHandler(db: Database, config: Config, transport: Transport, signer: Signer): JobHandler {
  const links = { signer, baseUrl: publicBaseUrl(config) };
  const retrySchedule = config.deliveryRetrySchedule;
  const returnPath: ReturnPath | undefined = config.returnPathDomain
    ? { signer, domain: config.returnPathDomain }
    : undefined;
  // A broadcast copy's outcome, once committed, may pause its broadcast (broadcasts/auto-pause.ts).
  const autoPause = broadcastAutoPause(db, autoPauseSettings(config));

  return async (job: Job): Promise<JobResult> => {
    const taken = await takeMessage(db, String(job.payload.email_id));
    if (taken === 'finished') return { done: true };
    if (taken instanceof Date) return { retryAt: taken, reason: 'scheduled for later' };
    const { email } = taken;

    const gated = await gateRecipients(db, email, taken.recipients);
    const recipients = await simulateTestAddresses(db, email, gated);
    if (recipients.length === 0) return finishOrRetry(db, email.id, undefined);

    const message = await outgoingMessage(db, email, recipients);
    const copies = personalizeCopies(message, email, links, returnPath);
    const attempts = attemptNumbers(recipients);
    const waitingIn = new Map(recipients.map((r) => [r.address, r.hold_reason]));

    // Each copy's outcomes commit as soon as it is sent: a crash sends again only the copies not recorded.
    // A copy sent while the database is away is recorded once it is back (within the job's lease), not
    // sent again.
    // A message sent as one copy (the common case) is marked `sent`, and its job settled, by the statement
    // that records its outcomes; not when that statement had to be tried again (its first try may have
    // committed), nor for several copies: then the last step below does it.
    let settledWithOutcomes = copies.length === 1;
    let deferredUntil: Date | undefined;
    for (let i = 0; i < copies.length; i += COPIES_IN_FLIGHT) {
      await Promise.all(
        copies.slice(i, i + COPIES_IN_FLIGHT).map(async (copy) => {
          const results = (await sendCopy(transport, copy)).map((result) =>
            // Held again for the reason it already waits for: its delivery_delayed entry is written.
            result.hold && waitingIn.get(result.address) === result.hold.reason
              ? { ...result, hold: { ...result.hold, announced: true } }
              : result,
          );
          const retryAt = await retryWhileUnreachable((again) => {
            if (!again) {
              return recordOutcomes(db, email, results, attempts, retrySchedule, settledWithOutcomes ? job : undefined);
            }
            settledWithOutcomes = false;
            return recordOutcomesAgain(db, email, results, attempts, retrySchedule);
          }, job.leaseEndsAt);
          deferredUntil = earliest(deferredUntil, retryAt);
          if (email.broadcast_id !== null) {
            if (results.some((r) => r.outcome === 'bounced')) autoPause.noted(email.broadcast_id, 'hard_bounce');
            else if (results.some((r) => r.outcome === 'delivered' || r.outcome === 'failed')) {
              autoPause.noted(email.broadcast_id, 'outcome');
            }
          }
        }),
      );
    }
    if (settledWithOutcomes) return { ...retryForDeferred(deferredUntil), settled: true };
    return finishOrRetry(db, email.id, deferredUntil);
  };
}
