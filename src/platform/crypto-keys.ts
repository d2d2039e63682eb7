import type { KeyObject } from 'node:crypto';

// Node reads a key given as text (a secret, a PEM) again on every use: an HMAC keyed with a Buffer cost
// five times one keyed with a KeyObject, and parsing a PEM four times the RSA signature it was for. Keys
// made from text are therefore made once and kept.

/** Keys kept by one maker at most; when full, all are forgotten (there are few, and they change rarely). */
const KEYS_KEPT = 1000;

/** `make` for each text once; the same KeyObject after that. Whatever `make` throws reaches the caller. */
export function keptKeys(make: (text: string) => KeyObject): (text: string) => KeyObject {
  const keys = new Map<string, KeyObject>();
  return (text) => {
    let key = keys.get(text);
    if (!key) {
      key = make(text);
      if (keys.size >= KEYS_KEPT) keys.clear();
      keys.set(text, key);
    }
    return key;
  };
}
