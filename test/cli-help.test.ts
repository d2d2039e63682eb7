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
  // Mistakes: one plain line and where to look, exit 2.
  { args: ['frobnicate'], code: 2, stderr: [/^mailroom: unknown command "frobnicate" \(see mailroom --help\)\n$/] },
  { args: ['help', 'frobnicate'], code: 2, stderr: [/unknown command "frobnicate"/] },
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
