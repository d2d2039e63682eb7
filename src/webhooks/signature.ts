import { createHmac, createSecretKey } from 'node:crypto';
import { keptKeys } from '../platform/crypto-keys.ts';

// Every delivery is signed twice, in two schemes, with the same live secrets (during a rotation, each of
// them: one signature per secret, so a receiver holding either secret verifies the request).
//
// x-service-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">, keyed with the signing
// secret string as UTF-8: Stripe's scheme, so Stripe's libraries verify it. One v1= per secret.
//
// webhook-signature: v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<raw body>">, keyed with
// the bytes the base64 after `whsec_` decodes to: the Standard Webhooks scheme, so Resend's SDK (Svix) and
// the standardwebhooks libraries verify it. One `v1,…` entry per secret, separated by single spaces.

// The HMAC keys of each scheme, made once per secret.
const stripeKey = keptKeys((secret) => createSecretKey(Buffer.from(secret, 'utf8')));
const standardKey = keptKeys((secret) => createSecretKey(standardSigningKey(secret)));

export function signatureHeader(secrets: string[], timestamp: number, body: string): string {
  const signed = `${timestamp}.${body}`;
  const v1 = secrets.map(
    (secret) => `v1=${createHmac('sha256', stripeKey(secret)).update(signed, 'utf8').digest('hex')}`,
  );
  return [`t=${timestamp}`, ...v1].join(',');
}

const SECRET_PREFIX = 'whsec_';

/** The HMAC key of a `whsec_<base64>` secret in the Standard Webhooks scheme: the decoded base64. */
export function standardSigningKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

export function standardSignatureHeader(secrets: string[], id: string, timestamp: number, body: string): string {
  const signed = `${id}.${timestamp}.${body}`;
  return secrets
    .map((secret) => `v1,${createHmac('sha256', standardKey(secret)).update(signed, 'utf8').digest('base64')}`)
    .join(' ');
}
