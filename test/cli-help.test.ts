// The CLI's help and its answer to command-line mistakes: no database is opened for either.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runCli } from './helpers/cli.ts';

// A directory that is never created: asking for help must not open the database.
const env = { MAILROOM_DATA_DIR: '/nonexistent/mailroom-help' };

const cases: Array<{ args: string[]; code: number; stdout?: RegExp[]; stderr?: RegExp[] }> = [
  // The top-level help: every command with what it does.
  {
    args: ['help'],
    code: 0,
    stdout: [
      /^usage: mailroom <command>/,
      /^ {2}key create +create an API key/m,
      /^ {2}org list +list the organizations/m,
    ],
  },
  { args: ['--help'], code: 0, stdout: [/^ {2}serve +run the service/m] },
  { args: ['-h'], code: 0, stdout: [/^ {2}user create +create a dashboard user/m] },
  // Without a command: the help, as a mistake.
  { args: [], code: 2, stdout: [/^usage: mailroom <command>/, /^ {2}key list /m] },
  // One command's help: its usage and a line per option, required or with its default.
  {
    args: ['key', 'create', '--help'],
    code: 0,
    stdout: [
      /^usage: mailroom key create --org ID --name N --permission/,
      /^ {2}--org <value> +the organization's id \(required\)$/m,
      /^ {2}--permission <value> +full_access .* \(required\)$/m,
      /^ {2}--domain <value> +limit a sending_access key/m,
    ],
  },
  { args: ['key', 'create', '-h'], code: 0, stdout: [/^usage: mailroom key create /] },
  { args: ['help', 'key', 'create'], code: 0, stdout: [/^usage: mailroom key create /] },
  {
    args: ['destinations', 'pause', '--help'],
    code: 0,
    stdout: [/^ {2}SITE +a recipient site/m, /^ {2}--for <value> +how long.*\(default 1h\)$/m],
  },
  { args: ['serve', '--help'], code: 0, stdout: [/^ {2}--role <value> .*\(default all\)$/m] },
  // A group (the first word of several commands): its commands with what each does, and where to look next.
  {
    args: ['key', '--help'],
    code: 0,
    stdout: [
      /^usage: mailroom key <command>/,
      /^ {2}key create +create an API key/m,
      /^ {2}key list +list an organization's API keys/m,
      /^mailroom key <command> --help shows a command's options\.$/m,
    ],
  },
  { args: ['key', '-h'], code: 0, stdout: [/^ {2}key create +create an API key/m] },
  { args: ['help', 'key'], code: 0, stdout: [/^ {2}key list +list an organization's API keys/m] },
  { args: ['org', '--help'], code: 0, stdout: [/^ {2}org create +create an organization/m, /^ {2}org list /m] },
  {
    args: ['destinations', '-h'],
    code: 0,
    stdout: [/^ {2}destinations pause +stop delivering/m, /^mailroom destinations <command> --help/m],
  },
  { args: ['help', 'jobs'], code: 0, stdout: [/^ {2}jobs retry +make a failed job due again/m] },
  // A group alone: the same, as a mistake.
  { args: ['key'], code: 2, stdout: [/^usage: mailroom key <command>/, /^ {2}key create /m] },
  { args: ['route'], code: 2, stdout: [/^ {2}route remove +remove an inbound route/m] },
  // Mistakes: one plain line and where to look, exit 2.
  { args: ['frobnicate'], code: 2, stderr: [/^mailroom: unknown command "frobnicate" \(see mailroom --help\)\n$/] },
  { args: ['help', 'frobnicate'], code: 2, stderr: [/unknown command "frobnicate"/] },
  {
    args: ['key', 'frobnicate'],
    code: 2,
    stderr: [/^mailroom: unknown command "key frobnicate" \(see mailroom key --help\)\n$/],
  },
  {
    args: ['key', 'create', '--bogus'],
    code: 2,
    stderr: [/^mailroom: unknown option --bogus \(see mailroom key create --help\)\n$/],
  },
  {
    args: ['org', 'create', '--name'],
    code: 2,
    stderr: [/^mailroom: --name takes a value \(see mailroom org create --help\)\n$/],
  },
  {
    args: ['org', 'create'],
    code: 2,
    stderr: [/^mailroom: --name is required .*\(see mailroom org create --help\)\n$/],
  },
];

for (const { args, code, stdout = [], stderr = [] } of cases) {
  test(`mailroom ${args.join(' ') || '(nothing)'} exits ${code}`, async () => {
    const res = await runCli(args, env);
    assert.equal(res.code, code, res.stdout + res.stderr);
    for (const pattern of stdout) assert.match(res.stdout, pattern);
    for (const pattern of stderr) assert.match(res.stderr, pattern);
    assert.doesNotMatch(res.stdout + res.stderr, /ERR_PARSE_ARGS|\n\s+at /, 'no raw parser error or stack');
  });
}

test('--json gives a mistake as a JSON error', async () => {
  const res = await runCli(['key', 'create', '--bogus', '--json'], env);
  assert.equal(res.code, 2);
  assert.deepEqual(res.json, {
    error: { name: 'usage', message: 'unknown option --bogus (see mailroom key create --help)' },
  });
});
