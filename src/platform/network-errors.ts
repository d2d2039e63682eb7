// Telling network failures apart by the code Node (or OpenSSL through Node) puts on the error.

// OpenSSL's and Node's codes for a failed TLS handshake or a refused certificate: ERR_SSL_* and
// ERR_TLS_* (handshake, protocol version, host name), the certificate checks (CERT_HAS_EXPIRED,
// UNABLE_TO_VERIFY_LEAF_SIGNATURE, DEPTH_ZERO_SELF_SIGNED_CERT, SELF_SIGNED_CERT_IN_CHAIN, …), and
// EPROTO, which a handshake that breaks off gives.
const TLS_ERROR_CODE = /^(ERR_SSL_|ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$)/;

/** Whether an error code says the TLS handshake failed or the peer's certificate was refused. */
export function isTlsErrorCode(code: string | undefined): boolean {
  return TLS_ERROR_CODE.test(code ?? '');
}
