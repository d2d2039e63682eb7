// The message the accept benchmarks send: a receipt to two recipients with a tag, the shape of a typical
// transactional send, so their figures compare.
import autocannon from 'autocannon';

export function acceptMessage(from: string): string {
  return JSON.stringify({
    from,
    to: ['alice@example.com', 'Bob <bob@example.com>'],
    subject: 'Your receipt',
    html: '<p>Thanks for your order.</p>',
    text: 'Thanks for your order.',
    tags: [{ name: 'category', value: 'receipt' }],
  });
}

/** `POST {base}/emails` with that message from `connections` clients for `seconds`: autocannon's result. */
export function driveAccept(options: {
  base: string;
  token: string;
  from: string;
  connections: number;
  seconds: number;
}): Promise<autocannon.Result> {
  return autocannon({
    url: `${options.base}/emails`,
    method: 'POST',
    connections: options.connections,
    duration: options.seconds,
    headers: { authorization: `Bearer ${options.token}`, 'content-type': 'application/json' },
    body: acceptMessage(options.from),
  });
}
