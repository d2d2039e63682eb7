// The one rule that says whether a network error is a TLS failure, shared by SMTP delivery and webhooks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isTlsErrorCode } from '../src/platform/network-errors.ts';

test('isTlsErrorCode: handshake and certificate codes, nothing else', () => {
  for (const code of [
    'ERR_SSL_WRONG_VERSION_NUMBER',
    'ERR_TLS_CERT_ALTNAME_INVALID',
    'CERT_HAS_EXPIRED',
    'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    'DEPTH_ZERO_SELF_SIGNED_CERT',
    'SELF_SIGNED_CERT_IN_CHAIN',
    'EPROTO',
  ]) {
    assert.equal(isTlsErrorCode(code), true, code);
  }
  for (const code of ['ECONNREFUSED', 'ETIMEDOUT', 'EPROTONOSUPPORT', 'ESOCKET', '', undefined]) {
    assert.equal(isTlsErrorCode(code), false, String(code));
  }
});
