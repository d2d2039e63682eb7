import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createPublicKey } from 'node:crypto';
import dgram from 'node:dgram';
import { startDnsServer, type DnsServer, type Zone } from './helpers/dns-server.ts';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import {
  addDomain,
  findDomainByName,
  findSendingDomain,
  trustDomain,
  verifyDomain,
  type DomainView,
} from '../src/domains/domains.ts';
import type { ServiceError } from '../src/platform/errors.ts';
import { HTTP_STATUS } from '../src/platform/http/error-envelope.ts';

/** Splits a TXT value the way zone files and DNS providers do: 255-octet character-strings. */
function chunked(value: string, size = 255): string[] {
  const chunks: string[] = [];
  for (let at = 0; at < value.length; at += size) chunks.push(value.slice(at, at + size));
  return chunks;
}

/** The name a DNS query asks about (its question's labels, after the 12-byte header), in lower case. */
function questionName(query: Buffer): string {
  const labels: string[] = [];
  for (let at = 12; query[at]! > 0; at += 1 + query[at]!)
    labels.push(query.toString('latin1', at + 1, at + 1 + query[at]!));
  // Resolvers may randomise the case of the name they ask for (DNS 0x20).
  return labels.join('.').toLowerCase();
}

/** Every record to publish: Resend's kinds (records), then the others (additional_records). */
const allRecords = (domain: DomainView) => [...domain.records, ...domain.additional_records];

function recordOf(domain: DomainView, kind: 'DKIM' | 'SPF' | 'DMARC') {
  const record = allRecords(domain).find((r) => r.record === kind);
  assert.ok(record, `${kind} record missing`);
  return record;
}

const publicKeyOf = (domain: DomainView) => recordOf(domain, 'DKIM').value.replace(/^.*p=/, '');

describe('domains', () => {
  const zone: Zone = new Map();
  const publishTxt = (name: string, txt: string[][]) => zone.set(name, { txt });
  let dns: DnsServer;
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let third: TestOrganization;
  let sequence = 0;
  // Unique per test, so tests share one database without sharing domains.
  const uniqueName = (label: string) => `${label}-${++sequence}-${process.pid}.mailroom-test.example`;

  before(async () => {
    dns = await startDnsServer(zone);
    t = await buildTestApp({ MAILROOM_DNS_SERVERS: dns.address, MAILROOM_DNS_TIMEOUT_MS: '2000' });
    org = await createTestOrganization(t.db, t.config, 'domains');
    other = await createTestOrganization(t.db, t.config, 'other');
    third = await createTestOrganization(t.db, t.config, 'third');
  });

  after(async () => {
    await t?.close();
    await dns?.close();
  });

  const add = (name: string, key = org.fullKey) =>
    t.app.inject({ method: 'POST', url: '/domains', headers: bearer(key), payload: { name } });
  const verify = (id: string, key = org.fullKey) =>
    t.app.inject({ method: 'POST', url: `/domains/${id}/verify`, headers: bearer(key) });
  const get = (id: string, key = org.fullKey) =>
    t.app.inject({ method: 'GET', url: `/domains/${id}`, headers: bearer(key) });
  const remove = (id: string, key = org.fullKey) =>
    t.app.inject({ method: 'DELETE', url: `/domains/${id}`, headers: bearer(key) });

  async function added(name: string): Promise<DomainView> {
    const response = await add(name);
    assert.equal(response.statusCode, 201, response.body);
    return response.json();
  }

  test('adding a domain answers pending with the three TXT records to publish', async () => {
    const name = uniqueName('add');
    const response = await add(name);
    assert.equal(response.statusCode, 201, response.body);
    const domain: DomainView = response.json();
    assert.equal(domain.object, 'domain');
    assert.equal(domain.name, name);
    assert.equal(domain.status, 'pending');
    assert.ok(!Number.isNaN(Date.parse(domain.created_at)));
    assert.deepEqual(
      allRecords(domain).map(({ record, name, type, ttl, status, required }) => ({
        record,
        name,
        type,
        ttl,
        status,
        required,
      })),
      [
        {
          record: 'DKIM',
          name: `mailroom._domainkey.${name}`,
          type: 'TXT',
          ttl: 'Auto',
          status: 'not_started',
          required: true,
        },
        { record: 'SPF', name, type: 'TXT', ttl: 'Auto', status: 'not_started', required: false },
        { record: 'DMARC', name: `_dmarc.${name}`, type: 'TXT', ttl: 'Auto', status: 'not_started', required: false },
      ],
    );
    // Resend's record kinds are DKIM and SPF; DMARC, which Resend's records have no kind for, is apart.
    assert.deepEqual(
      [domain.records.map((r) => r.record), domain.additional_records.map((r) => r.record)],
      [['DKIM', 'SPF'], ['DMARC']],
    );
    assert.equal(domain.region, 'us-east-1');
    assert.deepEqual(domain.capabilities, { sending: 'enabled', receiving: 'disabled' });
    assert.equal(recordOf(domain, 'SPF').value, 'v=spf1 a mx ~all');
    assert.equal(recordOf(domain, 'DMARC').value, 'v=DMARC1; p=none;');
    assert.doesNotMatch(response.body, /PRIVATE KEY/);

    // The published p= is the public half of the key that signs: derive it from the stored private key.
    const { rows } = await t.db.query<{ dkim_private_key: string }>(
      'SELECT dkim_private_key FROM domains WHERE id = $1',
      [domain.id],
    );
    const expected = createPublicKey(rows[0]!.dkim_private_key)
      .export({ type: 'spki', format: 'der' })
      .toString('base64');
    assert.equal(recordOf(domain, 'DKIM').value, `v=DKIM1; k=rsa; p=${expected}`);
    assert.equal(createPublicKey(rows[0]!.dkim_private_key).asymmetricKeyDetails?.modulusLength, 2048);

    const read = await get(domain.id);
    assert.equal(read.statusCode, 200);
    assert.deepEqual(read.json(), domain);
  });

  test("Resend's options when adding: honoured, or refused naming the field, and nothing added", async () => {
    const name = uniqueName('options');
    const res = await t.app.inject({
      method: 'POST',
      url: '/domains',
      headers: bearer(org.fullKey),
      payload: {
        name,
        region: 'us-east-1',
        open_tracking: true,
        click_tracking: false,
        tls: 'opportunistic',
        capabilities: { sending: 'enabled', receiving: 'disabled' },
      },
    });
    assert.equal(res.statusCode, 201, res.body);
    const domain: DomainView = res.json();
    assert.deepEqual([domain.open_tracking, domain.click_tracking], [true, false]);
    const { rows } = await t.db.query('SELECT open_tracking, click_tracking FROM domains WHERE id = $1', [domain.id]);
    assert.deepEqual(rows[0], { open_tracking: true, click_tracking: false }, "the domain's own switches");

    const refused: Array<[object, string]> = [
      [{ region: 'mars-1' }, 'region'],
      [{ tls: 'always' }, 'tls'],
      [{ capabilities: { sending: 'disabled' } }, 'capabilities.sending'],
      [{ custom_return_path: 'Send' }, 'custom_return_path'],
      [{ custom_return_path: 'send.mail' }, 'custom_return_path'],
      [{ tracking_subdomain: '-links' }, 'tracking_subdomain'],
      [{ custom_return_path: 'out', tracking_subdomain: 'out' }, 'tracking_subdomain'],
      [{ open_tracking: 'yes' }, 'open_tracking'],
    ];
    for (const [options, field] of refused) {
      const refusal = await t.app.inject({
        method: 'POST',
        url: '/domains',
        headers: bearer(org.fullKey),
        payload: { name: uniqueName('refused'), ...options },
      });
      assert.equal(refusal.statusCode, 400, `${JSON.stringify(options)}: ${refusal.body}`);
      assert.equal(refusal.json().name, 'validation_error');
      assert.equal(refusal.json().field, field, JSON.stringify(options));
    }
    const { rows: left } = await t.db.query(`SELECT 1 FROM domains WHERE name LIKE 'refused-%'`);
    assert.equal(left.length, 0, 'a refused domain is not added');
  });

  test('verifying with nothing published leaves the domain pending and says which records failed', async () => {
    const domain = await added(uniqueName('bare'));
    const response = await verify(domain.id);
    assert.equal(response.statusCode, 200, response.body);
    const checked: DomainView = response.json();
    assert.equal(checked.status, 'pending');
    assert.deepEqual(
      allRecords(checked).map((r) => [r.record, r.status]),
      [
        ['DKIM', 'failed'],
        ['SPF', 'failed'],
        ['DMARC', 'failed'],
      ],
    );
    const { rows } = await t.db.query<{ last_checked_at: Date | null }>(
      'SELECT last_checked_at FROM domains WHERE id = $1',
      [domain.id],
    );
    assert.ok(rows[0]!.last_checked_at);
  });

  test('a DKIM record split in 255-octet chunks verifies the domain; SPF and DMARC are reported apart', async () => {
    const domain = await added(uniqueName('dkim'));
    const dkim = recordOf(domain, 'DKIM');
    assert.ok(dkim.value.length > 255);
    publishTxt(dkim.name, [chunked(dkim.value)]);
    // Unrelated TXT records at the apex (site verification tokens) sit beside SPF in real zones.
    publishTxt(domain.name, [['google-site-verification=abc']]);

    const first: DomainView = (await verify(domain.id)).json();
    assert.equal(first.status, 'verified');
    assert.deepEqual(
      allRecords(first).map((r) => [r.record, r.status]),
      [
        ['DKIM', 'verified'],
        ['SPF', 'failed'],
        ['DMARC', 'failed'],
      ],
    );
    assert.ok(await findSendingDomain(t.db, org.id, domain.name));

    publishTxt(domain.name, [['google-site-verification=abc'], chunked('v=spf1 include:_spf.example.net -all', 10)]);
    publishTxt(`_dmarc.${domain.name}`, [['v=DMARC1; p=reject; rua=mailto:dmarc@example.net']]);
    const second: DomainView = (await verify(domain.id)).json();
    assert.deepEqual(
      allRecords(second).map((r) => [r.record, r.status]),
      [
        ['DKIM', 'verified'],
        ['SPF', 'verified'],
        ['DMARC', 'verified'],
      ],
    );
  });

  test('a DKIM answer too long for UDP is fetched over TCP, as from a real server', async () => {
    const domain = await added(`${'long-label-'.repeat(5)}${++sequence}.${uniqueName('tcp')}`);
    const dkim = recordOf(domain, 'DKIM');
    assert.ok(dkim.name.length + dkim.value.length > 512);
    publishTxt(dkim.name, [chunked(dkim.value)]);
    const checked: DomainView = (await verify(domain.id)).json();
    assert.equal(checked.status, 'verified');
  });

  test('DKIM p= may be published with whitespace, tags in another order and without v=', async () => {
    const domain = await added(uniqueName('spaced'));
    const key = publicKeyOf(domain);
    const spaced = `k=rsa;  p=${key.slice(0, 100)} ${key.slice(100, 200)}\t${key.slice(200)} ;`;
    publishTxt(recordOf(domain, 'DKIM').name, [chunked(spaced)]);
    const checked: DomainView = (await verify(domain.id)).json();
    assert.equal(checked.status, 'verified');
  });

  test('a DKIM record with another key, two SPF records or a malformed DMARC record fail', async () => {
    const domain = await added(uniqueName('wrong'));
    const stranger = await added(uniqueName('stranger'));
    publishTxt(recordOf(domain, 'DKIM').name, [chunked(recordOf(stranger, 'DKIM').value)]);
    publishTxt(domain.name, [['v=spf1 a -all'], ['v=spf1 mx -all']]);
    publishTxt(`_dmarc.${domain.name}`, [['v=DMARC2; p=none']]);
    const checked: DomainView = (await verify(domain.id)).json();
    assert.equal(checked.status, 'pending');
    assert.deepEqual(
      allRecords(checked).map((r) => [r.record, r.status]),
      [
        ['DKIM', 'failed'],
        ['SPF', 'failed'],
        ['DMARC', 'failed'],
      ],
    );
  });

  test('a record whose look-up fails (SERVFAIL) is pending, not failed', async () => {
    const domain = await added(uniqueName('servfail'));
    zone.set(recordOf(domain, 'DKIM').name, 'servfail');
    publishTxt(domain.name, [['v=spf1 -all']]);
    const checked: DomainView = (await verify(domain.id)).json();
    assert.equal(checked.status, 'pending');
    assert.deepEqual(
      allRecords(checked).map((r) => [r.record, r.status]),
      [
        ['DKIM', 'pending'],
        ['SPF', 'verified'],
        ['DMARC', 'failed'],
      ],
    );
  });

  test('a verified domain stays verified when a later check cannot find its records', async () => {
    const domain = await added(uniqueName('stays'));
    const dkim = recordOf(domain, 'DKIM');
    publishTxt(dkim.name, [chunked(dkim.value)]);
    assert.equal((await verify(domain.id)).json().status, 'verified');
    zone.delete(dkim.name);
    const checked: DomainView = (await verify(domain.id)).json();
    assert.equal(checked.status, 'verified');
    assert.equal(recordOf(checked, 'DKIM').status, 'failed');
  });

  describe('names', () => {
    const invalid: [string, string][] = [
      ['empty', ''],
      ['blank', '   '],
      ['no dot', 'localhost'],
      ['label starting with a hyphen', '-bad.example.com'],
      ['label ending with a hyphen', 'bad-.example.com'],
      ['underscore', 'bad_label.example.com'],
      ['empty label', 'a..example.com'],
      ['label over 63', `${'a'.repeat(64)}.example.com`],
      ['name over 253', `${Array.from({ length: 5 }, () => 'a'.repeat(60)).join('.')}.com`],
      ['path', 'example.com/evil'],
      ['user', 'user@example.com'],
      ['port', 'example.com:25'],
      ['space', 'exa mple.com'],
      ['ip address', '192.0.2.1'],
    ];
    for (const [why, name] of invalid) {
      test(`refuses ${why}: ${JSON.stringify(name.slice(0, 40))}`, async () => {
        const response = await add(name);
        assert.equal(response.statusCode, 400, response.body);
        assert.equal(response.json().name, 'validation_error');
        assert.equal(response.json().field, 'name');
      });
    }

    test('refuses a body without a name, or with unknown fields', async () => {
      const missing = await t.app.inject({
        method: 'POST',
        url: '/domains',
        headers: bearer(org.fullKey),
        payload: {},
      });
      assert.equal(missing.statusCode, 400);
      assert.equal(missing.json().name, 'missing_required_field');
      const extra = await t.app.inject({
        method: 'POST',
        url: '/domains',
        headers: bearer(org.fullKey),
        payload: { name: uniqueName('extra'), colour: 'blue' },
      });
      assert.equal(extra.statusCode, 400);
      assert.equal(extra.json().name, 'validation_error');
    });

    test('stores internationalised names as punycode, lower case, without the trailing dot', async () => {
      const idn = await added('Bücher.Mailroom-Test.Example.');
      assert.equal(idn.name, 'xn--bcher-kva.mailroom-test.example');
      assert.equal(recordOf(idn, 'DKIM').name, 'mailroom._domainkey.xn--bcher-kva.mailroom-test.example');
      // The same name written either way is the same domain.
      const again = await add('xn--bcher-kva.mailroom-test.example');
      assert.equal(again.statusCode, 409);
      assert.equal((await findDomainByName(t.db, org.id, 'bücher.mailroom-test.example'))?.id, idn.id);
    });

    test('adding a name the organization already has is a conflict', async () => {
      const name = uniqueName('dup');
      await added(name);
      const response = await add(name.toUpperCase());
      assert.equal(response.statusCode, 409);
      assert.equal(response.json().name, 'conflict');
    });
  });

  describe('ownership', () => {
    test("another organization's domain is not found, on every route", async () => {
      const domain = await added(uniqueName('mine'));
      for (const response of [
        await get(domain.id, other.fullKey),
        await verify(domain.id, other.fullKey),
        await remove(domain.id, other.fullKey),
      ]) {
        assert.equal(response.statusCode, 404, response.body);
        assert.equal(response.json().name, 'not_found');
      }
      assert.equal((await get(domain.id)).statusCode, 200);
      const list = await t.app.inject({ method: 'GET', url: '/domains', headers: bearer(other.fullKey) });
      assert.ok(!list.json().data.some((d: DomainView) => d.id === domain.id));
    });

    test('a malformed or unknown id is not found', async () => {
      for (const id of ['not-a-uuid', '00000000-0000-4000-8000-000000000000']) {
        for (const response of [await get(id), await verify(id), await remove(id)]) {
          assert.equal(response.statusCode, 404, response.body);
          assert.equal(response.json().name, 'not_found');
        }
      }
    });

    test('list shows the organization its own domains, newest first', async () => {
      const older = await added(uniqueName('older'));
      const newer = await added(uniqueName('newer'));
      const response = await t.app.inject({ method: 'GET', url: '/domains', headers: bearer(org.fullKey) });
      assert.equal(response.statusCode, 200);
      const body = response.json();
      assert.equal(body.object, 'list');
      const ids = body.data.map((d: DomainView) => d.id);
      assert.ok(ids.indexOf(newer.id) < ids.indexOf(older.id));
      assert.ok(body.data.some((d: DomainView) => d.name === org.domain && d.status === 'verified'));
    });

    test('a deleted domain is gone', async () => {
      const domain = await added(uniqueName('gone'));
      const response = await remove(domain.id);
      assert.equal(response.statusCode, 200);
      assert.deepEqual(response.json(), { object: 'domain', id: domain.id, deleted: true });
      assert.equal((await get(domain.id)).statusCode, 404);
      assert.equal((await remove(domain.id)).statusCode, 404);
    });

    test('a sending_access key may not manage domains', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/domains', headers: bearer(org.sendingKey) });
      assert.equal(response.statusCode, 401);
      assert.equal(response.json().name, 'restricted_api_key');
    });
  });

  describe('one verified owner per name', () => {
    test('trusting a name another organization holds verified is a conflict', async () => {
      const name = uniqueName('contested');
      const mine = await addDomain(t.db, t.config, org.id, name);
      const theirs = await addDomain(t.db, t.config, other.id, name); // pending in several orgs is fine
      await trustDomain(t.db, t.config, org.id, mine.id);
      await assert.rejects(trustDomain(t.db, t.config, other.id, theirs.id), (error: ServiceError) => {
        assert.deepEqual(
          { name: error.name, statusCode: HTTP_STATUS[error.name] },
          { name: 'conflict', statusCode: 409 },
        );
        return true;
      });
      assert.equal((await get(theirs.id, other.fullKey)).json().status, 'pending');
      assert.equal(await findSendingDomain(t.db, other.id, name), undefined);
    });

    test('verifying through DNS a name another organization holds verified is a conflict', async () => {
      const name = uniqueName('claimed');
      const mine = await addDomain(t.db, t.config, org.id, name);
      const theirs = await addDomain(t.db, t.config, other.id, name);
      await trustDomain(t.db, t.config, org.id, mine.id);
      publishTxt(recordOf(theirs, 'DKIM').name, [chunked(recordOf(theirs, 'DKIM').value)]);
      const response = await verify(theirs.id, other.fullKey);
      assert.equal(response.statusCode, 409);
      assert.equal(response.json().name, 'conflict');
      const after = (await get(theirs.id, other.fullKey)).json();
      assert.equal(after.status, 'pending');
      assert.equal(recordOf(after, 'DKIM').status, 'verified'); // the check itself is still recorded
    });

    test('a name another organization has verified cannot be added (409); an unverified claim stops no one', async () => {
      const name = uniqueName('owned');
      const pending = await addDomain(t.db, t.config, other.id, name); // a claim, never proved
      const mine = await addDomain(t.db, t.config, org.id, name);
      await trustDomain(t.db, t.config, org.id, mine.id); // proving ownership is not stopped by the claim
      const again = await t.app.inject({
        method: 'POST',
        url: '/domains',
        headers: bearer(third.fullKey),
        payload: { name },
      });
      assert.equal(again.statusCode, 409, again.body);
      assert.deepEqual([again.json().name, again.json().field], ['conflict', 'name']);
      assert.match(again.json().message, /verified by another organization/);
      assert.equal((await get(pending.id, other.fullKey)).json().status, 'pending');
    });

    test('of two organizations verifying the same name at once, one wins and the other gets a conflict', async () => {
      const name = uniqueName('race');
      const a = await addDomain(t.db, t.config, org.id, name);
      const b = await addDomain(t.db, t.config, other.id, name);
      const outcomes = await Promise.allSettled([
        trustDomain(t.db, t.config, org.id, a.id),
        trustDomain(t.db, t.config, other.id, b.id),
      ]);
      assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 1);
      const lost = outcomes.find((o) => o.status === 'rejected');
      assert.equal((lost?.reason as { name?: string }).name, 'conflict');
      const { rows } = await t.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM domains WHERE name = $1 AND status = 'verified'",
        [name],
      );
      assert.equal(rows[0]!.n, 1);
    });

    test('trusting is idempotent, and verifyDomain works from the service too', async () => {
      const domain = await addDomain(t.db, t.config, org.id, uniqueName('trusted'));
      assert.equal((await trustDomain(t.db, t.config, org.id, domain.id)).status, 'verified');
      assert.equal((await trustDomain(t.db, t.config, org.id, domain.id)).status, 'verified');
      const checked = await verifyDomain(t.db, t.config, org.id, domain.id);
      assert.equal(checked.status, 'verified');
      assert.equal(recordOf(checked, 'DKIM').status, 'failed');
    });
  });

  describe('lookups by name', () => {
    test('findSendingDomain returns the signing key of a verified domain of the organization only', async () => {
      const name = uniqueName('sender');
      const domain = await addDomain(t.db, t.config, org.id, name);
      assert.equal(await findSendingDomain(t.db, org.id, name), undefined);
      await trustDomain(t.db, t.config, org.id, domain.id);
      const sending = await findSendingDomain(t.db, org.id, name.toUpperCase());
      assert.ok(sending);
      assert.equal(sending.id, domain.id);
      assert.equal(sending.name, name);
      assert.equal(sending.dkimSelector, 'mailroom');
      assert.match(sending.dkimPrivateKey, /^-----BEGIN PRIVATE KEY-----/);
      assert.equal(await findSendingDomain(t.db, other.id, name), undefined);
      assert.equal(await findSendingDomain(t.db, org.id, 'not a domain'), undefined);
    });

    test('findDomainByName finds pending domains too, never without the key', async () => {
      const name = uniqueName('byname');
      const domain = await addDomain(t.db, t.config, org.id, name);
      const found = await findDomainByName(t.db, org.id, `${name}.`);
      assert.equal(found?.id, domain.id);
      assert.equal(found?.status, 'pending');
      assert.ok(!('dkim_private_key' in found!));
      assert.equal(await findDomainByName(t.db, other.id, name), undefined);
    });
  });
});

describe('domains with an unanswering DNS server', () => {
  let silent: dgram.Socket;
  /** The names the silent server was asked for, one entry per query. */
  const asked: string[] = [];
  let t: TestApp;
  let org: TestOrganization;

  before(async () => {
    // Takes queries and never answers, like a firewalled resolver.
    silent = dgram.createSocket('udp4');
    silent.on('message', (query) => asked.push(questionName(query)));
    await new Promise<void>((resolve) => silent.bind(0, '127.0.0.1', resolve));
    t = await buildTestApp({
      MAILROOM_DNS_SERVERS: `127.0.0.1:${silent.address().port}`,
      MAILROOM_DNS_TIMEOUT_MS: '300',
      MAILROOM_DKIM_SELECTOR: 'sel2024',
    });
    org = await createTestOrganization(t.db, t.config);
  });

  after(async () => {
    await t?.close();
    silent?.close();
  });

  test('verify answers 200 pending within the timeout, every record pending', async () => {
    const created = await t.app.inject({
      method: 'POST',
      url: '/domains',
      headers: bearer(org.fullKey),
      payload: { name: `slow-${process.pid}.mailroom-test.example` },
    });
    const domain: DomainView = created.json();
    assert.equal(recordOf(domain, 'DKIM').name, `sel2024._domainkey.${domain.name}`);
    asked.length = 0;
    const started = Date.now();
    const response = await t.app.inject({
      method: 'POST',
      url: `/domains/${domain.id}/verify`,
      headers: bearer(org.fullKey),
    });
    const elapsed = Date.now() - started;
    assert.equal(response.statusCode, 200, response.body);
    const checked: DomainView = response.json();
    assert.equal(checked.status, 'pending');
    assert.deepEqual(
      allRecords(checked).map((r) => r.status),
      ['pending', 'pending', 'pending'],
    );
    // Bounded by MAILROOM_DNS_TIMEOUT_MS (300 ms): each name asked once, never tried again (the
    // resolver's default of 4 tries, each waiting longer, would take over 3 s), as the queries the
    // server received show whatever the machine's speed. The time is then bounded at over thirty times
    // the timeout, which a loaded machine stays under, while a resolver left to its own timeouts (the
    // setting not applied) waits 24 s.
    assert.deepEqual(asked.toSorted(), [...new Set(allRecords(domain).map((r) => r.name.toLowerCase()))].toSorted());
    assert.ok(elapsed < 10_000, `took ${elapsed} ms`);
  });
});
