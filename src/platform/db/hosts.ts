// A PostgreSQL connection URL as libpq reads it, several hosts included:
// postgres://user:password@h1:5432,h2:5433/db?target_session_attrs=read-write. node-postgres connects to
// one host only, so Mailroom picks the host itself (host-choice.ts) and hands node-postgres a URL naming
// that one host, with every other part of the URL as it was.

/** Which server a connection may end on, as libpq's target_session_attrs: any, or one that takes writes. */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';

const TARGET_SESSION_ATTRS: readonly TargetSessionAttrs[] = ['any', 'read-write', 'primary'];

export interface DatabaseHost {
  /** A name or an IP address; an IPv6 address without its brackets. */
  host: string;
  port: number;
}

export interface DatabaseTarget {
  hosts: DatabaseHost[];
  targetSessionAttrs: TargetSessionAttrs;
  /** The user and password of the URL, percent-decoding undone; undefined when the URL has none. */
  user: string | undefined;
  password: string | undefined;
  /** The URL naming the host at this index alone, without target_session_attrs (node-postgres's form). */
  urlFor(index: number): string;
}

const DEFAULT_PORT = 5432;

export class DatabaseUrlError extends Error {}

/** `h1:5432` as a log line and an error message write it; an IPv6 address in brackets. */
export function hostLabel({ host, port }: DatabaseHost): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

function parseHost(item: string): DatabaseHost {
  const bracketed = /^\[([0-9a-f:.]+)\](?::(\d*))?$/i.exec(item);
  const plain = /^([^\s:[\]/?#@]+)(?::(\d*))?$/.exec(item);
  const match = bracketed ?? plain;
  if (!match || (bracketed && !match[1]!.includes(':'))) {
    throw new DatabaseUrlError(`"${item}" is not a host with an optional port (an IPv6 address goes in brackets)`);
  }
  const port = match[2] === undefined || match[2] === '' ? DEFAULT_PORT : Number(match[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new DatabaseUrlError(`the port of "${item}" is not between 1 and 65535`);
  }
  return { host: match[1]!, port };
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new DatabaseUrlError(`the ${what} has a bad percent-encoding`);
  }
}

/**
 * Reads a postgres:// or postgresql:// URL with one host or several (comma-separated, each with its own
 * port or 5432). target_session_attrs may be any (the default), read-write or primary; the others libpq
 * knows (read-only, standby, prefer-standby) would send Mailroom's writes to a standby, and are refused.
 */
export function parseDatabaseUrl(url: string): DatabaseTarget {
  const match = /^(postgres(?:ql)?:)\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/i.exec(url);
  if (!match) {
    const scheme = /^([a-z][a-z0-9+.-]*:)/i.exec(url)?.[1];
    throw new DatabaseUrlError(
      scheme ? `expected a postgres: or postgresql: URL, got ${scheme}` : 'not a valid URL (postgres://…)',
    );
  }
  const [, scheme, authority, path, search = ''] = match as unknown as [string, string, string, string, string?];
  const at = authority.lastIndexOf('@');
  const userInfo = at === -1 ? undefined : authority.slice(0, at);
  const hostList = authority.slice(at + 1);
  const items = hostList.split(',');
  if (items.length > 1 && items.some((item) => item === '')) {
    throw new DatabaseUrlError('a host of the list is empty');
  }
  const hosts = items[0] === '' ? [{ host: 'localhost', port: DEFAULT_PORT }] : items.map(parseHost);

  let user: string | undefined;
  let password: string | undefined;
  if (userInfo !== undefined) {
    const colon = userInfo.indexOf(':');
    user = decode(colon === -1 ? userInfo : userInfo.slice(0, colon), 'user name');
    password = colon === -1 ? undefined : decode(userInfo.slice(colon + 1), 'password');
  }

  const params = new URLSearchParams(search);
  const attrs = params.get('target_session_attrs') ?? 'any';
  if (!(TARGET_SESSION_ATTRS as readonly string[]).includes(attrs)) {
    throw new DatabaseUrlError(
      `target_session_attrs=${attrs} is not supported: Mailroom writes, so it takes ${TARGET_SESSION_ATTRS.join(', ')}`,
    );
  }
  params.delete('target_session_attrs');
  const rest = params.size === 0 ? '' : `?${params.toString()}`;

  return {
    hosts,
    targetSessionAttrs: attrs as TargetSessionAttrs,
    user,
    password,
    urlFor(index) {
      const host = hosts[index]!;
      return `${scheme}//${userInfo === undefined ? '' : `${userInfo}@`}${hostLabel(host)}${path}${rest}`;
    },
  };
}
