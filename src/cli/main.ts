// The operator CLI (`npx mailroom …`): the command line read, the command found in the table and run,
// its output printed and its failure turned into an exit code. Each command prints one JSON object with
// --json, a readable line without it; failures exit 1 with the reason (as {"error": {...}} under --json),
// mistakes in the command line exit 2.
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../platform/config.ts';
import { isConnectionLost, type Database } from '../platform/db/database.ts';
import { BackupError } from '../platform/db/embedded-backup.ts';
import { migrate, MigrationError, SchemaTooNewError } from '../platform/db/migrate.ts';
import { openDatabase } from '../platform/db/open.ts';
import { ServiceError } from '../platform/errors.ts';
import { StartupError } from '../platform/listen-error.ts';
import { ShapingFileError } from '../shaping/shaping-file.ts';
import { askServer } from './admin-socket.ts';
import { UsageError, type Command, type CommandReply, type Values } from './command.ts';
import { serverCommands } from './commands/server.ts';
import { organizationCommands } from './commands/org.ts';
import { domainCommands } from './commands/domain.ts';
import { keyCommands } from './commands/key.ts';
import { userCommands } from './commands/user.ts';
import { sessionCommands } from './commands/session.ts';
import { routeCommands } from './commands/route.ts';
import { shapingCommands } from './commands/shaping.ts';
import { jobCommands } from './commands/jobs.ts';
import { backupCommands } from './commands/backup.ts';

// Every command, group by group, in the order the help lists them.
const COMMANDS: Record<string, Command> = {
  ...serverCommands,
  ...organizationCommands,
  ...domainCommands,
  ...keyCommands,
  ...userCommands,
  ...sessionCommands,
  ...routeCommands,
  ...shapingCommands,
  ...jobCommands,
  ...backupCommands,
};

/** The error a command run by the server ended with, as the server worded it. */
class ReplyError extends Error {
  readonly code: number;
  readonly reason: { name: string; message: string };
  constructor(code: number, reason: { name: string; message: string }) {
    super(reason.message);
    this.code = code;
    this.reason = reason;
  }
}

/** Opens the configured database, migrated, for the length of one command. */
async function withOwnDatabase<T>(config: Config, fn: (db: Database) => Promise<T>): Promise<T> {
  const db = await openDatabase(config);
  try {
    await migrate(db);
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** The command a command line names (one word or two) and the arguments after its name. */
function findCommand(args: string[]): { name: string; command: Command; rest: string[] } | undefined {
  const name = COMMANDS[`${args[0]} ${args[1]}`] ? `${args[0]} ${args[1]}` : args[0];
  const command = name === undefined ? undefined : COMMANDS[name];
  return command && name ? { name, command, rest: args.slice(name.split(' ').length) } : undefined;
}

/** Reads a command's arguments: its options' values and its positionals, checked against its table entry. */
function readArguments(command: Command, rest: string[]): { values: Values; positionals: string[] } {
  const options: NonNullable<ParseArgsConfig['options']> = {};
  for (const [name, option] of Object.entries(command.options)) {
    // Only the keys that are set: parseArgs refuses one present but undefined.
    const descriptor: NonNullable<ParseArgsConfig['options']>[string] = { type: option.type };
    if (option.default !== undefined) descriptor.default = option.default;
    if (option.multiple) descriptor.multiple = true;
    options[name] = descriptor;
  }
  const { values, positionals } = parseArgs({ args: rest, options, allowPositionals: true });
  if (positionals.length !== (command.positionals?.length ?? 0)) {
    throw new UsageError(`usage: mailroom ${command.usage}`);
  }
  for (const [option, spec] of Object.entries(command.options)) {
    if (spec.required && (typeof values[option] !== 'string' || values[option] === '')) {
      throw new UsageError(`--${option} is required (usage: mailroom ${command.usage})`);
    }
  }
  return { values, positionals };
}

/** An error a command ended with, as the exit code and the `{ name, message }` printed. */
function failure(error: unknown): { code: number; error: { name: string; message: string } } {
  const message = (error as Error).message;
  if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    return { code: 2, error: { name: 'usage', message: usageMessage(error as Error) } };
  }
  if (error instanceof ServiceError) return { code: 1, error: { name: error.name, message } };
  if (error instanceof ConfigError) return { code: 1, error: { name: 'configuration', message } };
  if ((error as Error).name === 'DataDirInUseError') return { code: 1, error: { name: 'data_dir_in_use', message } };
  if (error instanceof BackupError) return { code: 1, error: { name: 'backup', message } };
  if (error instanceof SchemaTooNewError) return { code: 1, error: { name: 'schema_too_new', message } };
  if (error instanceof MigrationError) return { code: 1, error: { name: 'migration_failed', message } };
  if (error instanceof StartupError || error instanceof ShapingFileError) {
    return { code: 1, error: { name: 'startup', message } };
  }
  if (isConnectionLost(error)) {
    return {
      code: 1,
      error: { name: 'database_unreachable', message: `cannot reach the database (DATABASE_URL): ${message}` },
    };
  }
  return { code: 1, error: { name: 'error', message: (error as Error).stack ?? String(error) } };
}

/** Runs a command line on an already open database: what a running server answers its admin socket with. */
export async function execute(argv: string[], db: Database, config: Config): Promise<CommandReply> {
  const found = findCommand(argv.filter((arg) => arg !== '--json'));
  if (!found || found.command.local) {
    return { ok: false, code: 2, error: { name: 'usage', message: `"${argv.join(' ')}" is not run by the server` } };
  }
  try {
    const { values, positionals } = readArguments(found.command, found.rest);
    const withDatabase = <T>(fn: (db: Database) => Promise<T>) => fn(db);
    const output = await found.command.run({ config, values, positionals, withDatabase, execute });
    return { ok: true, output: output ?? null };
  } catch (error) {
    return { ok: false, ...failure(error) };
  }
}

const HELP_FLAGS = new Set(['--help', '-h']);

/** The commands given, a line each with what it does. */
function commandLines(entries: Array<[string, Command]>): string[] {
  const width = Math.max(...entries.map(([name]) => name.length));
  return entries.map(([name, command]) => `  ${name.padEnd(width)}  ${command.description}`);
}

/** The top-level help: every command on a line with what it does. */
function help(): string {
  return [
    'usage: mailroom <command> [options] [--json]',
    '',
    'commands:',
    ...commandLines(Object.entries(COMMANDS)),
    '',
    'mailroom <command> --help shows its options. --json prints the result (or the error) as one JSON object.',
  ].join('\n');
}

/** The commands whose name starts with `group` and another word (`key` for key create, key list), if any. */
function groupCommands(group: string | undefined): Array<[string, Command]> {
  return Object.entries(COMMANDS).filter(([name]) => name.startsWith(`${group} `));
}

/** A group's help: its commands, a line each with what it does. */
function groupHelp(group: string, entries: Array<[string, Command]>): string {
  return [
    `usage: mailroom ${group} <command> [options] [--json]`,
    '',
    'commands:',
    ...commandLines(entries),
    '',
    `mailroom ${group} <command> --help shows a command's options.`,
  ].join('\n');
}

/** One command's help: its usage, then a line per argument and option (what it is, required or its default). */
function commandHelp(name: string, command: Command): string {
  const entries: Array<[string, string]> = [
    ...(command.positionals ?? []).map((positional): [string, string] => [positional.name, positional.help]),
    ...Object.entries(command.options).map(([option, spec]): [string, string] => {
      const flag = spec.type === 'string' ? `--${option} <value>` : `--${option}`;
      const note = spec.required
        ? ' (required)'
        : spec.default !== undefined && spec.type === 'string'
          ? ` (default ${String(spec.default)})`
          : '';
      return [flag, `${spec.help}${note}`];
    }),
    ['--json', 'print the result as one JSON object'],
  ];
  const width = Math.max(...entries.map(([flag]) => flag.length));
  return [
    `usage: mailroom ${command.usage}`,
    '',
    `${command.description[0]!.toUpperCase()}${command.description.slice(1)}.`,
    '',
    ...entries.map(([flag, line]) => `  ${flag.padEnd(width)}  ${line}`),
  ].join('\n');
}

/** A command-line mistake in one plain line (parseArgs' own messages are long and name its internals). */
function usageMessage(error: Error & { code?: string }): string {
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const option = /'([^']+)'/.exec(error.message)?.[1] ?? 'option';
    return `unknown option ${option}`;
  }
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const option = /'(--?[\w-]+)/.exec(error.message)?.[1];
    return option ? `${option} takes a value` : error.message;
  }
  return error.message;
}

export async function main(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const args = argv.filter((arg) => arg !== '--json');
  const fail = (error: { name: string; message: string }, code = 1) => {
    if (json) process.stdout.write(`${JSON.stringify({ error })}\n`);
    else process.stderr.write(`mailroom: ${error.message}\n`);
    return code;
  };
  const print = (text: string, code: number) => {
    process.stdout.write(`${text}\n`);
    return code;
  };
  // Without a command the help is printed, as a mistake (exit 2): a script that forgot its command fails.
  if (args.length === 0) return print(help(), 2);
  if (args.length === 1 && (args[0] === 'help' || HELP_FLAGS.has(args[0]!))) return print(help(), 0);
  const asked = args[0] === 'help' ? args.slice(1) : args;
  const found = findCommand(asked);
  if (!found) {
    const group = groupCommands(asked[0]);
    // A group named without one of its commands (`mailroom key`): its commands, as a mistake unless asked for.
    if (group.length > 0 && (asked.length === 1 || asked[1]!.startsWith('-'))) {
      const wanted = args[0] === 'help' || asked.some((arg) => HELP_FLAGS.has(arg));
      return print(groupHelp(asked[0]!, group), wanted ? 0 : 2);
    }
    const words = asked
      .filter((arg) => !arg.startsWith('-'))
      .slice(0, 2)
      .join(' ');
    const where = group.length > 0 ? `mailroom ${asked[0]} --help` : 'mailroom --help';
    return fail({ name: 'usage', message: `unknown command "${words}" (see ${where})` }, 2);
  }
  const hint = ` (see mailroom ${found.name} --help)`;
  if (args[0] === 'help' || found.rest.some((arg) => HELP_FLAGS.has(arg))) {
    return print(commandHelp(found.name, found.command), 0);
  }
  try {
    const { values, positionals } = readArguments(found.command, found.rest);
    const config = loadConfig();
    const withDatabase = <T>(fn: (db: Database) => Promise<T>) => withOwnDatabase(config, fn);
    const output = await found.command
      .run({ config, values, positionals, withDatabase, execute })
      .catch(async (error: Error) => {
        // The embedded database is held by a running server: the command is run there instead.
        if (error.name !== 'DataDirInUseError' || found.command.local) throw error;
        const pathArgs = new Set(positionals.filter((_, i) => found.command.positionals?.[i]?.path));
        const forwarded = args.map((arg) => (pathArgs.has(arg) ? path.resolve(arg) : arg));
        const reply = await askServer(config.dataDir, forwarded);
        if (!reply) throw error;
        if (!reply.ok) throw new ReplyError(reply.code, reply.error);
        return reply.output ?? undefined;
      });
    if (output) process.stdout.write(`${json ? JSON.stringify(output.json) : output.text}\n`);
    return 0;
  } catch (error) {
    const { code, error: reason } =
      error instanceof ReplyError ? { code: error.code, error: error.reason } : failure(error);
    return fail(reason.name === 'usage' ? { ...reason, message: `${reason.message}${hint}` } : reason, code);
  }
}
