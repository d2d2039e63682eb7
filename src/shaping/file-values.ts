import { parseDuration, parseRate, type SiteLimits } from './limits.ts';

// The value checks every table of the shaping file uses: each names the key at fault and what was
// expected, so that a mistake stops the start with a message a person can act on.

export class ShapingFileError extends Error {
  /** Where in the file, e.g. `site.google.connection_limit`; undefined for the file as a whole. */
  readonly keyPath: string | undefined;
  readonly problem: string;
  constructor(keyPath: string | undefined, problem: string, file?: string) {
    super([file, keyPath, problem].filter((part) => part !== undefined).join(': '));
    this.name = 'ShapingFileError';
    this.keyPath = keyPath;
    this.problem = problem;
  }
}

export type Table = Record<string, unknown>;

// TOML tables come with a null prototype, JSON objects with Object's; a TomlDate is neither.
export function isTable(value: unknown): value is Table {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === null || prototype === Object.prototype;
}

export function table(value: unknown, path: string): Table {
  if (!isTable(value)) throw new ShapingFileError(path, `expected a table, got ${describe(value)}`);
  return value;
}

export function list(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value)) throw new ShapingFileError(path, `expected an array of tables, got ${describe(value)}`);
  return value;
}

export function onlyKeys(value: Table, allowed: readonly string[], path: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new ShapingFileError(keyPath(path, key), `unknown key (expected one of ${allowed.join(', ')})`);
    }
  }
}

/** `site.google`, `site."mx:a.example,b.example"`: TOML's own spelling of a key that is not bare. */
export function keyPath(parent: string, key: string): string {
  const part = /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
  return parent === '' ? part : `${parent}.${part}`;
}

export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'an array';
  if (isTable(value)) return 'a table';
  return value === null ? 'null' : `a ${typeof value === 'object' ? 'date' : typeof value}`;
}

export function wholeNumber(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new ShapingFileError(path, `expected a whole number ≥ 1, got ${describe(value)}`);
  }
  return value;
}

export function rate(value: unknown, path: string) {
  const parsed = typeof value === 'string' ? parseRate(value) : undefined;
  if (parsed === undefined) {
    throw new ShapingFileError(path, `expected a rate such as "100/m", "14/s" or "1000/h", got ${describe(value)}`);
  }
  return parsed;
}

export function duration(value: unknown, path: string): number {
  const parsed = typeof value === 'string' ? parseDuration(value) : undefined;
  if (parsed === undefined) {
    throw new ShapingFileError(path, `expected a duration such as "30s", "10m", "2h" or "1d", got ${describe(value)}`);
  }
  return parsed;
}

export function text(value: unknown, path: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new ShapingFileError(path, `expected a non-empty string, got ${describe(value)}`);
  }
  return value;
}

export const LIMIT_KEYS = [
  'connection_limit',
  'max_deliveries_per_connection',
  'max_message_rate',
  'max_connection_rate',
] as const;

/** The limit keys set in a table (only those: an absent key must not override an earlier layer). */
export function limitsTable(value: Table, path: string, otherKeys: readonly string[] = []): Partial<SiteLimits> {
  onlyKeys(value, [...LIMIT_KEYS, ...otherKeys], path);
  const limits: Partial<SiteLimits> = {};
  if (value.connection_limit !== undefined) {
    limits.connectionLimit = wholeNumber(value.connection_limit, `${path}.connection_limit`);
  }
  if (value.max_deliveries_per_connection !== undefined) {
    const key = `${path}.max_deliveries_per_connection`;
    limits.maxDeliveriesPerConnection = wholeNumber(value.max_deliveries_per_connection, key);
  }
  if (value.max_message_rate !== undefined) {
    limits.maxMessageRate = rate(value.max_message_rate, `${path}.max_message_rate`);
  }
  if (value.max_connection_rate !== undefined) {
    limits.maxConnectionRate = rate(value.max_connection_rate, `${path}.max_connection_rate`);
  }
  return limits;
}
