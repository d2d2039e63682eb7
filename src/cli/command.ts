// What a CLI command is: its usage and one-line description for the help, its options each with a help
// line, and run(). Commands reach the database only through `withDatabase`, so that the same command runs
// in the CLI's own process or, on the embedded database, inside the running server (admin-socket.ts).
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import { findOrganization } from '../tenancy/organizations.ts';

export type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** What a command prints: `json` under --json, `text` otherwise. */
export interface Output {
  json: object;
  text: string;
}

export interface CommandOption {
  type: 'string' | 'boolean';
  /** What the option is, one line, for `mailroom <command> --help`. */
  help: string;
  required?: boolean;
  default?: string | boolean;
  /** The option may be given more than once (its values are a list). */
  multiple?: boolean;
}

export interface CommandInput {
  config: Config;
  values: Values;
  positionals: string[];
  /** Runs fn on the database: opened (and migrated) for this command alone, or the running server's. */
  withDatabase<T>(fn: (db: Database) => Promise<T>): Promise<T>;
  /** Runs a command line of the table on an open database (what the server's admin socket answers with). */
  execute(argv: string[], db: Database, config: Config): Promise<CommandReply>;
}

export interface Command {
  /** The command line after `mailroom`, with its options. */
  usage: string;
  /** One line: what the command does, shown in the top-level help. */
  description: string;
  options: Record<string, CommandOption>;
  /** The arguments that are not options, in order, each with its help line. */
  /** The arguments that are not options, in order, each with its help line; `path` ones are files, read
   * against the CLI's working directory even when a running server runs the command. */
  positionals?: Array<{ name: string; help: string; path?: boolean }>;
  /** Runs in its own process only, never inside a running server (serve, migrate). */
  local?: boolean;
  run(input: CommandInput): Promise<Output | void>;
}

/** A command's outcome as the admin socket returns it: its output, or the error it ended with. */
export type CommandReply =
  { ok: true; output: Output | null } | { ok: false; code: number; error: { name: string; message: string } };

/** A mistake in the command line: exit 2 with the reason. */
export class UsageError extends Error {}

export async function requireOrganization(db: Database, id: string) {
  const org = await findOrganization(db, id);
  if (!org) throw new UsageError(`organization ${id} not found`);
  return org;
}

export function wholeNumber(values: Values, name: string): number | undefined {
  const value = values[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^\d+$/.test(value)) throw new UsageError(`--${name} takes a whole number`);
  return Number(value);
}

export const text = (values: Values, name: string) => values[name] as string;

/** A readable listing: one line a row, or a line saying there is none. */
export function listing<T>(rows: T[], line: (row: T) => string): string {
  return rows.length === 0 ? '(none)' : rows.map(line).join('\n');
}
