import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';

const generateKeyPairAsync = promisify(generateKeyPair);

export interface DkimKeyPair {
  /** PKCS#8 PEM: what a signer loads. */
  privateKey: string;
  /** SPKI DER as base64: the p= of the DNS record. */
  publicKey: string;
}

/** A fresh RSA-2048 key pair (RFC 8301: at least 1024, 2048 is what every receiver accepts in one TXT). */
export async function generateDkimKeyPair(): Promise<DkimKeyPair> {
  // Asynchronous on purpose: generating an RSA key takes tens of milliseconds of CPU.
  const { privateKey, publicKey } = await generateKeyPairAsync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKey, publicKey: publicKey.toString('base64') };
}

export function dkimRecordName(selector: string, domain: string): string {
  return `${selector}._domainkey.${domain}`;
}

export function dkimRecordValue(publicKey: string): string {
  return `v=DKIM1; k=rsa; p=${publicKey}`;
}

/**
 * Whether a DKIM TXT record (chunks already joined) publishes this public key. Tags are parsed as
 * RFC 6376 §3.6.1 says: whitespace around tags and inside the base64 is not significant, v= is optional
 * but must be DKIM1, k= defaults to rsa.
 */
export function publishesDkimKey(txt: string, publicKey: string): boolean {
  const tags = new Map<string, string>();
  for (const part of txt.split(';')) {
    const at = part.indexOf('=');
    if (at === -1) continue;
    tags.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).trim());
  }
  const version = tags.get('v');
  if (version !== undefined && version !== 'DKIM1') return false;
  if ((tags.get('k') ?? 'rsa').toLowerCase() !== 'rsa') return false;
  return tags.get('p')?.replace(/\s+/g, '') === publicKey;
}
