// Reports as a receiving server sends them back to a return path, for tests of the inbound listener:
// RFC 3464 delivery status notifications and RFC 5965 abuse (complaint) reports.

const CRLF = '\r\n';

/** One recipient's block of a report: failed with `status` and the server's `diagnostic`. */
export const failedRecipient = (recipient: string, status = '5.1.1', diagnostic = 'smtp; 550 5.1.1 user unknown') => [
  `Final-Recipient: rfc822; ${recipient}`,
  'Action: failed',
  `Status: ${status}`,
  `Diagnostic-Code: ${diagnostic}`,
];

/** An RFC 3464 report to `returnPath`: a human-readable part, the delivery-status part, the original's header. */
export function deliveryStatusReport(
  returnPath: string,
  recipientBlocks: string[][],
  original: { from: string; to: string },
): string {
  return [
    'From: Mail Delivery System <mailer-daemon@mx.example.com>',
    `To: ${returnPath}`,
    'Subject: Undelivered Mail Returned to Sender',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="dsn-boundary"',
    '',
    '--dsn-boundary',
    'Content-Type: text/plain',
    '',
    'Your message could not be delivered.',
    '--dsn-boundary',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.com',
    'Arrival-Date: Mon, 2 Jun 2025 10:00:00 +0000',
    ...recipientBlocks.flatMap((block) => ['', ...block]),
    '',
    '--dsn-boundary',
    'Content-Type: text/rfc822-headers',
    '',
    `From: ${original.from}`,
    `To: ${original.to}`,
    'Subject: Hi',
    '',
    '--dsn-boundary--',
    '',
  ].join(CRLF);
}

/** An RFC 5965 report to `returnPath`; `feedback` are the fields of its machine-readable part. */
export function feedbackReport(returnPath: string, feedback: string[], original: { from: string; to: string }): string {
  return [
    'From: Feedback Loop <fbl@isp.example.net>',
    `To: ${returnPath}`,
    'Subject: Abuse report',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=feedback-report; boundary="arf-boundary"',
    '',
    '--arf-boundary',
    'Content-Type: text/plain',
    '',
    'This is an email abuse report.',
    '--arf-boundary',
    'Content-Type: message/feedback-report',
    '',
    ...feedback,
    '',
    '--arf-boundary',
    'Content-Type: message/rfc822',
    'Content-Disposition: inline',
    '',
    `From: ${original.from}`,
    `To: ${original.to}`,
    'Subject: Hi',
    '',
    'Hello',
    '--arf-boundary--',
    '',
  ].join(CRLF);
}
