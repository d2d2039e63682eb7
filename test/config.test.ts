import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { ConfigError, loadConfig, SETTINGS } from '../src/platform/config.ts';

test('defaults describe the embedded service on 127.0.0.1:3000', () => {
  const config = loadConfig({});
  assert.equal(config.databaseUrl, undefined);
  assert.equal(config.dataDir, './.mailroom');
  assert.equal(config.port, 3000);
  assert.equal(config.host, '127.0.0.1');
  assert.equal(config.devDomain, 'example.test');
  assert.deepEqual(config.dnsServers, []);
});

const BAD: Array<[string, string]> = [
  ['PORT', 'eighty'],
  ['PORT', '70000'],
  ['DATABASE_URL', 'mysql://localhost/db'],
  ['DATABASE_URL', 'not a url'],
  ['MAILROOM_LOG_LEVEL', 'loud'],
  ['MAILROOM_BODY_LIMIT_BYTES', '-1'],
  ['MAILROOM_SESSION_TTL_HOURS', '0'],
  ['MAILROOM_DEV_DOMAIN', 'localhost'],
  ['MAILROOM_DNS_SERVERS', '127.0.0.1:53,dns.example'],
  ['MAILROOM_DKIM_SELECTOR', 'has space'],
  ['MAILROOM_SUBMISSION_PORT', 'submission'],
  ['MAILROOM_SUBMISSIONS_PORT', '99999'],
  // A certificate without its key (or the reverse) names the one missing.
  ['MAILROOM_TLS_KEY_FILE', ''],
];

for (const [variable, value] of BAD) {
  test(`a bad ${variable} (${JSON.stringify(value)}) stops the boot, naming the variable`, () => {
    assert.throws(
      () =>
        loadConfig(
          variable === 'MAILROOM_TLS_KEY_FILE'
            ? { MAILROOM_TLS_CERT_FILE: '/etc/mail/cert.pem' }
            : { [variable]: value },
        ),
      (error: unknown) =>
        error instanceof ConfigError && error.variable === variable && error.message.startsWith(variable),
    );
  });
}

test('valid values are parsed', () => {
  const config = loadConfig({
    DATABASE_URL: 'postgres://u@db:5432/mailroom',
    PORT: '8080',
    MAILROOM_DNS_SERVERS: '127.0.0.1:5353, [::1]:53',
    MAILROOM_DEV_DOMAIN: 'Mail.Example.COM',
  });
  assert.equal(config.port, 8080);
  assert.deepEqual(config.dnsServers, ['127.0.0.1:5353', '[::1]:53']);
  assert.equal(config.devDomain, 'mail.example.com');
});

test('docs/configuration.md documents every setting with its default', async () => {
  const doc = await readFile(new URL('../docs/configuration.md', import.meta.url), 'utf8');
  // Table rows as [variable, default, meaning] cells, whatever the column padding.
  const rows = doc
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) =>
      line
        .split('|')
        .map((cell) => cell.trim())
        .slice(1, -1),
    );
  for (const setting of SETTINGS) {
    const row = rows.find((cells) => cells[0] === `\`${setting.variable}\``);
    assert.ok(row, `${setting.variable} has no row in docs/configuration.md`);
    const documented = setting.default === undefined ? '(unset)' : `\`${setting.default}\``;
    assert.equal(row[1], documented, `${setting.variable}: the documented default`);
  }
});

test('submission ports: a number, 0 for a free one, off, or unset for the default', () => {
  assert.equal(loadConfig({ MAILROOM_SUBMISSION_PORT: '587' }).submissionPort, 587);
  assert.equal(loadConfig({ MAILROOM_SUBMISSION_PORT: '0' }).submissionPort, 0);
  assert.equal(loadConfig({ MAILROOM_SUBMISSION_PORT: 'OFF' }).submissionPort, 'off');
  assert.equal(loadConfig({}).submissionPort, undefined);
  assert.equal(loadConfig({ MAILROOM_SUBMISSIONS_PORT: '465' }).submissionsPort, 465);
});

test('a transaction pooler and a LISTEN URL: PostgreSQL settings, refused without DATABASE_URL', () => {
  const url = 'postgres://mailroom@127.0.0.1:6432/mailroom';
  const pooled = loadConfig({ DATABASE_URL: url, MAILROOM_DB_POOLER: 'transaction', MAILROOM_DB_LISTEN_URL: url });
  assert.equal(pooled.dbPooler, 'transaction');
  assert.equal(pooled.dbListenUrl, url);
  assert.equal(loadConfig({}).dbPooler, 'none');
  // Without DATABASE_URL (the embedded database) there is no pooler, and nothing to listen past it.
  assert.throws(() => loadConfig({ DATABASE_URL: url, MAILROOM_DB_POOLER: 'session' }), /MAILROOM_DB_POOLER: expected/);
  assert.throws(() => loadConfig({ MAILROOM_DB_POOLER: 'transaction' }), /MAILROOM_DB_POOLER: needs DATABASE_URL/);
  assert.throws(() => loadConfig({ MAILROOM_DB_LISTEN_URL: url }), /MAILROOM_DB_LISTEN_URL: needs DATABASE_URL/);
  assert.throws(
    () => loadConfig({ DATABASE_URL: url, MAILROOM_DB_LISTEN_URL: 'mysql://x/y' }),
    (error) => error instanceof ConfigError && error.variable === 'MAILROOM_DB_LISTEN_URL',
  );
});
