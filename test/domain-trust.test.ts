// How a domain was verified (by its DKIM record in DNS, or trusted on the operator's word without DNS
// checks), and the hosts its records point at: MAILROOM_MX_HOST and its defaults, with a warning for a
// value that is not a public, fully qualified name. The first start's development domain is trusted and
// has a real DKIM key.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { startDnsServer, type DnsServer, type Zone } from './helpers/dns-server.ts';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { addDomain, getDomain, trustDomain, verifyDomain, type DomainView } from '../src/domains/domains.ts';
import { whyNotPublicHost } from '../src/domains/public-host.ts';
import { ConfigError, loadConfig } from '../src/platform/config.ts';
import { bootstrapDevOrganization } from '../src/tenancy/dev-bootstrap.ts';
import { findSendingDomain } from '../src/domains/sending-domains.ts';
import { createPublicKey } from 'node:crypto';

const zone: Zone = new Map();
let dns: DnsServer;
let t: TestApp;
let org: TestOrganization;
let sequence = 0;
const uniqueName = (label: string) => `${label}-${++sequence}-${process.pid}.mailroom-test.example`;

const allRecords = (domain: DomainView) => [...domain.records, ...domain.additional_records];
const dkimOf = (domain: DomainView) => allRecords(domain).find((record) => record.record === 'DKIM')!;

/** Publishes the domain's DKIM record in the test DNS server, in 255-character strings. */
const publishDkim = (domain: DomainView) =>
  zone.set(dkimOf(domain).name, { txt: [dkimOf(domain).value.match(/.{1,255}/g)!] });

before(async () => {
  dns = await startDnsServer(zone);
  // A bare host name as EHLO name, as a machine called "vm" has: the MX value every receiving domain shows.
  t = await buildTestApp({
    MAILROOM_DNS_SERVERS: dns.address,
    MAILROOM_DNS_TIMEOUT_MS: '2000',
    MAILROOM_HELO_NAME: 'vm',
  });
  org = await createTestOrganization(t.db, t.config, 'trust');
});

after(async () => {
  await t?.close();
  await dns?.close();
});

const read = async (id: string): Promise<DomainView> => {
  const response = await t.app.inject({ method: 'GET', url: `/domains/${id}`, headers: bearer(org.fullKey) });
  assert.equal(response.statusCode, 200, response.body);
  return response.json();
};

describe('verification: by DNS or trusted', () => {
  test('pending has none; trusted says so until DKIM is found in DNS, then it is verified by DNS', async () => {
    const domain = await addDomain(t.db, t.config, org.id, uniqueName('trusted'));
    assert.deepEqual([domain.status, domain.verification], ['pending', null]);
    const trusted = await trustDomain(t.db, t.config, org.id, domain.id);
    assert.deepEqual([trusted.status, trusted.verification], ['verified', 'trusted']);
    assert.deepEqual([(await read(domain.id)).status, (await read(domain.id)).verification], ['verified', 'trusted']);
    // A check that does not find DKIM leaves it trusted (and verified: trust is not taken back).
    const unpublished = await verifyDomain(t.db, t.config, org.id, domain.id);
    assert.deepEqual([unpublished.status, unpublished.verification], ['verified', 'trusted']);
    assert.equal(dkimOf(unpublished).status, 'failed');
    publishDkim(domain);
    const found = await verifyDomain(t.db, t.config, org.id, domain.id);
    assert.deepEqual([found.status, found.verification, dkimOf(found).status], ['verified', 'dns', 'verified']);
    // Trusting a domain verified by DNS changes nothing of how it was verified.
    assert.equal((await trustDomain(t.db, t.config, org.id, domain.id)).verification, 'dns');
    assert.equal((await read(domain.id)).verification, 'dns');
  });

  test('a domain verified by DNS alone reads dns, through the API too', async () => {
    const domain = await addDomain(t.db, t.config, org.id, uniqueName('dns'));
    publishDkim(domain);
    const response = await t.app.inject({
      method: 'POST',
      url: `/domains/${domain.id}/verify`,
      headers: bearer(org.fullKey),
    });
    assert.deepEqual([response.json().status, response.json().verification], ['verified', 'dns']);
  });

  test('domains verified before the column existed: trusted when never checked, else verified by DNS', async () => {
    const never = await trustDomain(
      t.db,
      t.config,
      org.id,
      (await addDomain(t.db, t.config, org.id, uniqueName('old'))).id,
    );
    const checked = await addDomain(t.db, t.config, org.id, uniqueName('old-dns'));
    publishDkim(checked);
    await verifyDomain(t.db, t.config, org.id, checked.id);
    // As they were before migration 0039: no domain trusted. Then its backfill, as written in the file.
    await t.db.query('UPDATE domains SET trusted = false WHERE id = ANY($1::uuid[])', [[never.id, checked.id]]);
    const migration = await readFile(
      new URL('../src/platform/db/migrations/0039_domain_trusted.sql', import.meta.url),
      'utf8',
    );
    await t.db.query(migration.slice(migration.indexOf('UPDATE domains')));
    assert.equal((await read(never.id)).verification, 'trusted');
    assert.equal((await read(checked.id)).verification, 'dns');
  });

  test("the first start's development domain is trusted, with a DKIM key that signs its mail", async () => {
    const fresh = await buildTestApp({ MAILROOM_HELO_NAME: 'mx.mailroom-test.example.com' });
    try {
      const credentials = await bootstrapDevOrganization(fresh.db, fresh.config);
      assert.ok(credentials);
      const { rows } = await fresh.db.query<{ id: string }>('SELECT id FROM domains WHERE name = $1', [
        credentials.domain,
      ]);
      const domain = await getDomain(fresh.db, fresh.config, credentials.organizationId, rows[0]!.id);
      assert.deepEqual([domain.name, domain.status, domain.verification], ['example.test', 'verified', 'trusted']);
      // Its DKIM record publishes the public half of the key its mail is signed with.
      const signing = await findSendingDomain(fresh.db, credentials.organizationId, domain.name);
      const publicKey = createPublicKey(signing!.dkimPrivateKey).export({ type: 'spki', format: 'der' });
      assert.equal(dkimOf(domain).value, `v=DKIM1; k=rsa; p=${publicKey.toString('base64')}`);
      assert.deepEqual(domain.warnings, []);
    } finally {
      await fresh.close();
    }
  });
});

describe('the hosts records point at', () => {
  async function receivingDomain(returnPath?: string): Promise<DomainView> {
    const response = await t.app.inject({
      method: 'POST',
      url: '/domains',
      headers: bearer(org.fullKey),
      payload: {
        name: uniqueName('receiving'),
        capabilities: { receiving: 'enabled' },
        ...(returnPath && { custom_return_path: returnPath }),
      },
    });
    assert.equal(response.statusCode, 201, response.body);
    return response.json();
  }

  test('a bare host name as MX value comes with a warning naming the record and the setting', async () => {
    const domain = await receivingDomain('send');
    const mxIndexes = domain.records.flatMap((record, index) => (record.type === 'MX' ? [index] : []));
    assert.deepEqual(
      mxIndexes.map((index) => domain.records[index]!.value),
      ['vm', 'vm'],
    );
    const warnings = (await read(domain.id)).warnings;
    assert.deepEqual(
      warnings.map((warning) => warning.field),
      mxIndexes.map((index) => `records[${index}].value`),
    );
    for (const warning of warnings) {
      assert.match(warning.message, /^vm is not a public host name \(it is a bare host name, with no dot\)/);
      assert.match(warning.message, /Set MAILROOM_MX_HOST to this server's public name/);
    }
    // A domain with no MX record has nothing to warn about.
    assert.deepEqual((await addDomain(t.db, t.config, org.id, uniqueName('plain'))).warnings, []);
  });

  test('MAILROOM_MX_HOST, else the EHLO name, else the public URL when public, else the host name', async () => {
    const domain = await receivingDomain();
    const mxWith = async (env: Record<string, string>) => {
      const view = await getDomain(t.db, loadConfig(env), org.id, domain.id);
      return { value: view.records.find((record) => record.record === 'Receiving')!.value, warnings: view.warnings };
    };
    assert.deepEqual(await mxWith({ MAILROOM_MX_HOST: 'MX.Mail.Example.com.', MAILROOM_HELO_NAME: 'vm' }), {
      value: 'mx.mail.example.com',
      warnings: [],
    });
    assert.equal((await mxWith({ MAILROOM_HELO_NAME: 'out.example.net' })).value, 'out.example.net');
    assert.equal((await mxWith({ MAILROOM_PUBLIC_URL: 'https://mail.example.org/' })).value, 'mail.example.org');
    // A public URL that is not public is not a better guess than the machine's own name.
    assert.equal((await mxWith({ MAILROOM_PUBLIC_URL: 'http://localhost:3000' })).value, hostname().toLowerCase());
    const internal = await mxWith({ MAILROOM_MX_HOST: 'mx.corp.internal' });
    assert.equal(internal.value, 'mx.corp.internal');
    assert.match(internal.warnings[0]!.message, /\.internal names are not reachable from the Internet/);
  });

  test('a tracking CNAME to a private public URL warns to set MAILROOM_PUBLIC_URL', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/domains',
      headers: bearer(org.fullKey),
      payload: { name: uniqueName('tracked'), tracking_subdomain: 'links' },
    });
    const domain: DomainView = response.json();
    const index = domain.records.findIndex((record) => record.type === 'CNAME');
    assert.equal(domain.records[index]!.value, '127.0.0.1');
    assert.equal(domain.warnings.length, 1);
    assert.equal(domain.warnings[0]!.field, `records[${index}].value`);
    assert.match(domain.warnings[0]!.message, /IP address.*Set MAILROOM_PUBLIC_URL/);
  });

  test('MAILROOM_MX_HOST must be a fully qualified name', () => {
    assert.throws(
      () => loadConfig({ MAILROOM_MX_HOST: 'vm' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.variable, 'MAILROOM_MX_HOST');
        return true;
      },
    );
  });

  test('which names are public', () => {
    const cases: Array<[string, boolean]> = [
      ['mx.example.com', true],
      ['mail.acme.co.uk', true],
      ['vm', false],
      ['localhost', false],
      ['127.0.0.1', false],
      ['::1', false],
      ['mail.example.test', false],
      ['printer.local', false],
      ['mx.corp.internal', false],
      ['router.home.arpa', false],
      ['box.localdomain', false],
      ['test', false],
    ];
    for (const [host, isPublic] of cases) assert.equal(whyNotPublicHost(host) === undefined, isPublic, host);
  });
});
