import { isConnectionLost } from '../../platform/db/database.ts';
import { classifyReply } from '../../shaping/reply-classes.ts';
import { isHeld, type Held, type ShapeRequest, type ShapeTarget, type Shaper } from '../../shaping/shaper.ts';
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

/**
 * The recipients' results when their sending domain has tls 'enforced' and no server gave TLS (none
 * offered STARTTLS, or the handshake failed): deferred, as for a recipient domain that requires TLS, so
 * that they are tried again and fail once retries run out. Nothing was sent in the clear.
 */
export function enforcedTlsFailure(recipients: string[], senderDomain: string, refusals: string[]): RouteFailure {
  const response = `4.7.5 Not delivered: the sending domain ${senderDomain} requires TLS (tls: enforced), and it could not be had: ${refusals.join('; ')}`;
  return new RouteFailure(
    recipients.map((address) => ({ address, outcome: 'deferred', smtpCode: undefined, response }) as const),
  );
}

/** A failure to open a connection to the destination (not the database's): the recipients' results. */
class ConnectFailure extends Error {
  readonly failure: unknown;
  constructor(failure: unknown) {
    super('Could not connect');
    this.failure = failure;
  }
}

/** How soon a message is tried again when the shaping state could not be read (the database is away). */
const UNREACHABLE_RETRY_MS = 2000;

/**
 * Sends one transaction. The destination's answers and failures become results. When the shaping
 * state's database cannot be reached before anything is sent, the recipients wait a moment without a
 * word (no attempt spent, no timeline entry) and are tried again as soon as it is back; any other
 * failure of it is thrown (nothing was sent).
 */
export async function shapedSend(
  shaper: Shaper,
  request: ShapeRequest,
  envelope: { from: string; to: string[] },
  raw: Buffer,
  connect: (target: ShapeTarget) => Promise<SmtpSession>,
  options: {
    context?: () => string | undefined;
    tellSource?: boolean;
    /** What the timeline should say about a session's TLS for this message (an MTA-STS policy in testing). */
    tlsNote?: (session: SmtpSession) => string | undefined;
  } = {},
): Promise<RecipientResult[]> {
  for (let tries = 0; ; tries++) {
    let attempt: SendAttempt | Held;
    // The way the message went (a source at a site): its replies count there.
    let via: ShapeTarget | undefined;
    const connectOrSay = (target: ShapeTarget) => {
      via = target;
      return connect(target).catch((error: unknown) => {
        throw error instanceof RouteFailure ? error : new ConnectFailure(error);
      });
    };
    // What the timeline should say about the session's TLS (an MTA-STS policy in testing not met).
    let tlsNote: string | undefined;
    const answered = (results: RecipientResult[]) =>
      readReplies(shaper, { ...request, ...replyKey(via, request) }, results).then((read) =>
        read.map((result) => ({
          ...result,
          ...(options.tellSource && via ? { egress: egressOf(via) } : {}),
          ...(tlsNote !== undefined ? { tlsNote } : {}),
        })),
      );
    try {
      attempt = await shaper.run(request, connectOrSay, (session, target) => {
        via = target;
        tlsNote = options.tlsNote?.(session);
        return session.send(envelope, raw);
      });
    } catch (error) {
      if (error instanceof RouteFailure) {
        // Nothing was sent (no route, or a TLS requirement not met): a warm-up turn goes back.
        await shaper.unused({ ...request, ...replyKey(via, request), recipients: envelope.to.length });
        return error.results;
      }
      // A refusal at the greeting (421 4.7.28, too many connections) is a reply like any other.
      if (error instanceof ConnectFailure) {
        return answered(resultsFromSendError(envelope.to, error.failure, options.context?.()));
      }
      if (!isConnectionLost(error)) throw error;
      const until = new Date(Date.now() + UNREACHABLE_RETRY_MS);
      const reply = 'Waiting for the database: the destination limits could not be read';
      return heldResults(envelope.to, request.site, { held: true, until, reason: 'throttled', reply, quiet: true });
    }
    if (isHeld(attempt)) return heldResults(envelope.to, request.site, attempt);
    if (!('info' in attempt) && attempt.nothingSent && tries === 0) {
      await shaper.unused({ ...request, ...replyKey(via, request), recipients: envelope.to.length });
      continue;
    }
    const results =
      'info' in attempt
        ? resultsFromSendInfo(envelope.to, attempt.info)
        : resultsFromSendError(envelope.to, attempt.error);
    return answered(results);
  }
}

/** The key a reply counts against: the source and site the message went through. */
const replyKey = (via: ShapeTarget | undefined, request: ShapeRequest): Partial<ShapeRequest> =>
  via ? { source: via.source, site: via.site, warmup: via.warmup, destination: request.site } : {};

const egressOf = (via: ShapeTarget): NonNullable<RecipientResult['egress']> =>
  via.overflow ? { source: via.source, overflow: true } : { source: via.source };

/**
 * Tells the shaper what the site answered, once per distinct reply of the transaction, and holds the
 * recipients whose reply put the site (or the sender at the site) on hold: a throttle is the sender's
 * matter, not the recipient's, so it spends no attempt. A permanent sender fault is still that
 * recipient's failed try (it is retried, never bounced); the hold keeps the sender's next messages back.
 */
async function readReplies(
  shaper: Shaper,
  request: ShapeRequest,
  results: RecipientResult[],
): Promise<RecipientResult[]> {
  const holds = new Map<string, Held | undefined>();
  // How many recipients got each reply: a warming source's day counts recipients.
  const counts = new Map<string, number>();
  for (const result of results) {
    const reply = `${result.smtpCode ?? ''} ${result.response}`;
    counts.set(reply, (counts.get(reply) ?? 0) + 1);
  }
  for (const result of results) {
    const reply = `${result.smtpCode ?? ''} ${result.response}`;
    if (holds.has(reply)) continue;
    const cls = classifyReply(result.smtpCode, result.response);
    // The message has gone (or been refused): the outcome must be recorded whatever happens here, so a
    // reply the shaping state cannot take now (the database is away) only goes unlearned.
    const hold = await shaper
      .reply({ ...request, recipients: counts.get(reply) }, { code: result.smtpCode, text: result.response }, cls)
      .catch(() => undefined);
    holds.set(reply, hold);
  }
  return results.map((result) => {
    const hold = holds.get(`${result.smtpCode ?? ''} ${result.response}`);
    const permanent = result.smtpCode !== undefined && result.smtpCode >= 500;
    if (!hold || result.outcome === 'delivered' || permanent) return result;
    return heldResults([result.address], request.site, { ...hold, reply: result.response })[0]!;
  });
}

/** Every recipient held: it waits until the hold ends, and this try does not count. */
export function heldResults(recipients: string[], site: string, hold: Held): RecipientResult[] {
  return recipients.map((address) => ({
    address,
    outcome: 'held',
    smtpCode: undefined,
    response: hold.reply,
    hold: { until: hold.until, reason: hold.reason, site, ...(hold.quiet ? { announced: true } : {}) },
  }));
}
