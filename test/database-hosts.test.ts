import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDatabaseUrl } from '../src/platform/db/hosts.ts';
import { ConfigError, loadConfig } from '../src/platform/config.ts';

test('one host: its port, or 5432', () => {
  assert.deepEqual(parseDatabaseUrl('postgres://u@db:6543/mailroom').hosts, [{ host: 'db', port: 6543 }]);
  assert.deepEqual(parseDatabaseUrl('postgresql://u@db/mailroom').hosts, [{ host: 'db', port: 5432 }]);
  assert.equal(parseDatabaseUrl('postgres://u@db/mailroom').targetSessionAttrs, 'any');
});

test('several hosts, each with its own port or 5432, in the order given', () => {
  const target = parseDatabaseUrl('postgres://u:p@h1:5432,h2:5433,h3/db?target_session_attrs=read-write');
  assert.deepEqual(target.hosts, [
    { host: 'h1', port: 5432 },
    { host: 'h2', port: 5433 },
    { host: 'h3', port: 5432 },
  ]);
  assert.equal(target.targetSessionAttrs, 'read-write');
});

test('IPv6 addresses in brackets, with and without a port', () => {
  const target = parseDatabaseUrl('postgres://u@[::1]:5433,[fd00::2],127.0.0.1:5434/db');
  assert.deepEqual(target.hosts, [
    { host: '::1', port: 5433 },
    { host: 'fd00::2', port: 5432 },
    { host: '127.0.0.1', port: 5434 },
  ]);
  assert.equal(target.urlFor(0), 'postgres://u@[::1]:5433/db');
});

test('percent-encoded credentials are decoded, and kept encoded in the URL of each host', () => {
  const target = parseDatabaseUrl('postgres://us%40er:p%3Aw%2Fd%40@h1:5432,h2:5433/db');
  assert.equal(target.user, 'us@er');
  assert.equal(target.password, 'p:w/d@');
  assert.equal(target.urlFor(1), 'postgres://us%40er:p%3Aw%2Fd%40@h2:5433/db');
});

test("each host's URL keeps the other parameters and drops target_session_attrs", () => {
  const target = parseDatabaseUrl(
    'postgres://u@h1,h2:5433/db?application_name=mr&target_session_attrs=primary&sslmode=disable',
  );
  assert.equal(target.targetSessionAttrs, 'primary');
  assert.equal(target.urlFor(0), 'postgres://u@h1:5432/db?application_name=mr&sslmode=disable');
  assert.equal(target.urlFor(1), 'postgres://u@h2:5433/db?application_name=mr&sslmode=disable');
  assert.equal(parseDatabaseUrl('postgres://u@h1,h2/db?target_session_attrs=any').targetSessionAttrs, 'any');
});

const REFUSED: Array<[string, RegExp]> = [
  ['postgres://u@h1,h2/db?target_session_attrs=read-only', /target_session_attrs=read-only is not supported/],
  ['postgres://u@h1,h2/db?target_session_attrs=standby', /target_session_attrs=standby is not supported/],
  ['postgres://u@h1,h2/db?target_session_attrs=prefer-standby', /not supported/],
  ['postgres://u@h1:99999,h2/db', /port of "h1:99999" is not between 1 and 65535/],
  ['postgres://u@h1:0/db', /port of "h1:0"/],
  ['postgres://u@h1,,h2/db', /a host of the list is empty/],
  ['postgres://u@::1:5432/db', /not a host with an optional port/],
  ['postgres://u@[db]:5432/db', /not a host with an optional port/],
  ['postgres://u%zz@h1/db', /user name has a bad percent-encoding/],
  ['mysql://u@h1,h2/db', /expected a postgres: or postgresql: URL, got mysql:/],
  ['not a url', /not a valid URL/],
];

for (const [url, message] of REFUSED) {
  test(`${url} is refused with a clear reason`, () => {
    assert.throws(() => parseDatabaseUrl(url), message);
    assert.throws(
      () => loadConfig({ DATABASE_URL: url }),
      (error: unknown) =>
        error instanceof ConfigError && error.variable === 'DATABASE_URL' && message.test(error.message),
    );
  });
}

test('DATABASE_URL takes several hosts', () => {
  const url = 'postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write';
  assert.equal(loadConfig({ DATABASE_URL: url }).databaseUrl, url);
});
