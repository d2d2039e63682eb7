import { parentPort } from 'node:worker_threads';
import { composeMessage } from './compose.ts';
import type { ComposeAnswer } from './composer.ts';
import type { OutgoingMessage } from './transport.ts';

// A compose thread (composer.ts): composes and signs each message it is handed and answers its bytes.
// Buffers arrive as plain Uint8Arrays (structured clone): attachments are made Buffers again.

parentPort!.on('message', ({ id, message }: { id: number; message: OutgoingMessage }) => {
  const attachments = message.attachments.map((a) => ({ ...a, content: Buffer.from(a.content) }));
  composeMessage({ ...message, attachments }).then(
    (raw) => parentPort!.postMessage({ id, raw } satisfies ComposeAnswer),
    (error: unknown) =>
      parentPort!.postMessage({
        id,
        error: error instanceof Error ? error.message : String(error),
      } satisfies ComposeAnswer),
  );
});
