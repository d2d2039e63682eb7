import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createSiteResolver,
  DEFAULT_FAILURE_CACHE_MS,
  DEFAULT_SITE_CACHE_MS,
  MAX_SITE_CACHE_MS,
  MIN_SITE_CACHE_MS,
  normalizeSiteId,
  siteOf,
} from '../src/shaping/sites.ts';
import { compileShapingPolicy } from '../src/shaping/shaping-file.ts';
import { createMxTtlLookup } from '../src/delivery/transports/mx-lookup.ts';
import { startDnsServer, type DnsServer, type ZoneEntry } from './helpers/dns-server.ts';

// The site of a recipient domain from its MX host names (pure), and the cache of a domain's site over
// real MX look-ups from a loopback DNS server, with an injected clock for expiry.

test('each known provider is recognised by the MX host names it really publishes', () => {
  const cases: [string, string[], string][] = [
    [
      'gmail.com',
      ['gmail-smtp-in.l.google.com.', 'alt1.gmail-smtp-in.l.google.com.', 'alt4.gmail-smtp-in.l.google.com.'],
      'google',
    ],
    ['workspace.test', ['aspmx.l.google.com', 'alt1.aspmx.l.google.com', 'aspmx2.googlemail.com'], 'google'],
    ['new-workspace.test', ['smtp.google.com'], 'google'],
    ['dnssec-workspace.test', ['mx1.smtp.goog', 'mx2.smtp.goog', 'mx3.smtp.goog', 'mx4.smtp.goog'], 'google'],
    ['hotmail.com', ['hotmail-com.olc.protection.outlook.com'], 'microsoft'],
    ['contoso.com', ['contoso-com.mail.protection.outlook.com'], 'microsoft'],
    ['dane.test', ['dane-test.l-v1.mx.microsoft'], 'microsoft'],
    ['yahoo.com', ['mta5.am0.yahoodns.net', 'mta6.am0.yahoodns.net', 'mta7.am0.yahoodns.net'], 'yahoo'],
    ['aol.com', ['mx-aol.mail.gm0.yahoodns.net'], 'yahoo'],
    ['icloud.com', ['mx01.mail.icloud.com', 'mx02.mail.icloud.com'], 'apple'],
    ['fastmail.com', ['in1-smtp.messagingengine.com', 'in2-smtp.messagingengine.com'], 'fastmail'],
    ['zoho.test', ['mx.zoho.eu', 'mx2.zoho.eu'], 'zoho'],
    ['proton.me', ['mail.protonmail.ch', 'mailsec.protonmail.ch'], 'proton'],
    ['gmx.de', ['mx00.emig.gmx.net', 'mx01.emig.gmx.net'], 'gmx'],
    ['web.de', ['mx-ha02.web.de', 'mx-ha03.web.de'], 'webde'],
    ['mail.ru', ['mxs.mail.ru'], 'mailru'],
    ['yandex.ru', ['mx.yandex.ru'], 'yandex'],
  ];
  for (const [domain, hosts, site] of cases)
    assert.equal(siteOf(domain, hosts), site, `${domain}: ${hosts.join(', ')}`);
});

test('host names compare in lower case without the trailing dot; a suffix matches subdomains only', () => {
  assert.equal(siteOf('gmail.com', ['GMAIL-SMTP-IN.L.Google.COM.']), 'google');
  // The suffix's own name, and a name that merely ends in the same letters, are someone else's server.
  assert.equal(siteOf('a.test', ['google.com']), 'mx:google.com');
  assert.equal(siteOf('a.test', ['mx.notgoogle.com']), 'mx:mx.notgoogle.com');
});

test('an MX set mixing providers, or a provider with other servers, is keyed by its sorted host names', () => {
  assert.equal(siteOf('shop.test', ['mx.shop.test', 'aspmx.l.google.com']), 'mx:aspmx.l.google.com,mx.shop.test');
  assert.equal(
    siteOf('both.test', ['aspmx.l.google.com', 'both-test.mail.protection.outlook.com']),
    'mx:aspmx.l.google.com,both-test.mail.protection.outlook.com',
  );
  // Two domains on the same servers share a site whatever the order, case and repetitions of the records.
  assert.equal(siteOf('one.test', ['MX2.host.example.', 'mx1.host.example']), 'mx:mx1.host.example,mx2.host.example');
  assert.equal(
    siteOf('two.test', ['mx1.host.example', 'mx2.host.example', 'mx1.host.example']),
    'mx:mx1.host.example,mx2.host.example',
  );
});

test('a domain without MX (implicit MX) or with a null MX is its own site', () => {
  assert.equal(siteOf('Example.TEST.', undefined), 'example.test');
  assert.equal(siteOf('example.test', []), 'example.test');
  assert.equal(siteOf('example.test', ['.']), 'example.test');
  assert.equal(siteOf('example.test', ['']), 'example.test');
});

test('extra suffixes name new providers, and the longest matching suffix wins', () => {
  assert.equal(siteOf('acme.test', ['mx1.mx.acme.net']), 'mx:mx1.mx.acme.net');
  assert.equal(siteOf('acme.test', ['mx1.mx.acme.net', 'mx2.mx.acme.net'], { acme: ['.mx.acme.net'] }), 'acme');
  // Outlook.com's servers split off from Microsoft 365's by a longer suffix.
  const split = { outlook: ['.olc.protection.outlook.com'] };
  assert.equal(siteOf('hotmail.com', ['hotmail-com.olc.protection.outlook.com'], split), 'outlook');
  assert.equal(siteOf('contoso.com', ['contoso-com.mail.protection.outlook.com'], split), 'microsoft');

  // As the shaping file gives them.
  const policy = compileShapingPolicy({ site: { acme: { mx_suffixes: ['.MX.Acme.NET'], connection_limit: 2 } } });
  assert.deepEqual(policy.mxSuffixes, { acme: ['.mx.acme.net'] });
  const site = siteOf('acme.test', ['mx1.mx.acme.net'], policy.mxSuffixes);
  assert.equal(site, 'acme');
  assert.equal(policy.limitsFor(site).connectionLimit, 2);
});

test('site ids normalise as siteOf makes them', () => {
  assert.equal(normalizeSiteId('mx:MX2.host.example.,mx1.host.example'), 'mx:mx1.host.example,mx2.host.example');
  assert.equal(normalizeSiteId('Example.com.'), 'example.com');
  assert.equal(normalizeSiteId('google'), 'google');
});

// The cache, over real MX look-ups. The zone counts the questions it is asked, so a test sees when the
// cache answered instead of DNS.
class CountingZone extends Map<string, ZoneEntry | 'servfail' | 'silent'> {
  readonly asked: string[] = [];
  override get(name: string) {
    this.asked.push(name);
    return super.get(name);
  }
}

let dns: DnsServer;
let zone: CountingZone;
let lookupMx: ReturnType<typeof createMxTtlLookup>;
before(async () => {
  zone = new CountingZone();
  dns = await startDnsServer(zone);
  lookupMx = createMxTtlLookup({ dnsServers: [dns.address], dnsTimeoutMs: 2000 });
});
after(() => dns.close());

const mx = (...exchanges: string[]): ZoneEntry => ({
  mx: exchanges.map((exchange, at) => ({ priority: at, exchange })),
});
const withTtl = (entry: ZoneEntry, ttl: number): ZoneEntry => ({ ...entry, ttl });
const clock = (start = 1_000_000) => {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
};
const asked = (name: string) => zone.asked.filter((question) => question === name).length;

test('a domain’s site is kept for its MX answer’s TTL, then looked up again', async () => {
  const time = clock();
  const sites = createSiteResolver({ lookupMx, now: time.now });
  zone.set('moving.test', withTtl(mx('aspmx.l.google.com', 'alt1.aspmx.l.google.com'), 600));
  assert.equal(await sites.siteFor('Moving.TEST'), 'google');
  assert.equal(asked('moving.test'), 1);

  // The domain moves to its own servers; until the TTL of the answer is over, the site stays.
  zone.set('moving.test', withTtl(mx('mx.moving.test'), 600));
  time.advance(600_000 - 1);
  assert.equal(await sites.siteFor('moving.test'), 'google');
  assert.equal(asked('moving.test'), 1);

  time.advance(1);
  assert.equal(await sites.siteFor('moving.test'), 'mx:mx.moving.test');
  assert.equal(asked('moving.test'), 2);
});

test('a TTL is kept at least 30 seconds and at most an hour', async () => {
  const time = clock();
  const sites = createSiteResolver({ lookupMx, now: time.now });
  zone.set('zero.test', withTtl(mx('mx.zero.test'), 0));
  zone.set('week.test', withTtl(mx('mx.week.test'), 7 * 86_400));
  await sites.siteFor('zero.test');
  await sites.siteFor('week.test');
  time.advance(MIN_SITE_CACHE_MS - 1);
  await sites.siteFor('zero.test');
  assert.equal(asked('zero.test'), 1);
  time.advance(1);
  await sites.siteFor('zero.test');
  assert.equal(asked('zero.test'), 2);
  time.advance(MAX_SITE_CACHE_MS - MIN_SITE_CACHE_MS - 1);
  await sites.siteFor('week.test');
  assert.equal(asked('week.test'), 1);
  time.advance(1);
  await sites.siteFor('week.test');
  assert.equal(asked('week.test'), 2);
});

test('concurrent look-ups of one domain share one question', async () => {
  const sites = createSiteResolver({ lookupMx, now: clock().now });
  zone.set('busy.test', mx('mx01.mail.icloud.com'));
  const answers = await Promise.all(Array.from({ length: 10 }, () => sites.siteFor('busy.test')));
  assert.deepEqual(new Set(answers), new Set(['apple']));
  assert.equal(asked('busy.test'), 1);
});

test('no MX and no such domain (answers without a TTL here) key by the domain for the default time', async () => {
  const time = clock();
  const sites = createSiteResolver({ lookupMx, now: time.now });
  zone.set('no-mx.test', { a: ['192.0.2.1'] }); // NOERROR, no MX: the implicit MX
  assert.equal(await sites.siteFor('no-mx.test'), 'no-mx.test');
  assert.equal(await sites.siteFor('missing.test'), 'missing.test'); // NXDOMAIN
  time.advance(DEFAULT_SITE_CACHE_MS - 1);
  await sites.siteFor('no-mx.test');
  await sites.siteFor('missing.test');
  assert.equal(asked('no-mx.test'), 1);
  assert.equal(asked('missing.test'), 1);
});

test('a domain without MX is kept for the negative TTL its SOA gives', async () => {
  const time = clock();
  const sites = createSiteResolver({ lookupMx, now: time.now });
  zone.set('soa.test', { a: ['192.0.2.1'], soa: { ttl: 3600, minimum: 120 } });
  assert.equal(await sites.siteFor('soa.test'), 'soa.test');
  time.advance(120_000 - 1);
  await sites.siteFor('soa.test');
  assert.equal(asked('soa.test'), 1);
  time.advance(1);
  await sites.siteFor('soa.test');
  assert.equal(asked('soa.test'), 2);
});

test('a DNS failure keys by the domain, and is asked again after the short failure time', async () => {
  const time = clock();
  const sites = createSiteResolver({ lookupMx, now: time.now });
  zone.set('flaky.test', 'servfail');
  assert.equal(await sites.siteFor('flaky.test'), 'flaky.test');

  zone.set('flaky.test', mx('mta5.am0.yahoodns.net'));
  time.advance(DEFAULT_FAILURE_CACHE_MS - 1);
  assert.equal(await sites.siteFor('flaky.test'), 'flaky.test');
  assert.equal(asked('flaky.test'), 1);
  time.advance(1);
  assert.equal(await sites.siteFor('flaky.test'), 'yahoo');
  assert.equal(asked('flaky.test'), 2);
});

test('the cache keeps at most maxEntries domains, dropping the oldest answer', async () => {
  const sites = createSiteResolver({ lookupMx, now: clock().now, maxEntries: 2 });
  for (const name of ['e1.test', 'e2.test', 'e3.test']) zone.set(name, mx(`mx.${name}`));
  await sites.siteFor('e1.test');
  await sites.siteFor('e2.test');
  await sites.siteFor('e3.test'); // e1 goes
  await sites.siteFor('e2.test');
  await sites.siteFor('e3.test');
  assert.deepEqual([asked('e1.test'), asked('e2.test'), asked('e3.test')], [1, 1, 1]);
  await sites.siteFor('e1.test');
  assert.equal(asked('e1.test'), 2);
});

test('extra suffixes apply to looked-up sites; the cache time has a bound', async () => {
  const sites = createSiteResolver({ lookupMx, now: clock().now, extraSuffixes: { acme: ['.mx.acme.net'] } });
  zone.set('acme.test', mx('in.mx.acme.net'));
  assert.equal(await sites.siteFor('acme.test'), 'acme');
  assert.throws(() => createSiteResolver({ lookupMx, cacheMs: 60 * 60_000 + 1 }), RangeError);
  assert.throws(() => createSiteResolver({ lookupMx, cacheMs: 0 }), RangeError);
});
