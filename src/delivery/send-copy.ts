import type { OutgoingMessage, RecipientResult, Transport } from './transport.ts';

// Step 6, send: hand one copy to the transport, which answers with one outcome per recipient of its
// envelope (classified in smtp-outcome.ts).

/** A transport that throws (a message that cannot be composed, a bug) defers every recipient. */
export async function sendCopy(transport: Transport, copy: OutgoingMessage): Promise<RecipientResult[]> {
  try {
    return await transport.send(copy);
  } catch (error) {
    const response = `Could not send: ${error instanceof Error ? error.message : String(error)}`;
    return copy.envelope.to.map((address) => ({ address, outcome: 'deferred', smtpCode: undefined, response }));
  }
}
