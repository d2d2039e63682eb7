import { isIP } from 'node:net';

// Names that can never be reached from the Internet: special-use and reserved top-level names
// (RFC 2606, RFC 6761, RFC 6762, RFC 8375) and those private networks commonly use (ICANN's .internal).
const PRIVATE_SUFFIXES = [
  'test',
  'example',
  'invalid',
  'localhost',
  'local',
  'internal',
  'intranet',
  'private',
  'corp',
  'home',
  'lan',
  'localdomain',
  'home.arpa',
];

/**
 * Why a host name that a DNS record points at cannot be reached from the Internet, in words; undefined
 * when it is a public, fully qualified name. Publishing a record with such a value sends mail nowhere.
 */
export function whyNotPublicHost(host: string): string | undefined {
  const name = host.toLowerCase().replace(/\.$/, '');
  if (name === '') return 'it is empty';
  if (isIP(name) !== 0) return 'it is an IP address, and the record needs a host name';
  if (!name.includes('.')) return 'it is a bare host name, with no dot';
  const suffix = PRIVATE_SUFFIXES.find((reserved) => name === reserved || name.endsWith(`.${reserved}`));
  if (suffix !== undefined) return `.${suffix} names are not reachable from the Internet`;
  return undefined;
}
