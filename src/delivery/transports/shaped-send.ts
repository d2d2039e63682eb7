import { isHeld, type Held, type ShapeRequest, type Shaper } from '../../shaping/shaper.ts';
import { resultsFromSendError, resultsFromSendInfo } from '../smtp-outcome.ts';
import type { RecipientResult } from '../transport.ts';
import type { SendAttempt, SmtpSession } from './smtp-session.ts';

// How both SMTP transports send one transaction under traffic shaping: over a kept connection to the
// site (or a new one), with one more try on a fresh connection when a kept one turns out to have been
// dropped by the server before any of the message went out. A message the shaper holds gets `held`
// results: it waits, without spending a retry attempt.

/** Thrown by `connect` when the destination cannot be reached at all: these are the recipients' results. */
export class RouteFailure extends Error {
  readonly results: RecipientResult[];
  constructor(results: RecipientResult[]) {
    super(results[0]?.response ?? 'No route');
    this.results = results;
  }
}

export async function shapedSend(
  shaper: Shaper,
  request: ShapeRequest,
  envelope: { from: string; to: string[] },
  raw: Buffer,
  connect: () => Promise<SmtpSession>,
  context?: () => string | undefined,
): Promise<RecipientResult[]> {
  for (let tries = 0; ; tries++) {
    let attempt: SendAttempt | Held;
    try {
      attempt = await shaper.run(request, connect, (session) => session.send(envelope, raw));
    } catch (error) {
      if (error instanceof RouteFailure) return error.results;
      return resultsFromSendError(envelope.to, error, context?.());
    }
    if (isHeld(attempt)) return heldResults(envelope.to, request.site, attempt);
    if ('info' in attempt) return resultsFromSendInfo(envelope.to, attempt.info);
    if (attempt.nothingSent && tries === 0) continue;
    return resultsFromSendError(envelope.to, attempt.error);
  }
}

/** Every recipient held: it waits until the hold ends, and this try does not count. */
export function heldResults(recipients: string[], site: string, hold: Held): RecipientResult[] {
  return recipients.map((address) => ({
    address,
    outcome: 'held',
    smtpCode: undefined,
    response: hold.reply,
    hold: { until: hold.until, reason: hold.reason, site },
  }));
}
