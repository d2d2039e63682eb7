import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILT_IN_HOLDS, formatDuration, parseDuration, parseRate, type SiteLimits } from '../src/shaping/limits.ts';
import { loadShapingFile, ShapingFileError } from '../src/shaping/shaping-file.ts';
import { siteOf } from '../src/shaping/sites.ts';

// The shaping file: built-in limits, the layers a site's limits merge from, TOML and JSON, and every
// check, each naming the key at fault.

let dir: string;
let written = 0;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'mailroom-shaping-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Writes a shaping file and returns its path. */
function file(content: string, extension = '.toml'): string {
  const path = join(dir, `shaping-${written++}${extension}`);
  writeFileSync(path, content);
  return path;
}

const limits = (connectionLimit: number, maxDeliveriesPerConnection: number, rates: Partial<SiteLimits> = {}) => ({
  connectionLimit,
  maxDeliveriesPerConnection,
  maxMessageRate: undefined,
  maxConnectionRate: undefined,
  ...rates,
});

test('without a file: 10 × 100 everywhere, providers at their published limits, no rate, built-in holds', () => {
  const policy = loadShapingFile(undefined);
  assert.deepEqual(policy.limitsFor('google'), limits(5, 50));
  assert.deepEqual(policy.limitsFor('microsoft'), limits(5, 50));
  assert.deepEqual(policy.limitsFor('yahoo'), limits(10, 20));
  assert.deepEqual(policy.limitsFor('apple'), limits(10, 5));
  assert.deepEqual(policy.limitsFor('relay'), limits(20, 100));
  for (const site of ['fastmail', 'mx:mx1.shop.test', 'example.test', '__proto__', 'constructor']) {
    assert.deepEqual(policy.limitsFor(site), limits(10, 100), site);
  }
  assert.deepEqual(policy.holds, {
    google_rate_limit: 10 * 60_000,
    yahoo_tss04: 2 * 3_600_000,
    throttle: 5 * 60_000,
    sender_fault: 30 * 60_000,
    sending_quota: 3_600_000,
    rate_throttle: 1_000,
    max: 4 * 3_600_000,
  });
  assert.deepEqual(policy.rules, []);
  assert.deepEqual(policy.mxSuffixes, {});
});

test('limits merge: built-in default < built-in site < file [default] < file [site.<id>]', () => {
  const policy = loadShapingFile(
    file(`
[default]
connection_limit = 3
max_message_rate = "100/m"

[site.google]
connection_limit = 2
max_connection_rate = "10/s"

[site.relay]
max_deliveries_per_connection = 500
`),
  );
  const perMinute = { count: 100, perMs: 60_000 };
  // The file's [default] is over the built-in provider limits too, key by key.
  assert.deepEqual(
    policy.limitsFor('google'),
    limits(2, 50, { maxMessageRate: perMinute, maxConnectionRate: { count: 10, perMs: 1000 } }),
  );
  assert.deepEqual(policy.limitsFor('apple'), limits(3, 5, { maxMessageRate: perMinute }));
  assert.deepEqual(policy.limitsFor('relay'), limits(3, 500, { maxMessageRate: perMinute }));
  assert.deepEqual(policy.limitsFor('mx:mx.shop.test'), limits(3, 100, { maxMessageRate: perMinute }));
  // Each answer is the caller's own.
  policy.limitsFor('google').connectionLimit = 99;
  assert.equal(policy.limitsFor('google').connectionLimit, 2);
});

test('the same file as TOML and as JSON gives the same policy', () => {
  const toml = loadShapingFile(
    file(`
[default]
max_deliveries_per_connection = 40

[site."mx:MX2.shop.test,mx1.shop.test."]
connection_limit = 2

[site."Example.TEST"]
connection_limit = 1

[site.acme]
mx_suffixes = [".mx.acme.net"]
max_message_rate = "20/min"

[[rule]]
regex = "(?i:too many connections)"
action = "lower"
connection_limit = 1
max_message_rate = "10/m"
duration = "1h"

[[rule]]
regex = "spam detected"
action = "pause"
scope = "sender"
duration = "30m"

[holds]
google_rate_limit = "15m"
`),
  );
  const json = loadShapingFile(
    file(
      JSON.stringify({
        default: { max_deliveries_per_connection: 40 },
        site: {
          'mx:MX2.shop.test,mx1.shop.test.': { connection_limit: 2 },
          'Example.TEST': { connection_limit: 1 },
          acme: { mx_suffixes: ['.mx.acme.net'], max_message_rate: '20/min' },
        },
        rule: [
          {
            regex: '(?i:too many connections)',
            action: 'lower',
            connection_limit: 1,
            max_message_rate: '10/m',
            duration: '1h',
          },
          { regex: 'spam detected', action: 'pause', scope: 'sender', duration: '30m' },
        ],
        holds: { google_rate_limit: '15m' },
      }),
      '.JSON',
    ),
  );
  for (const policy of [toml, json]) {
    // Site keys match the ids siteOf makes, whatever their case, order and trailing dots.
    assert.deepEqual(policy.limitsFor(siteOf('shop.test', ['mx1.shop.test', 'mx2.shop.test'])), limits(2, 40));
    assert.deepEqual(policy.limitsFor(siteOf('example.test', undefined)), limits(1, 40));
    assert.deepEqual(policy.limitsFor('acme'), limits(10, 40, { maxMessageRate: { count: 20, perMs: 60_000 } }));
    assert.deepEqual(policy.mxSuffixes, { acme: ['.mx.acme.net'] });
    assert.deepEqual(policy.holds, { ...BUILT_IN_HOLDS, google_rate_limit: 15 * 60_000 });

    const [lower, pause] = policy.rules;
    assert.equal(policy.rules.length, 2);
    assert.ok(lower?.action === 'lower' && pause?.action === 'pause');
    assert.equal(lower.name, 'rule[0]');
    assert.ok(lower.regex.test('421 4.7.0 Too Many Connections from your IP'));
    assert.deepEqual(lower.limits, { connectionLimit: 1, maxMessageRate: { count: 10, perMs: 60_000 } });
    assert.equal(lower.durationMs, 3_600_000);
    assert.equal(pause.name, 'rule[1]');
    assert.equal(pause.scope, 'sender');
    assert.equal(pause.durationMs, 30 * 60_000);
    assert.ok(!pause.regex.test('SPAM DETECTED')); // as written: case matters unless the regex says (?i:…)
  }
});

test('a pause rule is for the site unless it says sender', () => {
  const policy = loadShapingFile(file('[[rule]]\nregex = "x"\naction = "pause"\nduration = "10m"\n'));
  assert.equal(policy.rules[0]?.action === 'pause' && policy.rules[0].scope, 'site');
});

test('rates: a whole count per second, minute, hour or day', () => {
  assert.deepEqual(parseRate('100/m'), { count: 100, perMs: 60_000 });
  assert.deepEqual(parseRate('14/s'), { count: 14, perMs: 1000 });
  assert.deepEqual(parseRate('1000/h'), { count: 1000, perMs: 3_600_000 });
  assert.deepEqual(parseRate('20/min'), { count: 20, perMs: 60_000 });
  assert.deepEqual(parseRate(' 2 / hr '), { count: 2, perMs: 3_600_000 });
  assert.deepEqual(parseRate('1/minute'), { count: 1, perMs: 60_000 });
  assert.deepEqual(parseRate('5000/d'), { count: 5000, perMs: 86_400_000 });
  for (const bad of ['100', '0/m', '-1/s', '1.5/s', '10/fortnight', '/m', '10/', '', 'ten/m']) {
    assert.equal(parseRate(bad), undefined, bad);
  }
});

test('durations: a whole number of seconds, minutes, hours or days', () => {
  assert.equal(parseDuration('30s'), 30_000);
  assert.equal(parseDuration('10m'), 600_000);
  assert.equal(parseDuration('2h'), 7_200_000);
  assert.equal(parseDuration('1d'), 86_400_000);
  for (const bad of ['0m', '10', '1.5h', '10 minutes', '2w', 'h', '', '-1h'])
    assert.equal(parseDuration(bad), undefined, bad);
  assert.equal(formatDuration(7_200_000), '2h');
  assert.equal(formatDuration(90 * 60_000), '90m');
  assert.equal(formatDuration(1500), '1500ms');
});

/** Loads the file and returns its error, which must be a ShapingFileError. */
function errorOf(path: string): ShapingFileError {
  try {
    loadShapingFile(path);
  } catch (error) {
    assert.ok(error instanceof ShapingFileError, String(error));
    return error;
  }
  assert.fail(`${path} loaded`);
}

test('every check names the key at fault, after the file', () => {
  const cases: [content: string, keyPath: string, problem: RegExp][] = [
    [
      '[defaults]\nconnection_limit = 1',
      'defaults',
      /unknown key \(expected one of default, site, rule, holds, source, pool, routing, warmup\)/,
    ],
    ['[default]\nconnection_limit = 0', 'default.connection_limit', /expected a whole number ≥ 1, got 0$/],
    ['[site.google]\nconnection_limit = "5"', 'site.google.connection_limit', /expected a whole number ≥ 1, got "5"/],
    ['[site.google]\nconnection_limit = 1979-05-27', 'site.google.connection_limit', /got a date/],
    ['[site.google]\nmax_deliveries_per_connection = 2.5', 'site.google.max_deliveries_per_connection', /whole/],
    ['[site.yahoo]\nmax_message_rate = "fast"', 'site.yahoo.max_message_rate', /expected a rate such as "100\/m"/],
    ['[site.yahoo]\nmax_connection_rate = 10', 'site.yahoo.max_connection_rate', /expected a rate.*got 10$/],
    ['[site.google]\nconection_limit = 5', 'site.google.conection_limit', /unknown key/],
    ['[default]\nmx_suffixes = [".x.net"]', 'default.mx_suffixes', /unknown key/],
    ['site = 3', 'site', /expected a table, got 3/],
    ['[site]\ngoogle = 3', 'site.google', /expected a table, got 3/],
    ['[site.gogle]\nconnection_limit = 1', 'site.gogle', /not a known site: expected a provider \(google, microsoft/],
    ['[site.Google]\nconnection_limit = 1', 'site.Google', /not a known site/],
    ['[site."mx:"]\nconnection_limit = 1', 'site."mx:"', /MX host names/],
    ['[site.acme]\nmx_suffixes = ["mx.acme.net"]', 'site.acme.mx_suffixes[0]', /starting with a dot/],
    ['[site.acme]\nmx_suffixes = [".ok.net", 7]', 'site.acme.mx_suffixes[1]', /got 7/],
    ['[site.acme]\nmx_suffixes = []', 'site.acme.mx_suffixes', /non-empty array/],
    ['[site.acme]\nmx_suffixes = [".Google.com"]', 'site.acme.mx_suffixes[0]', /already a suffix of site google/],
    [
      '[site.a]\nmx_suffixes = [".x.net"]\n[site.b]\nmx_suffixes = [".x.net"]',
      'site.b.mx_suffixes[0]',
      /already a suffix of site a/,
    ],
    ['[site.relay]\nmx_suffixes = [".r.net"]', 'site.relay.mx_suffixes', /the relay has no MX/],
    ['[site.default]\nmx_suffixes = [".r.net"]', 'site.default', /not a known site/],
    [
      '[site."Example.com"]\nconnection_limit = 1\n[site."example.com."]\nconnection_limit = 2',
      'site."example.com."',
      /the same site as site."Example.com"/,
    ],
    ['rule = "x"', 'rule', /expected an array of tables/],
    ['[[rule]]\naction = "pause"\nduration = "30m"', 'rule[0].regex', /required/],
    ['[[rule]]\nregex = "x"\nduration = "30m"', 'rule[0].action', /required/],
    ['[[rule]]\nregex = "x"\naction = "pause"', 'rule[0].duration', /required/],
    ['[[rule]]\nregex = "("\naction = "pause"\nduration = "1h"', 'rule[0].regex', /not a valid regular expression/],
    ['[[rule]]\nregex = ""\naction = "pause"\nduration = "1h"', 'rule[0].regex', /non-empty string/],
    [
      '[[rule]]\nregex = "x"\naction = "stop"\nduration = "1h"',
      'rule[0].action',
      /expected "pause" or "lower", got "stop"/,
    ],
    ['[[rule]]\nregex = "x"\naction = "pause"\nduration = "soon"', 'rule[0].duration', /duration such as "30s"/],
    ['[[rule]]\nregex = "x"\naction = "pause"\nduration = 30', 'rule[0].duration', /got 30$/],
    [
      '[[rule]]\nregex = "x"\naction = "pause"\nscope = "world"\nduration = "1h"',
      'rule[0].scope',
      /"site" or "sender"/,
    ],
    ['[[rule]]\nregex = "x"\naction = "lower"\nscope = "site"\nduration = "1h"', 'rule[0].scope', /unknown key/],
    [
      '[[rule]]\nregex = "x"\naction = "pause"\nconnection_limit = 1\nduration = "1h"',
      'rule[0].connection_limit',
      /unknown key/,
    ],
    ['[[rule]]\nregex = "x"\naction = "lower"\nduration = "1h"', 'rule[0]', /sets at least one of connection_limit/],
    [
      '[[rule]]\nregex = "x"\naction = "lower"\nconnection_limit = 0\nduration = "1h"',
      'rule[0].connection_limit',
      /≥ 1/,
    ],
    [
      '[[rule]]\nregex = "x"\naction = "pause"\nduration = "1h"\n[[rule]]\nregex = "y"\naction = "lower"\nmax_message_rate = "1"\nduration = "1h"',
      'rule[1].max_message_rate',
      /expected a rate/,
    ],
    ['[holds]\ngoogle_rate_limit = "ten minutes"', 'holds.google_rate_limit', /expected a duration/],
    [
      '[holds]\nmicrosoft = "1h"',
      'holds.microsoft',
      /unknown key \(expected one of google_rate_limit, yahoo_tss04, throttle, sender_fault, sending_quota, rate_throttle, max\)/,
    ],
    ['[holds]\nyahoo_tss04 = "5h"', 'holds.yahoo_tss04', /holds.yahoo_tss04 \(5h\) is longer than holds.max \(4h\)/],
    ['[holds]\nmax = "1h"', 'holds.max', /holds.yahoo_tss04 \(2h\) is longer than holds.max \(1h\)/],
    ['holds = []', 'holds', /expected a table, got an array/],
  ];
  for (const [content, keyPath, problem] of cases) {
    const path = file(content);
    const error = errorOf(path);
    assert.equal(error.keyPath, keyPath, content);
    assert.ok(error.message.startsWith(`${path}: ${keyPath}: `), error.message);
    assert.match(error.problem, problem, content);
  }
});

test('JSON is checked the same way, with the same key paths', () => {
  const cases: [content: unknown, keyPath: string | undefined, problem: RegExp][] = [
    [{ site: { google: { connection_limit: '5' } } }, 'site.google.connection_limit', /got "5"/],
    [{ site: { google: { connection_limit: null } } }, 'site.google.connection_limit', /got null/],
    [
      { rule: [{ regex: 'x', action: 'lower', max_message_rate: true, duration: '1h' }] },
      'rule[0].max_message_rate',
      /got true/,
    ],
    [{ rule: {} }, 'rule', /expected an array of tables, got a table/],
    [JSON.parse('{"__proto__": {"connection_limit": 1}}'), '__proto__', /unknown key/],
    [JSON.parse('{"site": {"__proto__": {"connection_limit": 1}}}'), 'site.__proto__', /not a known site/],
    [[], undefined, /expected a table of \[default\], \[site.<id>\], \[\[rule\]\], \[holds\]/],
  ];
  for (const [content, keyPath, problem] of cases) {
    const error = errorOf(file(JSON.stringify(content), '.json'));
    assert.equal(error.keyPath, keyPath, JSON.stringify(content));
    assert.match(error.problem, problem);
  }
});

test('a file that cannot be read or parsed is named with the reason', () => {
  const missing = join(dir, 'absent.toml');
  assert.equal(errorOf(missing).message, `${missing}: cannot be read (ENOENT)`);

  const badToml = file('[default]\nconnection_limit = = 3\n');
  const tomlError = errorOf(badToml);
  assert.equal(tomlError.keyPath, undefined);
  assert.match(tomlError.message, /^.*shaping-\d+\.toml: not valid TOML: .*\n(.*\n)*2: {2}connection_limit = = 3/);

  assert.match(errorOf(file('{"default": ', '.json')).message, /: not valid JSON: /);
  // An unsafe key is refused by the TOML parser rather than reaching an object's prototype.
  assert.match(errorOf(file('[default]\n__proto__ = 3\n')).message, /not valid TOML: .*unsafe/);
});

test('every TOML and JSON example in docs/shaping.md is a valid shaping file', () => {
  const doc = readFileSync(new URL('../docs/shaping.md', import.meta.url), 'utf8');
  const examples = [...doc.matchAll(/^```(toml|json)\n([\s\S]*?)^```$/gm)];
  assert.deepEqual(new Set(examples.map((match) => match[1])), new Set(['toml', 'json']));
  for (const [, language, example] of examples) loadShapingFile(file(example!, `.${language!}`));
});

// Egress: sources, pools and routing.
const ORG = '0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9';
const EGRESS = `
[source.mta1]
address = "192.0.2.10"
ehlo = "MTA1.example.com."

[source.mta2]
address = "2001:db8::2"
ehlo = "mta2.example.com"
warmup = true

[source.esp]
relay = "smtp://user:secret@smtp.esp.example:2525"
max_message_rate = "14/s"

[pool.shared]
sources = ["mta1", "mta2"]
overflow = "esp"
[pool.shared.sites]
microsoft = "relayed"

[pool.relayed]
sources = ["esp"]

[pool.dedicated]
sources = ["mta2"]

[routing]
default_pool = "shared"
[routing.organizations]
"${ORG}" = "dedicated"
[routing.domains]
"News.Example.com" = "relayed"

[warmup]
schedule = [50, 100, 400]
[warmup.sites]
google = [20, 40]
`;

test('sources, pools and routing: the pool of a message by sending domain, organization, default, then site', () => {
  const { egress, limitsFor } = loadShapingFile(file(EGRESS));
  assert.equal(egress.declared, true);
  assert.deepEqual(egress.sources.get('mta1'), {
    kind: 'address',
    name: 'mta1',
    address: '192.0.2.10',
    ehlo: 'mta1.example.com',
    warmup: false,
  });
  assert.equal(egress.sources.get('mta2')?.warmup, true);
  const esp = egress.sources.get('esp');
  assert.ok(esp?.kind === 'relay');
  assert.deepEqual(
    [esp.host, esp.port, esp.secure, esp.auth],
    ['smtp.esp.example', 2525, false, { user: 'user', pass: 'secret' }],
  );
  // A relay source's own limits apply over [site.relay] for that source only.
  assert.deepEqual(limitsFor('relay', 'esp').maxMessageRate, { count: 14, perMs: 1000 });
  assert.equal(limitsFor('relay').maxMessageRate, undefined);

  const pool = (organizationId: string, senderDomain: string, site: string) =>
    egress.poolFor({ organizationId, senderDomain, site }).name;
  const stranger = '11111111-2222-4333-8444-555555555555';
  assert.equal(pool(stranger, 'mail.example.com', 'google'), 'shared');
  assert.equal(pool(ORG.toUpperCase(), 'mail.example.com', 'google'), 'dedicated');
  // The sending domain's pool wins over the organization's.
  assert.equal(pool(ORG, 'news.example.com', 'google'), 'relayed');
  // The shared pool sends Microsoft through the relay; the dedicated pool has no such route.
  assert.equal(pool(stranger, 'mail.example.com', 'microsoft'), 'relayed');
  assert.equal(pool(ORG, 'mail.example.com', 'microsoft'), 'dedicated');
  assert.equal(egress.pools.get('shared')?.overflow, 'esp');

  assert.deepEqual(egress.stagesFor('google'), [20, 40]);
  assert.deepEqual(egress.stagesFor('yahoo'), [50, 100, 400]);
});

test('without sources there is one, default, in one pool; the built-in warm-up schedule starts at 200 a day', () => {
  const { egress } = loadShapingFile(undefined);
  assert.equal(egress.declared, false);
  assert.deepEqual([...egress.sources.keys()], ['default']);
  assert.equal(egress.poolFor({ organizationId: ORG, senderDomain: 'a.example', site: 'google' }).name, 'default');
  assert.equal(egress.stagesFor('google')[0], 200);
  assert.equal(egress.stagesFor('google').at(-1), 10_000_000);
  // Sources alone: one pool, default, with every source.
  const alone = loadShapingFile(file('[source.a]\naddress = "192.0.2.1"\n[source.b]\naddress = "192.0.2.2"')).egress;
  assert.deepEqual(alone.pools.get('default')?.sources, ['a', 'b']);
});

test('every egress mistake names the key at fault', () => {
  const source = '[source.a]\naddress = "192.0.2.1"\n';
  const cases: [content: string, keyPath: string, problem: RegExp][] = [
    ['[source.A]\naddress = "192.0.2.1"', 'source.A', /lower case letters/],
    ['[source.a]\nehlo = "mta.example.com"', 'source.a', /either `address`.*or `relay`/],
    ['[source.a]\naddress = "192.0.2.1"\nrelay = "smtp://x.example"', 'source.a', /either/],
    ['[source.a]\naddress = "mta.example.com"', 'source.a.address', /IPv4 or IPv6 address/],
    ['[source.a]\naddress = "192.0.2.1"\nehlo = "localhost"', 'source.a.ehlo', /fully qualified host name/],
    ['[source.a]\naddress = "192.0.2.1"\nwarmup = "yes"', 'source.a.warmup', /true or false/],
    ['[source.a]\naddress = "192.0.2.1"\nconnection_limit = 2', 'source.a.connection_limit', /unknown key/],
    ['[source.a]\nrelay = "http://x.example"', 'source.a.relay', /smtp:\/\/ or smtps:\/\//],
    ['[source.a]\nrelay = "smtp://x.example"\nwarmup = true', 'source.a.warmup', /unknown key/],
    ['[pool.p]\nsources = ["a"]', 'pool', /declare \[source/],
    ['[routing]\ndefault_pool = "p"', 'routing', /declare \[source/],
    [`${source}[pool.p]\nsources = []`, 'pool.p.sources', /non-empty array/],
    [`${source}[pool.p]\nsources = ["b"]`, 'pool.p.sources[0]', /no source "b" \(sources: a\)/],
    [`${source}[pool.p]\nsources = ["a", "a"]`, 'pool.p.sources', /listed twice/],
    [`${source}[pool.p]\nsources = ["a"]\noverflow = "z"`, 'pool.p.overflow', /no source "z"/],
    [`${source}[pool.p]\nsources = ["a"]\nsites = { google = "q" }`, 'pool.p.sites.google', /no pool "q"/],
    [
      `${source}[source.w]\naddress = "192.0.2.9"\nwarmup = true\n[pool.p]\nsources = ["a"]\noverflow = "w"`,
      'pool.p.overflow',
      /warming up itself/,
    ],
    [`${source}[pool.p]\nsources = ["a"]\n[pool.q]\nsources = ["a"]`, 'routing.default_pool', /required/],
    [`${source}[routing]\ndefault_pool = "nope"`, 'routing.default_pool', /no pool "nope" \(pools: default\)/],
    [`${source}[routing.organizations]\nacme = "default"`, 'routing.organizations.acme', /organization id/],
    [`${source}[routing.domains]\n"not a domain" = "default"`, 'routing.domains."not a domain"', /sending domain/],
    [`${source}[routing]\npools = 1`, 'routing.pools', /unknown key/],
    ['[warmup]\nschedule = []', 'warmup.schedule', /non-empty array of daily volumes/],
    ['[warmup]\nschedule = [200, 100]', 'warmup.schedule[1]', /at least as much/],
    ['[warmup.sites]\ngoogle = [0]', 'warmup.sites.google[0]', /≥ 1/],
    ['[warmup.sites]\ngogle = [1]', 'warmup.sites.gogle', /not a known site/],
    [`${source}[pool.p]\nsources = ["a"]\nsites = { microsfot = "p" }`, 'pool.p.sites.microsfot', /not a known site/],
    [
      '[source.r]\nrelay = "smtp://u:hunter2@x.example:99999"',
      'source.r.relay',
      /expected an smtp:\/\/ or smtps:\/\/ URL/,
    ],
    [
      '[source.r]\nrelay = "smtp://u:hunter2@x.example:abc"',
      'source.r.relay',
      /expected an smtp:\/\/ or smtps:\/\/ URL/,
    ],
    [
      '[source.r]\nrelay = "smtp://u:hunter2@x.example?tls.rejectUnauthorized=false"',
      'source.r.relay',
      /without options/,
    ],
  ];
  for (const [content, keyPath, problem] of cases) {
    const error = errorOf(file(content));
    assert.equal(error.keyPath, keyPath, content);
    assert.match(error.problem, problem, content);
    assert.doesNotMatch(error.message, /hunter2/, 'a relay password is never repeated');
  }
  // Nor when the file is not TOML at all on the relay's line.
  const broken = errorOf(file('[source.r]\nrelay = "smtp://u:hunter2@x.example:587'));
  assert.equal(broken.keyPath, undefined);
  assert.doesNotMatch(broken.message, /hunter2/);
});
