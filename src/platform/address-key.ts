import { toAsciiDomain } from './domain-name.ts';

// When two spellings are one email address: the local part compared without case (as every mail system
// in use treats it), the domain in ASCII (IDNA) and lower case, so `Ann@Bücher.example` and
// `ann@xn--bcher-kva.example` are the same address. Every comparison of addresses goes through
// addressKey; in SQL, lower(column) is the same key for a column that holds addresses as parsed (ASCII
// throughout), so those compare lower(column) with an addressKey computed here.

/** The comparison key of an address. A string without @ is no address: its key is itself, lower-cased. */
export function addressKey(address: string): string {
  const at = address.lastIndexOf('@');
  if (at < 0) return address.toLowerCase();
  const domain = address.slice(at + 1);
  return `${address.slice(0, at).toLowerCase()}@${toAsciiDomain(domain) || domain.toLowerCase()}`;
}
