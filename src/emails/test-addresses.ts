import { addressKey } from '../platform/address-key.ts';

// Resend's test addresses: mailboxes that exist to try an integration, whose outcome is known in advance.
// A message to one of them never leaves the machine, whatever the transport; delivery records the outcome
// the address names, with the timeline entries and webhook events a real outcome has.
// - delivered@resend.dev: delivered;
// - bounced@resend.dev: a hard bounce (550 5.1.1), without putting the address on the suppression list,
//   so a test can be run again;
// - complained@resend.dev: delivered, then a spam complaint, again without suppression.
// Each may carry a label (`delivered+signup@resend.dev`), which changes nothing but the address. The
// domain is resend.dev exactly (not a subdomain), compared without case like every address.
// No other mailbox exists at resend.dev: a message to any other address there is refused when it is
// sent (a misspelt test address is a mistake to hear about, not an outcome to invent), and delivery
// never sends anything to resend.dev, whatever the message.

export type TestOutcome = 'delivered' | 'bounced' | 'complained';

export const TEST_DOMAIN = 'resend.dev';

const TEST_LOCAL_PART = /^(delivered|bounced|complained)(?:\+.*)?$/;

/** Whether the address is at resend.dev: nothing is ever sent there. */
export function isTestDomainAddress(address: string): boolean {
  const key = addressKey(address);
  const at = key.lastIndexOf('@');
  return at >= 0 && key.slice(at + 1) === TEST_DOMAIN;
}

/** The outcome a test address names; undefined for any other address (at resend.dev or not). */
export function testOutcome(address: string): TestOutcome | undefined {
  if (!isTestDomainAddress(address)) return undefined;
  const key = addressKey(address);
  return TEST_LOCAL_PART.exec(key.slice(0, key.lastIndexOf('@')))?.[1] as TestOutcome | undefined;
}

/**
 * SQL that is true unless the address in `column` is at resend.dev: a recipient whose outcomes count in
 * the rates and counts that judge deliverability (the overview, GET /emails/metrics, the doctor, the
 * automatic pause of a broadcast). Every recipient at resend.dev gets a simulated outcome, so the domain
 * alone decides; an entry without a recipient counts. It compares the row already read (no index needed)
 * and is the same rule as isTestDomainAddress for the parsed addresses stored.
 */
export const countsInRatesSql = (column: string): string =>
  `(${column} IS NULL OR lower(${column}) NOT LIKE '%@${TEST_DOMAIN}')`;
