import { request } from 'undici';
import type { Config } from '../platform/config.ts';
import type { Logger } from '../platform/logger.ts';
import { hasControlCharacter } from '../platform/text.ts';

// Spam scanning by an rspamd the operator runs (MAILROOM_RSPAMD_URL): each received message is posted
// to its HTTP API (POST /checkv2, the raw message as the body, the SMTP envelope as headers) and its
// answer becomes the verdict. Scanning is optional and never stands between a sender and the mailbox:
// no filter configured, a filter that cannot be reached, one that answers an error or does not answer
// within MAILROOM_SPAM_CHECK_TIMEOUT_MS, all give null, and the message is stored unscanned (logged).
//
// The verdict is rspamd's own: 'spam' when its action is one of those that treat a message as spam
// ('add header', 'rewrite subject', 'reject'), else 'ham'. Quarantined: the score is at or over
// MAILROOM_SPAM_QUARANTINE_SCORE when that is set, else rspamd's action is 'reject' (its reject
// threshold, or a rule that forces it, such as the GTUBE test string). A quarantined message is spam.
//
// How the listener uses it: `const spamCheck = createSpamChecker(config, log)` once, at start, then
// `spamCheck(raw, { clientAddress, helo, mailFrom, recipients })` per message (with MAILROOM_RSPAMD_URL
// unset it answers null at once). The envelope is optional, but rspamd scores better with it: the
// client's address for its IP rules, the HELO, MAIL FROM and RCPT TO for its envelope rules.

export interface SpamVerdict {
  verdict: 'ham' | 'spam';
  score: number;
  /** At or over the configured threshold: stored but kept out of the list and not announced. */
  quarantined: boolean;
}

/** What the SMTP session said about a message, handed to the filter with it. */
export interface SpamEnvelope {
  /** The connecting client's IP address. */
  clientAddress?: string | undefined;
  helo?: string | undefined;
  /** The SMTP MAIL FROM; '' for the null sender. */
  mailFrom?: string | undefined;
  /** The RCPT TO addresses. */
  recipients?: string[] | undefined;
}

/** Scans a raw message; null when no filter is configured or it could not be reached. */
export type SpamChecker = (raw: Buffer, envelope?: SpamEnvelope) => Promise<SpamVerdict | null>;

export type SpamCheckConfig = Pick<Config, 'rspamdUrl' | 'spamQuarantineScore' | 'spamCheckTimeoutMs'>;

/** rspamd's actions that mean the message is spam (the others: 'no action', 'greylist', 'soft reject'). */
const SPAM_ACTIONS = new Set(['add header', 'rewrite subject', 'reject']);

const silent: Logger = { info: () => {}, warn: () => {}, error: () => {} };

/**
 * The scanner for the configuration: one that answers null for every message when MAILROOM_RSPAMD_URL
 * is unset (or when called without a configuration).
 */
export function createSpamChecker(config?: SpamCheckConfig, log: Logger = silent): SpamChecker {
  if (config?.rspamdUrl === undefined) return async () => null;
  const url = new URL('checkv2', config.rspamdUrl.endsWith('/') ? config.rspamdUrl : `${config.rspamdUrl}/`);
  const timeoutMs = config.spamCheckTimeoutMs;
  const threshold = config.spamQuarantineScore;

  return async (raw, envelope = {}) => {
    const started = Date.now();
    try {
      const answer = await request(url, {
        method: 'POST',
        body: raw,
        headers: envelopeHeaders(envelope),
        signal: AbortSignal.timeout(timeoutMs),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const body = await answer.body.text();
      if (answer.statusCode !== 200) {
        log.warn(
          { status: answer.statusCode, answer: body.slice(0, 200) },
          'spam filter refused the message; stored unscanned',
        );
        return null;
      }
      const { score, action } = JSON.parse(body) as { score?: unknown; action?: unknown };
      if (typeof score !== 'number' || !Number.isFinite(score) || typeof action !== 'string') {
        log.warn({ answer: body.slice(0, 200) }, 'spam filter gave no score; stored unscanned');
        return null;
      }
      const quarantined = threshold === undefined ? action === 'reject' : score >= threshold;
      return { verdict: quarantined || SPAM_ACTIONS.has(action) ? 'spam' : 'ham', score, quarantined };
    } catch (error) {
      log.warn(
        { err: error, elapsedMs: Date.now() - started, timeoutMs },
        'spam filter did not answer; stored unscanned',
      );
      return null;
    }
  };
}

/** rspamd's request headers for the envelope; a value that could not be a header is left out. */
function envelopeHeaders(envelope: SpamEnvelope): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = { 'content-type': 'message/rfc822' };
  const usable = (value: string | undefined): value is string =>
    value !== undefined && value !== '' && value.length <= 998 && !hasControlCharacter(value);
  if (usable(envelope.clientAddress)) headers.ip = envelope.clientAddress.replace(/^::ffff:/i, '');
  if (usable(envelope.helo)) headers.helo = envelope.helo;
  if (usable(envelope.mailFrom)) headers.from = envelope.mailFrom;
  const recipients = (envelope.recipients ?? []).filter(usable);
  if (recipients.length > 0) headers.rcpt = recipients;
  return headers;
}
