import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Config } from '../../platform/config.ts';
import { composeInline, type Composer } from '../composer.ts';
import type { OutgoingMessage, RecipientResult, Transport } from '../transport.ts';

// Development delivery: the message is composed and signed exactly as for real, then stored as
// <dataDir>/captured/<emailId>.eml instead of leaving the machine. Every recipient reads delivered.

// Email ids become file names: anything else (a path separator, "..") is refused.
const SAFE_ID = /^[A-Za-z0-9_-]{1,128}$/;

export function capturedMessagePath(dataDir: string, emailId: string): string {
  if (!SAFE_ID.test(emailId)) throw new Error(`not a valid email id for a file name: ${JSON.stringify(emailId)}`);
  return join(dataDir, 'captured', `${emailId}.eml`);
}

/** The captured message as stored, or undefined when there is none (or the id is not one). */
export async function readCaptured(dataDir: string, emailId: string): Promise<Buffer | undefined> {
  if (!SAFE_ID.test(emailId)) return undefined;
  try {
    return await readFile(capturedMessagePath(dataDir, emailId));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

export function createCaptureTransport(config: Pick<Config, 'dataDir'>, composer: Composer = composeInline): Transport {
  return {
    name: 'capture',
    async send(message: OutgoingMessage): Promise<RecipientResult[]> {
      const raw = await composer.compose(message);
      await writeAtomically(capturedMessagePath(config.dataDir, message.emailId), raw);
      return message.envelope.to.map((address) => ({
        address,
        outcome: 'delivered',
        smtpCode: undefined,
        response: 'captured',
      }));
    },
    close: () => composer.close(),
  };
}

/** Written under a temporary name in the same directory, then renamed: a reader never sees half a file. */
async function writeAtomically(path: string, content: Buffer): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(temporary, content);
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}
