// DMARC aggregate reports end to end, on loopback: reports as Google (gzip), Microsoft (plain XML) and
// Yahoo (zip) mail them, sent over SMTP to the rua address at the inbound listener, then read back from
// GET /domains/:id/dmarc; and the reports that must be refused without harm: malformed XML, an entity
// bomb, a gzip that expands past the limit, a zip whose entry lies about its size, a zip that declares a
// huge entry, an oversized file, a message with nothing attached.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { crc32, deflateRawSync, gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { buildTestApp, bearer, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startInboundServer, type InboundServer } from '../src/inbound/inbound-server.ts';
import { MAX_XML_BYTES, parseReportXml } from '../src/inbound/dmarc-reports.ts';
import { storeDmarcReport } from '../src/domains/dmarc.ts';
import { pruneDmarcReports } from '../src/retention/prune.ts';

const RETURN_PATH_DOMAIN = 'bounces.dmarc.test';
const RUA = `dmarc@${RETURN_PATH_DOMAIN}`;
const quiet = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} } as never;

let t: TestApp;
let org: TestOrganization;
let other: TestOrganization;
let inbound: InboundServer;

before(async () => {
  t = await buildTestApp({ MAILROOM_RETURN_PATH_DOMAIN: RETURN_PATH_DOMAIN });
  org = await createTestOrganization(t.db, t.config, 'dmarc');
  other = await createTestOrganization(t.db, t.config, 'dmarc-other');
  inbound = await startInboundServer({
    db: t.db,
    signer: t.app.signer,
    host: '127.0.0.1',
    port: 0,
    log: quiet,
    returnPathDomain: RETURN_PATH_DOMAIN,
  });
});
after(async () => {
  await inbound.close();
  await t.close();
});

interface Row {
  ip: string;
  count: number;
  dkim: 'pass' | 'fail';
  spf: 'pass' | 'fail';
  envelopeFrom?: string;
  dkimDomain?: string;
  /** The signature's own result (a CRM's d=crm.example passes, unaligned); default: as `dkim`. */
  dkimResult?: 'pass' | 'fail';
}

/** An RFC 7489 appendix C report about `domain`. */
function reportXml(reporter: string, id: string, domain: string, begin: string, rows: Row[]): string {
  const seconds = Date.parse(begin) / 1000;
  const records = rows.map(
    (row) => `
  <record>
    <row>
      <source_ip>${row.ip}</source_ip>
      <count>${row.count}</count>
      <policy_evaluated><disposition>none</disposition><dkim>${row.dkim}</dkim><spf>${row.spf}</spf></policy_evaluated>
    </row>
    <identifiers><header_from>${domain}</header_from><envelope_from>${row.envelopeFrom ?? domain}</envelope_from></identifiers>
    <auth_results>
      <dkim><domain>${row.dkimDomain ?? domain}</domain><selector>mailroom</selector><result>${row.dkimResult ?? row.dkim}</result></dkim>
      <spf><domain>${row.envelopeFrom ?? domain}</domain><result>${row.spf}</result></spf>
    </auth_results>
  </record>`,
  );
  return `<?xml version="1.0" encoding="UTF-8" ?>
<feedback>
  <version>1.0</version>
  <report_metadata>
    <org_name>${reporter}</org_name>
    <email>noreply-dmarc@${reporter}</email>
    <report_id>${id}</report_id>
    <date_range><begin>${seconds}</begin><end>${seconds + 86399}</end></date_range>
  </report_metadata>
  <policy_published><domain>${domain}</domain><adkim>r</adkim><aspf>r</aspf><p>none</p><sp>none</sp><pct>100</pct></policy_published>${records.join('')}
</feedback>`;
}

/** A zip holding one deflated file, its header declaring `declaredSize` (a zip bomb lies here). */
function zip(name: string, data: Buffer, declaredSize = data.length): Buffer {
  const compressed = deflateRawSync(data);
  const fileName = Buffer.from(name);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(8, 8);
  local.writeUInt32LE(crc32(data), 14);
  local.writeUInt32LE(compressed.length, 18);
  local.writeUInt32LE(declaredSize, 22);
  local.writeUInt16LE(fileName.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE(20, 4);
  central.writeUInt16LE(20, 6);
  central.writeUInt16LE(8, 10);
  central.writeUInt32LE(crc32(data), 16);
  central.writeUInt32LE(compressed.length, 20);
  central.writeUInt32LE(declaredSize, 24);
  central.writeUInt16LE(fileName.length, 28);
  const centralOffset = local.length + fileName.length + compressed.length;
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(central.length + fileName.length, 12);
  end.writeUInt32LE(centralOffset, 16);
  return Buffer.concat([local, fileName, compressed, central, fileName, end]);
}

/** Mails `file` to the rua address as a reporter does; the listener's final answer. */
async function mailReport(file: { filename: string; contentType: string; content: Buffer } | undefined) {
  const client = nodemailerTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
  try {
    const info = await client.sendMail({
      from: 'noreply-dmarc-support@google.com',
      to: RUA,
      subject: `Report domain: ${org.domain} Submitter: google.com`,
      text: 'This is an aggregate report from google.com.',
      attachments: file ? [file] : [],
    });
    return info.response;
  } catch (error) {
    return String((error as { response?: string }).response ?? error);
  } finally {
    client.close();
  }
}

const summary = async (key = org.fullKey, domainId?: string, query = '') => {
  const id = domainId ?? (await domainIdOf(org));
  return t.app.inject({ method: 'GET', url: `/domains/${id}/dmarc${query}`, headers: bearer(key) });
};
const domainIdOf = async (of: TestOrganization) => {
  const { rows } = await t.db.query<{ id: string }>('SELECT id FROM domains WHERE name = $1', [of.domain]);
  return rows[0]!.id;
};
const storedReports = async () =>
  (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM dmarc_reports')).rows[0]!.n;

const OURS = '203.0.113.10';
const SPOOFER = '198.51.100.66';
const FORGOTTEN = '192.0.2.25';

test('reports in gzip, plain XML and zip are stored per sending domain; the summary shows the pass rate and the failing sources', async () => {
  const day = (n: number) => `2026-11-${20 + n}T00:00:00Z`;
  const google = reportXml('google.com', 'g-1', org.domain, day(0), [
    { ip: OURS, count: 90, dkim: 'pass', spf: 'pass' },
    { ip: SPOOFER, count: 6, dkim: 'fail', spf: 'fail', envelopeFrom: 'spoof.example' },
  ]);
  const microsoft = reportXml('Enterprise Outlook', 'm-1', org.domain, day(1), [
    { ip: OURS, count: 40, dkim: 'pass', spf: 'fail' },
    {
      ip: FORGOTTEN,
      count: 4,
      dkim: 'fail',
      dkimResult: 'pass',
      spf: 'pass',
      envelopeFrom: 'crm.example',
      dkimDomain: 'crm.example',
    },
  ]);
  const yahoo = reportXml('Yahoo', 'y-1', org.domain, day(1), [{ ip: OURS, count: 10, dkim: 'pass', spf: 'pass' }]);

  const gz = {
    filename: `google.com!${org.domain}!1!2.xml.gz`,
    contentType: 'application/gzip',
    content: gzipSync(google),
  };
  assert.match(await mailReport(gz), /^250 /);
  assert.match(
    await mailReport({ filename: 'report.xml', contentType: 'text/xml', content: Buffer.from(microsoft) }),
    /^250 /,
  );
  assert.match(
    await mailReport({
      filename: 'yahoo.zip',
      contentType: 'application/zip',
      content: zip('yahoo.xml', Buffer.from(yahoo)),
    }),
    /^250 /,
  );
  // A report resent is stored once.
  assert.match(await mailReport(gz), /^250 /);
  assert.equal(await storedReports(), 3);

  const res = await summary(org.fullKey, undefined, '?days=366');
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  assert.equal(body.object, 'dmarc_summary');
  assert.equal(body.domain, org.domain);
  assert.deepEqual([body.reports, body.messages, body.passed, body.pass_rate], [3, 150, 144, 0.96]);
  assert.deepEqual(body.daily, [
    { day: '2026-11-20', messages: 96, passed: 90 },
    { day: '2026-11-21', messages: 54, passed: 54 },
  ]);
  // The spoofer fails everything and comes first; the forgotten CRM passes SPF only (its own DKIM domain).
  assert.deepEqual(
    body.sources.map((s: Record<string, unknown>) => [
      s.source_ip,
      s.messages,
      s.passed,
      s.failed,
      s.dkim_aligned,
      s.spf_aligned,
    ]),
    [
      [SPOOFER, 6, 0, 6, 0, 0],
      [OURS, 140, 140, 0, 140, 100],
      [FORGOTTEN, 4, 4, 0, 0, 4],
    ],
  );
  assert.deepEqual(body.sources[0].envelope_from, ['spoof.example']);
  assert.deepEqual(body.sources[1].reporters, ['Enterprise Outlook', 'Yahoo', 'google.com']);
  assert.deepEqual(body.sources[2].dkim_domains, ['crm.example']);
  assert.equal(body.rua, `mailto:${RUA}`);

  // Another organization cannot read it, nor is an unknown id anything but not found.
  assert.equal((await summary(other.fullKey)).statusCode, 404);
  assert.equal((await summary(org.fullKey, 'not-an-id')).statusCode, 404);
  assert.equal((await summary(org.fullKey, undefined, '?days=0')).statusCode, 400);
  // The other organization's own domain has no reports.
  const theirs = (await summary(other.fullKey, await domainIdOf(other))).json();
  assert.deepEqual([theirs.reports, theirs.messages, theirs.pass_rate, theirs.sources], [0, 0, null, []]);
});

test('a report about a domain no organization has verified is taken and dropped', async () => {
  const before = await storedReports();
  const xml = reportXml('google.com', 'nobody-1', 'nobody.example', '2026-11-20T00:00:00Z', [
    { ip: OURS, count: 1, dkim: 'pass', spf: 'pass' },
  ]);
  assert.match(await mailReport({ filename: 'r.xml', contentType: 'text/xml', content: Buffer.from(xml) }), /^250 /);
  assert.equal(await storedReports(), before);
});

test('malformed, oversized and zip-bomb reports are refused without harm, and the listener goes on', async () => {
  const before = await storedReports();
  const good = reportXml('google.com', 'bomb-check', org.domain, '2026-11-22T00:00:00Z', [
    { ip: OURS, count: 1, dkim: 'pass', spf: 'pass' },
  ]);
  const zeros = Buffer.alloc(MAX_XML_BYTES + 1024 * 1024, 0x20);
  const cases: Array<[string, { filename: string; contentType: string; content: Buffer } | undefined, RegExp]> = [
    ['nothing attached', undefined, /^550 5\.6\.0 No DMARC aggregate report attached/],
    [
      'not XML',
      { filename: 'r.xml', contentType: 'text/xml', content: Buffer.from('<feedback><oops></feedback>') },
      /not well-formed XML/,
    ],
    [
      'not a report',
      { filename: 'r.xml', contentType: 'text/xml', content: Buffer.from('<feedback><version>1</version></feedback>') },
      /report_metadata: missing/,
    ],
    [
      'an entity bomb',
      {
        filename: 'r.xml',
        contentType: 'text/xml',
        content: Buffer.from(
          `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>${good.slice(good.indexOf('<feedback>'))}`,
        ),
      },
      /declares entities/,
    ],
    [
      'a gzip bomb',
      { filename: 'r.xml.gz', contentType: 'application/gzip', content: gzipSync(zeros) },
      /expands to more than/,
    ],
    [
      'a broken gzip',
      { filename: 'r.xml.gz', contentType: 'application/gzip', content: Buffer.from([0x1f, 0x8b, 8, 0, 1, 2, 3]) },
      /not a valid gzip file/,
    ],
    [
      'a zip entry that lies about its size',
      { filename: 'r.zip', contentType: 'application/zip', content: zip('r.xml', zeros, 1000) },
      /(damaged|too many bytes|expands to more than)/,
    ],
    [
      'a zip entry declared too big',
      {
        filename: 'r.zip',
        contentType: 'application/zip',
        content: zip('r.xml', Buffer.from(good), MAX_XML_BYTES + 1),
      },
      /expands to more than/,
    ],
    [
      'a broken zip',
      { filename: 'r.zip', contentType: 'application/zip', content: Buffer.from('PK\x03\x04 not really') },
      /not a valid zip file/,
    ],
    [
      'a file over 5 MiB',
      { filename: 'r.xml.gz', contentType: 'application/gzip', content: randomBytes(5 * 1024 * 1024 + 1) },
      /over 5242880 bytes/,
    ],
  ];
  for (const [what, file, reply] of cases) {
    const answer = await mailReport(file);
    assert.match(answer, /^550 /, `${what}: ${answer}`);
    assert.match(answer, reply, what);
  }
  assert.equal(await storedReports(), before, 'nothing stored');
  // The same listener still takes a good report.
  assert.match(await mailReport({ filename: 'r.xml', contentType: 'text/xml', content: Buffer.from(good) }), /^250 /);
  assert.equal(await storedReports(), before + 1);
});

test('report fields are bounded and checked', () => {
  const xml = reportXml('google.com', 'x', 'Example.COM.', '2026-11-20T00:00:00Z', [
    { ip: OURS, count: 3, dkim: 'pass', spf: 'fail' },
  ]);
  const report = parseReportXml(xml);
  assert.equal(report.domain, 'example.com');
  assert.deepEqual(report.begin, new Date('2026-11-20T00:00:00Z'));
  assert.deepEqual(report.records[0], {
    sourceIp: OURS,
    messages: 3,
    dkimAligned: true,
    spfAligned: false,
    disposition: 'none',
    headerFrom: 'example.com',
    envelopeFrom: 'example.com',
    dkimDomains: ['example.com'],
    spfDomain: 'example.com',
  });
  assert.throws(() => parseReportXml(xml.replace(OURS, 'not-an-ip')), /source_ip: not an IP address/);
  assert.throws(() => parseReportXml(xml.replace('<count>3</count>', '<count>-1</count>')), /count: not a count/);
  assert.throws(() => parseReportXml(xml.replace(/<begin>\d+<\/begin>/, '<begin>soon</begin>')), /begin: not a time/);
});

test('reports older than the metadata retention are pruned with their records; newer ones stay', async () => {
  const old = new Date(Math.floor((Date.now() - 100 * 86_400_000) / 1000) * 1000);
  const stored = await storeDmarcReport(t.db, {
    ...parseReportXml(
      reportXml('google.com', 'old-1', org.domain, old.toISOString(), [
        { ip: OURS, count: 1, dkim: 'pass', spf: 'pass' },
      ]),
    ),
  });
  assert.equal(stored, true);
  const before = await storedReports();
  const pruned = await pruneDmarcReports(t.db, {
    retentionDays: 30,
    metadataRetentionDays: 90,
    dataDir: '/nonexistent',
  });
  assert.equal(pruned, 1);
  assert.equal(await storedReports(), before - 1);
  const { rows } = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM dmarc_report_rows w WHERE NOT EXISTS (SELECT 1 FROM dmarc_reports r WHERE r.id = w.report_id)',
  );
  assert.equal(rows[0]!.n, 0, 'no record outlives its report');
});

test('a report whose dates are not past days, or whose XML nests too deep, is refused; huge counts are summed without overflow', async () => {
  const future = reportXml('google.com', 'future', org.domain, '2030-01-01T00:00:00Z', [
    { ip: OURS, count: 1, dkim: 'pass', spf: 'pass' },
  ]);
  assert.throws(() => parseReportXml(future), /not a range of past days/);
  const deep = `<feedback>${'<a>'.repeat(200)}${'</a>'.repeat(200)}</feedback>`;
  const answer = await mailReport({ filename: 'r.xml', contentType: 'text/xml', content: Buffer.from(deep) });
  assert.match(answer, /^550 /);

  const big = reportXml('google.com', 'big-1', org.domain, '2026-11-23T00:00:00Z', [
    { ip: '192.0.2.99', count: 1_000_000_000, dkim: 'fail', spf: 'fail' },
    { ip: '192.0.2.99', count: 1_000_000_000, dkim: 'fail', spf: 'fail' },
    { ip: '192.0.2.99', count: 1_000_000_000, dkim: 'fail', spf: 'fail' },
  ]);
  assert.match(await mailReport({ filename: 'r.xml', contentType: 'text/xml', content: Buffer.from(big) }), /^250 /);
  const res = await summary(org.fullKey, undefined, '?days=366');
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json().sources[0].failed, 3_000_000_000);
});
