import { createHmac } from 'node:crypto';

// x-service-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">, keyed with the signing
// secret string as UTF-8: Stripe's scheme, so Stripe's libraries verify it. During a rotation the body is
// signed with each live secret, one v1= per secret.

export function signatureHeader(secrets: string[], timestamp: number, body: string): string {
  const signed = `${timestamp}.${body}`;
  const v1 = secrets.map((secret) => `v1=${createHmac('sha256', secret).update(signed, 'utf8').digest('hex')}`);
  return [`t=${timestamp}`, ...v1].join(',');
}
