// How the delivery benchmarks hand Mailroom their messages: receipts, one recipient each, through
// POST /emails/batch, 100 to a request, all requests at once. Throws on any refused batch or entry.

/** The receipt the benchmarks send as message `i` (Postfix's rivals get bodies of a similar size). */
export const receipt = (i: number) => ({
  subject: `Your receipt #${i}`,
  html: `<p>Thanks for order ${i}.</p>`,
  text: `Thanks for order ${i}.`,
});

export async function submitReceipts(
  base: string,
  org: { domain: string; sendingKey: string },
  count: number,
  to: (i: number) => string,
): Promise<void> {
  const batches = [];
  for (let first = 0; first < count; first += 100) {
    const entries = [];
    for (let i = first; i < Math.min(count, first + 100); i++) {
      entries.push({ from: `Shop <shop@${org.domain}>`, to: to(i), ...receipt(i) });
    }
    batches.push(
      fetch(`${base}/emails/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.sendingKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(entries),
      }).then(async (res) => {
        const answer = await res.text();
        if (res.status !== 200 || JSON.parse(answer).errors) throw new Error(`batch answered ${res.status}: ${answer}`);
      }),
    );
  }
  await Promise.all(batches);
}
