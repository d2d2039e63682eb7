// Every fenced sh block of README.md and docs/*.md is run here, as written, against a real server, so a
// command the docs print cannot silently stop working. A block is either run or listed in EXCLUDED with
// the reason; a new block is picked up on its own, and an exclusion that matches no block fails.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPostgresDatabase, onPostgres } from './helpers/database.ts';
import { runCli } from './helpers/cli.ts';
import { startDnsServer, type DnsServer } from './helpers/dns-server.ts';
import { freePort, startServerProcess, type ServerProcess } from './helpers/server-process.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface Block {
  /** Relative to the repository, e.g. docs/smtp.md. */
  file: string;
  /** The line of the opening fence. */
  line: number;
  code: string;
}

/** The blocks a reader cannot run as written here, each with why; `contains` must match exactly one block. */
const EXCLUDED: { file: string; contains: string; reason: string }[] = [
  {
    file: 'README.md',
    contains: 'npm ci && npm start',
    reason: 'npm ci is what CI runs before the tests, and the server it starts runs until stopped',
  },
  { file: 'README.md', contains: 'npm ci && npm test', reason: 'the test suite itself: what .ci/run runs' },
  {
    file: 'README.md',
    contains: 'postgres@127.0.0.1:5432/postgres npm test',
    reason: 'the test suite itself on PostgreSQL: what .ci/run runs',
  },
  {
    file: 'docs/dashboard.md',
    contains: 'apt-get install -y chromium',
    reason: 'apt-get needs root and the network; the test files it runs are part of the suite',
  },
  {
    file: 'docs/webhooks.md',
    contains: 'MAILROOM_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 npm start',
    reason: 'the server runs until stopped; the one these blocks run against is started with the same setting',
  },
  {
    file: 'docs/operations.md',
    contains: 'npx mailroom serve --role api',
    reason: 'each serve runs until stopped (the server process tests start serve --role api and worker)',
  },
];

// Commands that would change this checkout or the machine, or never end: a block with one of them is never
// run (an edited exclusion must not let `npm ci` empty node_modules under the running suite); it fails
// until it is excluded with the reason.
const NEVER_RUN = [
  /\bnpm (?:ci|install|i|test|start)\b/,
  /\bnpm run build/,
  /\bapt(?:-get)?\b/,
  /\bnode --test\b/,
  /\bmailroom serve\b/,
];

const FENCE_OPEN = /^(\s*)```(sh|bash|shell)\s*$/;

/** The sh blocks of README.md and docs/*.md, indented ones (in lists) included, in file order. */
async function shellBlocks(): Promise<Block[]> {
  const docs = (await readdir(path.join(ROOT, 'docs')))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  const blocks: Block[] = [];
  for (const file of ['README.md', ...docs]) {
    const lines = (await readFile(path.join(ROOT, file), 'utf8')).split('\n');
    for (let i = 0; i < lines.length; i++) {
      const open = FENCE_OPEN.exec(lines[i]!);
      if (!open) continue;
      const indent = open[1]!.length;
      const body: string[] = [];
      let j = i + 1;
      while (j < lines.length && !/^\s*```\s*$/.test(lines[j]!)) body.push(lines[j++]!.slice(indent));
      assert.ok(j < lines.length, `${file}:${i + 1}: the sh block is never closed`);
      blocks.push({ file, line: i + 1, code: body.join('\n') });
      i = j;
    }
  }
  return blocks;
}

const exclusionOf = (block: Block) =>
  EXCLUDED.find((entry) => entry.file === block.file && block.code.includes(entry.contains));

function assertSafe(block: Block) {
  const unsafe = NEVER_RUN.find((pattern) => pattern.test(block.code));
  assert.equal(unsafe, undefined, `${block.file}:${block.line} matches ${unsafe}: exclude it, with the reason`);
}

// The placeholders the docs use, and what each stands for here. Environment variables the docs expect
// the reader to have set (MAILROOM_KEY, TOPIC_ID, DOMAIN_ID, LAST_ID) are set in the block's environment;
// the rest are replaced in the text before it runs.
interface Values {
  httpPort: number;
  submissionPort: number;
  /** A free port for the webhook receiver docs/webhooks.md runs on port 4000. */
  receiverPort: number;
  /** A full_access key of the development organization (the one that has example.test verified). */
  fullAccessKey: string;
  /** An email sent by that organization. */
  emailId: string;
  /** A template declaring the variables docs/templates.md sends with. */
  templateId: string;
  /**
   * A second organization, made with the CLI as docs/dashboard.md and docs/domains.md make theirs; only
   * once the server has stopped, so only CLI-only blocks can name it.
   */
  orgId: string | undefined;
  /** The database the server uses (PostgreSQL pass only). */
  databaseUrl: string | undefined;
}

const SUBSTITUTIONS: [RegExp, (values: Values) => string][] = [
  // The server listens on a free port, not the default 3000; its SMTP submission port is free too.
  [/\b(?:localhost|127\.0\.0\.1):3000\b/g, (v) => `127.0.0.1:${v.httpPort}`],
  [/\b127\.0\.0\.1:2587\b/g, (v) => `127.0.0.1:${v.submissionPort}`],
  // The webhook receiver's port, where it listens and where its endpoint points.
  [/(?<=\.listen\(|\b127\.0\.0\.1:)4000\b/g, (v) => String(v.receiverPort)],
  // The full_access key the first start prints.
  [/\bmr_3kq…/g, (v) => v.fullAccessKey],
  // "the id it printed": an email's, a template's, an organization's.
  [/\/emails\/<id>/g, (v) => `/emails/${v.emailId}`],
  [/\bTEMPLATE_ID\b/g, (v) => v.templateId],
  [/--org <id>/g, (v) => `--org ${orgIdOf(v)}`],
  [/\bORG_ID\b/g, (v) => orgIdOf(v)],
  // A PostgreSQL connection string: the fresh database of this run.
  [/postgres:\/\/[^\s'"]*/g, (v) => v.databaseUrl ?? 'postgres://no-database-on-this-pass'],
];

function orgIdOf(values: Values): string {
  assert.ok(values.orgId, 'a block that talks to the server names ORG_ID, which only CLI-only blocks have');
  return values.orgId;
}

function substitute(code: string, values: Values): string {
  return SUBSTITUTIONS.reduce((text, [pattern, value]) => text.replace(pattern, () => value(values)), code);
}

// What a reader would notice: a command that fails, and curl's HTTP errors, which curl alone does not
// report in its exit status.
const PRELUDE = `set -euo pipefail
curl() { command curl --fail-with-body --silent --show-error "$@"; }
`;

interface BlockRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a block with bash in the repository (where `npx mailroom` finds this project's CLI). */
function runBlock(code: string, env: Record<string, string>): Promise<BlockRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', PRELUDE + code], {
      cwd: ROOT,
      detached: true, // its own process group, so that a hung block is ended with every command it started
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    // A block that hangs (a command waiting for input or a server) fails rather than stalling the suite.
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (exitCode) => {
      clearTimeout(timer);
      resolve({ code: exitCode, stdout, stderr });
    });
  });
}

// Checks beyond "every command succeeded", for blocks whose point is an answer.
const EXPECTED_OUTPUT: { contains: string; stdout: RegExp; why: string }[] = [
  { contains: 'swaks ', stdout: /^<~ +250 2\.0\.0 OK <[0-9a-f-]{36}>/m, why: 'the message was accepted (TLS on)' },
  {
    contains: 'wait $RECEIVER',
    stdout: /^(?=.*"type":"email\.delivered")(?=.*"to":\["you@example\.com"\]).*"id":"evt_[0-9a-f-]{36}"/m,
    why: 'the local receiver printed the email.delivered event of the message sent',
  },
];

test('every sh block of the docs is run here or excluded with a reason', async () => {
  const blocks = await shellBlocks();
  assert.ok(blocks.length > 10, `only ${blocks.length} sh blocks found: is the fence parser broken?`);
  for (const entry of EXCLUDED) {
    const matching = blocks.filter((block) => block.file === entry.file && block.code.includes(entry.contains));
    assert.equal(matching.length, 1, `exclusion "${entry.contains}" in ${entry.file} must match exactly one block`);
  }
  for (const block of blocks) if (!exclusionOf(block)) assertSafe(block);
  for (const { contains } of EXPECTED_OUTPUT) {
    assert.ok(
      blocks.some((block) => block.code.includes(contains) && !exclusionOf(block)),
      `no block runs ${contains}`,
    );
  }
});

let dns: DnsServer;
let dataDir: string;
let dropDatabase: (() => Promise<void>) | undefined;

before(async () => {
  // The docs' webhook endpoint resolves to this machine, which the server is told to allow; every other
  // name (example.com, acme.com) does not exist, so verifying a domain asks nothing outside.
  dns = await startDnsServer(new Map([['hooks.example.com', { a: ['127.0.0.1'] }]]));
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-docs-'));
});
after(async () => {
  await dns.close();
  await rm(dataDir, { recursive: true, force: true });
  await dropDatabase?.();
});

async function api(server: ServerProcess, key: string, method: string, route: string, body?: unknown) {
  const res = await fetch(server.base + route, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  assert.ok(res.ok, `${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

test("the docs' sh blocks run as written", async (t: TestContext) => {
  const blocks = (await shellBlocks()).filter((block) => !exclusionOf(block));

  let databaseUrl: string | undefined;
  if (onPostgres) {
    const created = await createPostgresDatabase();
    databaseUrl = created.url;
    dropDatabase = created.drop;
  }
  const storage: Record<string, string> = { MAILROOM_DATA_DIR: dataDir };
  if (databaseUrl) storage.DATABASE_URL = databaseUrl;
  const common = { ...storage, MAILROOM_DNS_SERVERS: dns.address };
  const cli = async (...args: string[]) => {
    const res = await runCli([...args, '--json'], common);
    assert.equal(res.code, 0, `mailroom ${args.join(' ')}: ${res.stdout}${res.stderr}`);
    return res.json!;
  };

  // On PostgreSQL there is no development organization: the CLI makes one like it (docs/operations.md),
  // with its dashboard user.
  let fullAccessKey: string | undefined;
  if (onPostgres) {
    const org = await cli('org', 'create', '--name', 'Development');
    await cli('domain', 'add', '--org', org.id as string, 'example.test');
    await cli('domain', 'verify', '--org', org.id as string, 'example.test', '--trust');
    const key = await cli('key', 'create', '--org', org.id as string, '--name', 'docs', '--permission', 'full_access');
    await cli('user', 'create', '--org', org.id as string, '--email', 'admin@example.test');
    fullAccessKey = key.token as string;
  }

  const submissionPort = await freePort();
  const server = await startServerProcess({
    ...common,
    MAILROOM_SUBMISSION_PORT: String(submissionPort),
    MAILROOM_TRANSPORT: 'capture', // nothing leaves the machine, on PostgreSQL too
    MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
  });
  let serverStopped = false;
  t.after(async () => {
    if (!serverStopped) server.child.kill('SIGKILL');
  });
  if (!onPostgres) {
    // The embedded default's first start prints the key the README tells the reader to export.
    fullAccessKey = /full_access key\s+(mr_\S+)/.exec(server.output())?.[1];
    assert.ok(fullAccessKey, `the first start printed no full_access key:\n${server.output()}`);
  }
  const key = fullAccessKey!;

  // What the docs assume the reader already has.
  const domains = (await api(server, key, 'GET', '/domains')).data as { id: string; name: string }[];
  const devDomain = domains.find((domain) => domain.name === 'example.test');
  assert.ok(devDomain, JSON.stringify(domains));
  const topic = await api(server, key, 'POST', '/topics', { name: 'Docs', default_subscription: 'opt_in' });
  const contact = await api(server, key, 'POST', '/contacts', { email: 'first@example.org' });
  const template = await api(server, key, 'POST', '/templates', {
    name: 'Order shipped',
    subject: 'Your order {{order_id}} has shipped',
    text: 'Hello {{name}}, {{items}} item(s) are on their way.',
    variables: [
      { key: 'name', type: 'string', fallback_value: 'there' },
      { key: 'order_id', type: 'string' },
      { key: 'items', type: 'number' },
    ],
  });
  await api(server, key, 'POST', `/templates/${template.id}/publish`); // sends use published templates
  const email = await api(server, key, 'POST', '/emails', {
    from: 'dev@example.test',
    to: 'you@example.com',
    subject: 'Hello',
    text: 'It works',
  });

  const values: Values = {
    httpPort: Number(new URL(server.base).port),
    submissionPort,
    receiverPort: await freePort(),
    fullAccessKey: key,
    emailId: email.id as string,
    templateId: template.id as string,
    orgId: undefined, // made below, once the server has stopped (the CLI cannot open a running server's PGlite)
    databaseUrl,
  };
  const blockEnv = {
    ...common,
    MAILROOM_KEY: key,
    TOPIC_ID: topic.id as string,
    DOMAIN_ID: devDomain.id,
    LAST_ID: contact.id as string,
    // `npx mailroom` must find this checkout's CLI with no registry: offline proves it. The npm cache is
    // this run's own (as on a fresh machine), and the project's prepare script (the dashboard build,
    // which other test files serve) is not run again.
    npm_config_offline: 'true',
    npm_config_cache: path.join(dataDir, 'npm-cache'),
    npm_config_ignore_scripts: 'true',
    npm_config_update_notifier: 'false',
  };

  const run = async (block: Block) => {
    await t.test(`${block.file}:${block.line}`, async () => {
      assertSafe(block);
      const result = await runBlock(substitute(block.code, values), blockEnv);
      const shown = `${block.file}:${block.line} exited ${result.code}\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`;
      assert.equal(result.code, 0, shown);
      for (const expected of EXPECTED_OUTPUT) {
        if (block.code.includes(expected.contains))
          assert.match(result.stdout, expected.stdout, `${expected.why}\n${shown}`);
      }
    });
  };

  // A block that sets DATABASE_URL is about PostgreSQL: the PostgreSQL pass runs it (there may be no
  // PostgreSQL server during the PGlite pass).
  const runnable = blocks.filter((block) => onPostgres || !/\bDATABASE_URL=/.test(block.code));
  // Blocks that talk to the server run while it is up; the CLI-only ones after it has stopped, as the
  // docs tell embedded users (docs/operations.md: the CLI cannot open a running server's PGlite).
  const talksToServer = (block: Block) => /\b(?:curl|swaks)\b/.test(block.code);
  for (const block of runnable.filter(talksToServer)) await run(block);

  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0, server.output());
  serverStopped = true;

  values.orgId = (await cli('org', 'create', '--name', 'Acme')).id as string;
  for (const block of runnable.filter((block) => !talksToServer(block))) await run(block);
});
