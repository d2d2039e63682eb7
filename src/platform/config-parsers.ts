// How a setting of the environment is declared and read: the error naming the variable at fault, and
// the parsers the settings' table (config.ts) uses. Each parser receives the variable's text (or undefined
// for "unset") and the variable's name for its errors.

import { isHostLabel, normalizeDomainName } from './domain-name.ts';
import { parseDatabaseUrl } from './db/hosts.ts';

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

/** Turns the variable's text (or its default; undefined when unset without one) into a value. */
export type Parse<T> = (value: string | undefined, variable: string) => T;

export interface Setting<T> {
  variable: string;
  /** The default as written in the docs; undefined when "unset" is the default. */
  default: string | undefined;
  doc: string;
  parse: Parse<T>;
}

export const setting = <T>(
  variable: string,
  defaultText: string | undefined,
  doc: string,
  parse: Parse<T>,
): Setting<T> => ({
  variable,
  default: defaultText,
  doc,
  parse,
});

// Parsers.

export function text(value: string | undefined, variable: string): string {
  if (value === undefined) throw new ConfigError(variable, 'is required');
  return value;
}

export function integer(min: number, max: number): Parse<number> {
  return (value, variable) => {
    if (value === undefined || !/^\d+$/.test(value)) {
      throw new ConfigError(variable, `expected a whole number, got "${value ?? ''}"`);
    }
    const n = Number(value);
    if (n < min || n > max) throw new ConfigError(variable, `expected a number from ${min} to ${max}, got ${n}`);
    return n;
  };
}

export function optionalInteger(min: number, max: number): Parse<number | undefined> {
  const parse = integer(min, max);
  return (value, variable) => (value === undefined ? undefined : parse(value, variable));
}

/** A port number, `off`, or unset (undefined: the listener's own default decides). */
export function optionalPort(value: string | undefined, variable: string): number | 'off' | undefined {
  if (value === undefined) return undefined;
  if (value.toLowerCase() === 'off') return 'off';
  return integer(0, 65535)(value, variable);
}

export function oneOf<T extends string>(allowed: readonly T[]): Parse<T> {
  return (value, variable) => {
    if (!(allowed as readonly (string | undefined)[]).includes(value)) {
      throw new ConfigError(variable, `expected one of ${allowed.join(', ')}, got "${value ?? ''}"`);
    }
    return value as T;
  };
}

export function optionalText(value: string | undefined): string | undefined {
  return value;
}

/** A decimal number such as 7 or 7.5 (negative allowed: rspamd scores are), or unset. */
export function optionalDecimal(value: string | undefined, variable: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^-?\d+(\.\d+)?$/.test(value)) throw new ConfigError(variable, `expected a number such as 7.5, got "${value}"`);
  return Number(value);
}

/** A fraction from 0 to 1 such as 0.05. */
export function fraction(value: string | undefined, variable: string): number {
  if (value === undefined || !/^(0(\.\d+)?|1(\.0+)?|\.\d+)$/.test(value)) {
    throw new ConfigError(variable, `expected a fraction from 0 to 1 such as 0.05, got "${value ?? ''}"`);
  }
  return Number(value);
}

export function optionalOneOf<T extends string>(allowed: readonly T[]): Parse<T | undefined> {
  const parse = oneOf(allowed);
  return (value, variable) => (value === undefined ? undefined : parse(value, variable));
}

export function secondsList(value: string | undefined, variable: string): number[] {
  const items = (value ?? '').split(',').map((item) => item.trim());
  if (items.some((item) => !/^\d+$/.test(item)) || items.length === 0 || items.length > 50) {
    throw new ConfigError(variable, `expected comma-separated whole seconds, e.g. 60,300,900; got "${value ?? ''}"`);
  }
  return items.map(Number);
}

export function cidrList(value: string | undefined, variable: string): string[] {
  if (value === undefined) return [];
  const cidrs = value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  for (const cidr of cidrs) {
    const [address, bits, extra] = cidr.split('/');
    const ipv4 = /^\d{1,3}(\.\d{1,3}){3}$/.test(address ?? '') && Number(bits) <= 32;
    const ipv6 = /^[0-9a-f:.]+$/i.test(address ?? '') && (address ?? '').includes(':') && Number(bits) <= 128;
    if (extra !== undefined || bits === undefined || !/^\d+$/.test(bits) || !(ipv4 || ipv6)) {
      throw new ConfigError(variable, `"${cidr}" is not a CIDR such as 127.0.0.0/8 or ::1/128`);
    }
  }
  return cidrs;
}

export function optionalUrl(protocols: string[]): Parse<string | undefined> {
  return (value, variable) => {
    if (value === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new ConfigError(variable, 'not a valid URL');
    }
    if (!protocols.includes(url.protocol)) {
      throw new ConfigError(variable, `expected a ${protocols.join(' or ')} URL, got ${url.protocol}`);
    }
    return value;
  };
}

// A libpq URL, one host or several: node-postgres's own parser does not take a list of hosts.
export function databaseUrl(value: string | undefined, variable: string): string | undefined {
  if (value === undefined) return undefined;
  try {
    parseDatabaseUrl(value);
  } catch (error) {
    throw new ConfigError(variable, (error as Error).message);
  }
  return value;
}

// One definition of a domain name and of a label: the one domains are checked against.
export function domainName(value: string | undefined, variable: string): string {
  try {
    return normalizeDomainName(text(value, variable));
  } catch (error) {
    throw new ConfigError(variable, (error as Error).message);
  }
}

export function optionalDomainName(value: string | undefined, variable: string): string | undefined {
  return value === undefined ? undefined : domainName(value, variable);
}

export function domainList(value: string | undefined, variable: string): string[] {
  if (value === undefined || value.trim() === '') return [];
  return value.split(',').map((item) => domainName(item.trim(), variable));
}

export function dnsLabel(value: string | undefined, variable: string): string {
  const label = text(value, variable).toLowerCase();
  if (!isHostLabel(label)) throw new ConfigError(variable, `"${label}" is not a DNS label`);
  return label;
}

export function dnsServerList(value: string | undefined, variable: string): string[] {
  if (value === undefined) return [];
  const servers = value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  for (const server of servers) {
    // The forms dns.Resolver#setServers takes: 1.2.3.4, 1.2.3.4:53, ::1, [::1]:53.
    const ok =
      /^\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?$/.test(server) ||
      /^\[[0-9a-f:.]+\](:\d{1,5})?$/i.test(server) ||
      /^[0-9a-f:]+$/i.test(server);
    if (!ok) throw new ConfigError(variable, `"${server}" is not an IP address with an optional port`);
  }
  return servers;
}
