// Which bounces put an address on the suppression list: a refusal that says the mailbox itself is bad.
// Delivery outcomes, bounce reports and the bounce of webhook payloads (Resend's NoEmail) all ask here.

/**
 * Whether a bounce says the mailbox itself is bad (enhanced status 5.1.x, or 550/551/553 without one):
 * only then is the address suppressed. A refusal of the content or the sender (554 at DATA, 5.7.x) is not
 * the recipient's fault.
 */
export function isBadMailbox(result: { smtpCode: number | undefined; response: string }): boolean {
  const enhanced = /\b5\.(\d{1,3})\.\d{1,3}\b/.exec(result.response);
  if (enhanced) return enhanced[1] === '1';
  return result.smtpCode === 550 || result.smtpCode === 551 || result.smtpCode === 553;
}
