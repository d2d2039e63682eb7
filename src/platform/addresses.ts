import { ServiceError } from './errors.ts';
import { hasControlCharacter } from './text.ts';
import { normalizeDomainName } from './domain-name.ts';

// Strict mailbox parsing for every address field. Accepted: `local@domain` and `Display Name <local@domain>`
// (the name optionally in double quotes). The local part is an RFC 5322 dot-atom in ASCII: quoted local
// parts ("a@b"@evil.example), comments, source routes and group syntax are refused, because each is a way
// to make what a person reads differ from where the message is routed. Domains are converted to ASCII
// (IDNA), so `bücher.example` is stored and sent as `xn--bcher-kva.example`.

export interface Mailbox {
  /** Display name, without quotes; undefined when absent. */
  name: string | undefined;
  /** local@domain, domain lower-cased and in ASCII. */
  address: string;
  domain: string;
}

const DOT_ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const NAME_ADDR = /^(?:"([^"\\]*)"|([^"<>\\]*?))\s*<([^<>]*)>$/;

export function parseMailbox(input: string, field: string): Mailbox {
  const invalid = (why: string) => new ServiceError('validation_error', `Invalid address in ${field}: ${why}`, field);
  if (hasControlCharacter(input)) throw invalid('it contains a line break or control character');
  const trimmed = input.trim();
  if (trimmed === '') throw invalid('it is empty');
  let name: string | undefined;
  let spec = trimmed;
  const named = NAME_ADDR.exec(trimmed);
  if (named) {
    name = (named[1] ?? named[2] ?? '').trim() || undefined;
    spec = named[3]!.trim();
  } else if (/[<>"]/.test(trimmed)) {
    throw invalid(`"${trimmed}" is neither "address" nor "Name <address>"`);
  }
  const at = spec.lastIndexOf('@');
  if (at <= 0 || at === spec.length - 1) throw invalid(`"${spec}" is not local@domain`);
  const local = spec.slice(0, at);
  if (local.length > 64 || !DOT_ATOM.test(local)) {
    throw invalid(
      `the part before @ in "${spec}" has characters an address may not (ASCII letters, digits and !#$%&'*+/=?^_\`{|}~- only)`,
    );
  }
  let domain: string;
  try {
    domain = normalizeDomainName(spec.slice(at + 1));
  } catch (error) {
    throw invalid(`"${spec}": ${(error as Error).message}`);
  }
  const address = `${local}@${domain}`;
  if (address.length > 254) throw invalid(`"${spec}" is longer than 254 characters`);
  return { name, address, domain };
}

/** The mailbox as it goes into a header and is shown back: `"Name" <address>` or the address. */
export function formatMailbox(mailbox: Mailbox): string {
  if (mailbox.name === undefined) return mailbox.address;
  // Letters, digits and spaces need no quotes; anything else is quoted (the parser refuses " and \\ inside).
  const name = /^[\p{L}\p{N} ]+$/u.test(mailbox.name) ? mailbox.name : `"${mailbox.name}"`;
  return `${name} <${mailbox.address}>`;
}

/** A field that is a string or an array of strings, as a list. */
export function asList(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}
