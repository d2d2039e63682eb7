// The message the accept benchmarks send: a receipt to two recipients with a tag, the shape of a typical
// transactional send, so their figures compare.
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
