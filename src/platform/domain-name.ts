import { domainToASCII } from 'node:url';
import { ServiceError } from './errors.ts';

// Letters, digits and inner hyphens, 1 to 63 octets (RFC 1123). Underscores are allowed in DNS but not
// in host names, and a sending domain is a host name.
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
// Characters a URL parser treats as delimiters: domainToASCII('a/b.com') would quietly return 'a'.
const URL_DELIMITERS = /[\s/\\?#@:%[\]]/;
const MAX_LENGTH = 253;
// Plain ASCII ending in a label of letters (no IPv4 look-alike), without punycode labels: its canonical
// form is its lower case, what domainToASCII gives, so the common case skips the URL parser.
const PLAIN_ASCII = /^[A-Za-z0-9.-]*\.[A-Za-z]+$/;
const PUNYCODE_LABEL = /(^|\.)xn--/i;

/**
 * A domain name in ASCII and lower case, as WHATWG's domainToASCII gives it ('' when it cannot be), without
 * the URL parser for the common case.
 */
export function toAsciiDomain(name: string): string {
  return PLAIN_ASCII.test(name) && !PUNYCODE_LABEL.test(name) ? name.toLowerCase() : domainToASCII(name);
}

/** One label of a host name (a DKIM selector is one too). */
export function isHostLabel(label: string): boolean {
  return LABEL.test(label);
}

/**
 * The canonical form of a domain name as stored and compared: lower case, internationalised labels as
 * punycode (bücher.example → xn--bcher-kva.example), no trailing dot. Throws validation_error otherwise.
 */
export function normalizeDomainName(input: string): string {
  const invalid = (why: string) => new ServiceError('validation_error', `Invalid domain name: ${why}`, 'name');
  const trimmed = input.trim().replace(/\.$/, '');
  if (trimmed === '') throw invalid('it is empty');
  if (URL_DELIMITERS.test(trimmed)) throw invalid(`"${input}" contains characters not allowed in a domain name`);
  const ascii = toAsciiDomain(trimmed);
  if (ascii === '') throw invalid(`"${input}" is not a valid internationalised domain name`);
  if (ascii.length > MAX_LENGTH) throw invalid(`it is longer than ${MAX_LENGTH} characters`);
  const labels = ascii.split('.');
  if (labels.length < 2) throw invalid(`"${input}" has no dot: use the full name, e.g. example.com`);
  const bad = labels.find((label) => !isHostLabel(label));
  if (bad !== undefined) {
    throw invalid(`"${bad}" is not a valid label (letters, digits and inner hyphens, at most 63)`);
  }
  // An all-numeric last label is an IP address (or nothing that can receive mail), not a domain.
  if (/^\d+$/.test(labels.at(-1)!)) throw invalid(`"${input}" is an address, not a domain name`);
  return ascii;
}
