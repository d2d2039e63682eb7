import { Socket } from 'node:net';
import type { Resolver } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { emitEvent } from '../webhooks/fan-out.ts';
import type { Egress } from '../shaping/egress.ts';
import { dmarcAddress } from '../domains/dmarc-address.ts';
import { evaluateSpf, SPF_LOOKUP_LIMIT } from './spf.ts';

// The deliverability doctor: what Gmail, Yahoo and Microsoft check of a bulk sender, checked for one
// sending domain and each egress source, with each finding stated as the fix to make. Run on demand
// (POST /domains/:id/check, `mailroom domain check`, the domain's page) and once a day per verified
// domain; a finding whose status changes emits `domain.health_changed`.

export type FindingStatus = 'pass' | 'warn' | 'fail';

export interface Finding {
  /** dkim, dmarc, spf, ptr, blocklist, return_path_mx, receiving_mx, complaint_rate, unsubscribe, authentication. */
  check: string;
  /** What was checked: the domain, a source (`source mta1 (192.0.2.10)`), a blocklist … */
  subject: string;
  status: FindingStatus;
  /** What was found. */
  summary: string;
  /** The fix to make; null when nothing is to be done. */
  fix: string | null;
}

export interface DomainHealth {
  object: 'domain_health';
  domain_id: string;
  domain: string;
  /** The worst finding's status. */
  status: FindingStatus;
  checked_at: string;
  findings: Finding[];
}

export interface DoctorContext {
  db: Database;
  config: Pick<Config, 'returnPathDomain' | 'mxPort' | 'heloName' | 'dnsblZones' | 'smtpTimeoutMs'>;
  egress: Egress;
  resolver: Resolver;
  now?: () => Date;
  log?: { error(details: object, message: string): void };
}

interface DomainRow {
  id: string;
  organization_id: string;
  name: string;
  dkim_selector: string;
  dkim_public_key: string;
  /** The domain's own return-path label (send → send.example.com); null: MAILROOM_RETURN_PATH_DOMAIN. */
  custom_return_path: string | null;
  /** Whether the domain receives mail: its own MX must then reach the inbound listener. */
  receiving: boolean;
}

const RANK: Record<FindingStatus, number> = { pass: 0, warn: 1, fail: 2 };
/** The fix of a finding whose look-up failed: it says nothing new about the domain. */
const CHECK_AGAIN = 'Check again later.';
const worst = (findings: Finding[]): FindingStatus =>
  findings.reduce<FindingStatus>((w, f) => (RANK[f.status] > RANK[w] ? f.status : w), 'pass');

/** Every check of one domain (and of each egress source for it). */
export async function examineDomain(ctx: DoctorContext, domain: DomainRow): Promise<Finding[]> {
  const { resolver } = ctx;
  const txt = async (name: string): Promise<string[] | 'failed'> => {
    try {
      return (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return code === 'ENOTFOUND' || code === 'ENODATA' ? [] : 'failed';
    }
  };
  const findings: Finding[] = [];
  const add = (check: string, subject: string, status: FindingStatus, summary: string, fix: string | null = null) =>
    findings.push({ check, subject, status, summary, fix });

  // DKIM: the published key is the one Mailroom signs with.
  const dkimName = `${domain.dkim_selector}._domainkey.${domain.name}`;
  const dkimRecord = `v=DKIM1; k=rsa; p=${domain.dkim_public_key}`;
  const dkim = await txt(dkimName);
  if (dkim === 'failed') add('dkim', domain.name, 'warn', `the DNS look-up of ${dkimName} failed`, CHECK_AGAIN);
  else {
    const keys = dkim.map((record) => /(?:^|;)\s*p=([^;]*)/.exec(record)?.[1]?.replace(/\s+/g, '')).filter(Boolean);
    if (keys.length === 0) {
      add('dkim', domain.name, 'fail', `no DKIM key at ${dkimName}`, `Publish TXT ${dkimName} "${dkimRecord}".`);
    } else if (!keys.includes(domain.dkim_public_key)) {
      add(
        'dkim',
        domain.name,
        'fail',
        `the key at ${dkimName} is not the one Mailroom signs with`,
        `Replace it: TXT ${dkimName} "${dkimRecord}".`,
      );
    } else
      add('dkim', domain.name, 'pass', `${dkimName} publishes the key Mailroom signs with (d=${domain.name}, aligned)`);
  }

  // DMARC: present, and where its aggregate reports go.
  const rua =
    ctx.config.returnPathDomain === undefined ? undefined : `mailto:${dmarcAddress(ctx.config.returnPathDomain)}`;
  let dmarcName = `_dmarc.${domain.name}`;
  let dmarc = await txt(dmarcName);
  const suggested = `v=DMARC1; p=none${rua ? `; rua=${rua}` : ''}`;
  const isDmarc = (r: string) => /^v=DMARC1\s*(;|$)/i.test(r);
  // A subdomain without a record of its own is covered by its organizational domain's (RFC 7489 §6.6.3;
  // taken here as the last two labels, without the public suffix list).
  const parent = domain.name.split('.').slice(-2).join('.');
  if (dmarc !== 'failed' && !dmarc.some(isDmarc) && parent !== domain.name) {
    const inherited = await txt(`_dmarc.${parent}`);
    if (inherited !== 'failed' && inherited.some(isDmarc)) [dmarcName, dmarc] = [`_dmarc.${parent}`, inherited];
  }
  if (dmarc === 'failed') add('dmarc', domain.name, 'warn', `the DNS look-up of ${dmarcName} failed`, CHECK_AGAIN);
  else {
    const records = dmarc.filter(isDmarc);
    const record = records[0];
    if (records.length > 1) {
      add(
        'dmarc',
        domain.name,
        'fail',
        `${dmarcName} has ${records.length} DMARC records: receivers then apply none`,
        `Keep one record at ${dmarcName}.`,
      );
    } else if (!record) {
      add(
        'dmarc',
        domain.name,
        'fail',
        `no DMARC record at ${dmarcName}: Gmail, Yahoo and Microsoft refuse bulk mail without one`,
        `Publish TXT ${dmarcName} "${suggested}".`,
      );
    } else if (rua && !record.toLowerCase().includes(rua.toLowerCase())) {
      add(
        'dmarc',
        domain.name,
        'warn',
        `${dmarcName} sends no aggregate reports to Mailroom`,
        `Add rua=${rua} to ${dmarcName} ("${record}") to see who sends as ${domain.name}.`,
      );
    } else add('dmarc', domain.name, 'pass', `${dmarcName}: ${record}`);
  }

  // Per source: its address's PTR (confirmed forward, matching its EHLO name), blocklists, and SPF.
  const addressSources = [...ctx.egress.sources.values()].filter((s) => s.kind === 'address');
  // The envelope domain receivers check SPF against: the return-path domain when there is one (every
  // copy's MAIL FROM is its VERP address there: the domain's own, else the server's), else the sending
  // domain itself.
  const returnPathDomain =
    domain.custom_return_path === null ? ctx.config.returnPathDomain : `${domain.custom_return_path}.${domain.name}`;
  const envelopeDomains = [returnPathDomain ?? domain.name];
  for (const source of addressSources) {
    if (source.kind !== 'address') continue;
    if (source.address === undefined) {
      add(
        'ptr',
        `source ${source.name}`,
        'warn',
        'the address Mailroom sends from is not declared, so its PTR, SPF and blocklists cannot be checked',
        'Declare it in the shaping file: [source.<name>] address = "…", ehlo = "…" (docs/shaping.md).',
      );
      continue;
    }
    const subject = `source ${source.name} (${source.address})`;
    const ehlo = source.ehlo ?? ctx.config.heloName;
    let names: string[] = [];
    try {
      names = await resolver.reverse(source.address);
    } catch {
      names = [];
    }
    if (names.length === 0) {
      add(
        'ptr',
        subject,
        'fail',
        `${source.address} has no PTR record: Gmail refuses mail from it (550 5.7.25)`,
        `Have the address's owner (your hosting provider) set its PTR to ${ehlo ?? 'the EHLO name'}.`,
      );
    } else {
      const confirmed: string[] = [];
      for (const name of names) {
        const forward = [
          ...(await resolver.resolve4(name).catch(() => [] as string[])),
          ...(await resolver.resolve6(name).catch(() => [] as string[])),
        ];
        if (forward.some((a) => sameAddress(a, source.address!))) confirmed.push(name.toLowerCase().replace(/\.$/, ''));
      }
      if (confirmed.length === 0) {
        add(
          'ptr',
          subject,
          'fail',
          `the PTR of ${source.address} (${names.join(', ')}) does not resolve back to it`,
          `Publish an A/AAAA record for ${names[0]} pointing at ${source.address}.`,
        );
      } else if (ehlo && !confirmed.includes(ehlo.toLowerCase())) {
        add(
          'ptr',
          subject,
          'warn',
          `the PTR of ${source.address} is ${confirmed.join(', ')} but the source greets as ${ehlo}`,
          `Set the source's ehlo to ${confirmed[0]}, or the PTR to ${ehlo}.`,
        );
      } else add('ptr', subject, 'pass', `${source.address} ⇄ ${confirmed.join(', ')}`);
    }
    for (const zone of ctx.config.dnsblZones) {
      const listed = await blocklisted(resolver, source.address, zone);
      if (listed === 'failed')
        add('blocklist', `${subject} on ${zone}`, 'warn', `the look-up at ${zone} failed`, CHECK_AGAIN);
      else if (listed)
        add(
          'blocklist',
          `${subject} on ${zone}`,
          'fail',
          `${source.address} is listed on ${zone} (${listed})`,
          `Find why on ${zone}'s site, fix it (a compromised sender, a spam trap hit), then ask for delisting.`,
        );
      else add('blocklist', `${subject} on ${zone}`, 'pass', `${source.address} is not listed on ${zone}`);
    }
    for (const envelope of envelopeDomains) {
      const spf = await evaluateSpf(resolver, source.address, envelope);
      const where = `SPF of ${envelope} for ${subject}`;
      if (spf.result === 'pass')
        add('spf', where, 'pass', `pass (${spf.reason}; ${spf.lookups} of ${SPF_LOOKUP_LIMIT} look-ups)`);
      else if (spf.result === 'permerror' && spf.reason.includes('DNS look-ups')) {
        add(
          'spf',
          where,
          'fail',
          `permerror: ${spf.reason}`,
          `Shorten the SPF record of ${envelope}: replace includes by the ip4:/ip6: they stand for, to stay within ${SPF_LOOKUP_LIMIT} look-ups.`,
        );
      } else if (spf.result === 'temperror') add('spf', where, 'warn', `temperror: ${spf.reason}`, CHECK_AGAIN);
      else {
        const mechanism = ipaddr.parse(source.address).kind() === 'ipv4' ? 'ip4' : 'ip6';
        const fix =
          spf.result === 'none'
            ? `Publish TXT ${envelope} "v=spf1 ${mechanism}:${source.address} -all".`
            : `Add ${mechanism}:${source.address} to the SPF record of ${envelope}.`;
        add('spf', where, 'fail', `${spf.result}: ${spf.reason}`, fix);
      }
    }
  }
  for (const source of ctx.egress.sources.values()) {
    if (source.kind !== 'relay') continue;
    add(
      'spf',
      `source ${source.name} (relay ${source.host})`,
      'warn',
      'a relay sends from its own addresses, which the doctor cannot see',
      `Include the relay's SPF (as its documentation says) in the SPF record of ${envelopeDomains.join(' and ')}.`,
    );
  }

  // The return path's MX reaches the inbound listener (bounces, complaints, DMARC reports).
  if (returnPathDomain === undefined) {
    add(
      'return_path_mx',
      domain.name,
      'warn',
      'no return-path domain: later bounces, complaints and DMARC reports are not seen',
      'Set MAILROOM_RETURN_PATH_DOMAIN and MAILROOM_INBOUND_PORT (docs/bounces.md).',
    );
  } else {
    const rp = returnPathDomain;
    const reached = await reachesListener(ctx, rp);
    if (reached === true) add('return_path_mx', rp, 'pass', `the MX of ${rp} answers as Mailroom's inbound listener`);
    else
      add(
        'return_path_mx',
        rp,
        'fail',
        `the MX of ${rp} does not reach Mailroom's inbound listener: ${reached}`,
        `Point the MX of ${rp} at the host running the listener (MAILROOM_INBOUND_PORT, port 25) and open port 25 to it.`,
      );
  }

  // A receiving domain's mail reaches Mailroom only when its best MX is the inbound listener.
  if (domain.receiving) {
    const reached = await reachesListener(ctx, domain.name);
    if (reached === true) {
      add('receiving_mx', domain.name, 'pass', `the MX of ${domain.name} answers as Mailroom's inbound listener`);
    } else
      add(
        'receiving_mx',
        domain.name,
        'fail',
        `receiving is enabled, but the MX of ${domain.name} does not reach Mailroom's inbound listener: ${reached}`,
        `Point the MX of ${domain.name} (priority 10, and no other MX before it) at the host running the listener (port 25), or disable receiving.`,
      );
  }

  // The bulk-sender checklist: complaints, one-click unsubscribe, authentication.
  const now = ctx.now?.() ?? new Date();
  const rate = await complaintRate(ctx.db, domain.organization_id, now);
  if (rate.delivered === 0) add('complaint_rate', 'organization', 'pass', 'no mail delivered in the last 30 days');
  else {
    const share = `${(rate.rate * 100).toFixed(2)}% (${rate.complained} complaints of ${rate.delivered} delivered, 30 days)`;
    if (rate.rate >= 0.003)
      add(
        'complaint_rate',
        'organization',
        'fail',
        `complaint rate ${share}: at 0.3% Gmail and Yahoo block bulk mail`,
        'Send only to people who asked for it, make unsubscribing easy, and stop sending to those who complain (they are suppressed already).',
      );
    else if (rate.rate >= 0.001)
      add(
        'complaint_rate',
        'organization',
        'warn',
        `complaint rate ${share}: Gmail asks senders to stay under 0.1%`,
        'Look at what the complaints were about (GET /emails?status=complained) before sending more of it.',
      );
    else add('complaint_rate', 'organization', 'pass', `complaint rate ${share}`);
  }
  const bulk = await unsubscribeCoverage(ctx.db, domain, now);
  if (bulk.busiestDay >= 5000 && bulk.withoutTopic > 0) {
    add(
      'unsubscribe',
      domain.name,
      'warn',
      `${bulk.withoutTopic} of ${bulk.total} messages from ${domain.name} in 30 days carried no topic, so no one-click unsubscribe, on days of up to ${bulk.busiestDay}: a bulk sender's marketing mail must have it`,
      'Send marketing mail with a topic_id: Mailroom then adds List-Unsubscribe and List-Unsubscribe-Post (RFC 8058).',
    );
  } else {
    add(
      'unsubscribe',
      domain.name,
      'pass',
      bulk.busiestDay >= 5000
        ? 'every message carried a topic and one-click unsubscribe'
        : `below the bulk-sender volume (at most ${bulk.busiestDay} a day); topic sends carry one-click unsubscribe`,
    );
  }
  const authentication = findings.filter((f) => ['dkim', 'dmarc', 'spf'].includes(f.check) && f.status === 'fail');
  add(
    'authentication',
    domain.name,
    authentication.length === 0 ? 'pass' : 'fail',
    authentication.length === 0
      ? 'DKIM, SPF and DMARC as Gmail, Yahoo and Microsoft require of bulk senders'
      : `${authentication.length} authentication ${authentication.length === 1 ? 'finding fails' : 'findings fail'}: ${authentication.map((f) => f.check).join(', ')}`,
    authentication.length === 0 ? null : 'Make the fixes of the failing dkim, spf and dmarc findings.',
  );
  return findings;
}

/** Runs the checks, stores them, and emits domain.health_changed for the findings whose status changed. */
export async function checkDomain(ctx: DoctorContext, organizationId: string, domainId: string): Promise<DomainHealth> {
  if (!isUuid(domainId)) throw notFound('Domain');
  const { rows } = await ctx.db.query<DomainRow>(
    'SELECT id, organization_id, name, dkim_selector, dkim_public_key, custom_return_path, receiving FROM domains WHERE id = $1 AND organization_id = $2',
    [domainId, organizationId],
  );
  if (!rows[0]) throw notFound('Domain');
  return runChecks(ctx, rows[0]);
}

async function runChecks(ctx: DoctorContext, domain: DomainRow): Promise<DomainHealth> {
  const findings = await examineDomain(ctx, domain);
  const checkedAt = ctx.now?.() ?? new Date();
  const status = worst(findings);
  await ctx.db.transaction(async (tx) => {
    const { rows: before } = await tx.query<{ findings: Finding[] | null }>(
      'SELECT findings FROM domain_health WHERE domain_id = $1 FOR UPDATE',
      [domain.id],
    );
    await tx.query(
      `INSERT INTO domain_health (domain_id, status, findings, checked_at, claimed_at) VALUES ($1, $2, $3, $4, $4)
       ON CONFLICT (domain_id) DO UPDATE SET status = $2, findings = $3, checked_at = $4, claimed_at = $4`,
      [domain.id, status, JSON.stringify(findings), checkedAt],
    );
    const previous = new Map((before[0]?.findings ?? []).map((f) => [`${f.check} ${f.subject}`, f.status]));
    // A look-up that failed this time (a timeout, a blocklist refusing the resolver) is not a change.
    const changes = findings
      .filter((f) => f.fix !== CHECK_AGAIN && previous.get(`${f.check} ${f.subject}`) !== f.status)
      .map((f) => ({
        check: f.check,
        subject: f.subject,
        from: previous.get(`${f.check} ${f.subject}`) ?? null,
        to: f.status,
        summary: f.summary,
        fix: f.fix,
      }));
    if (changes.length > 0) {
      await emitEvent(tx, domain.organization_id, 'domain.health_changed', {
        id: domain.id,
        name: domain.name,
        status,
        changes,
      });
    }
  });
  return {
    object: 'domain_health',
    domain_id: domain.id,
    domain: domain.name,
    status,
    checked_at: checkedAt.toISOString(),
    findings,
  };
}

/** The findings as last stored; null before the first check. */
export async function domainHealth(
  db: Queryable,
  organizationId: string,
  domainId: string,
): Promise<DomainHealth | null> {
  if (!isUuid(domainId)) throw notFound('Domain');
  const { rows } = await db.query<{
    name: string;
    status: FindingStatus | null;
    findings: Finding[] | null;
    checked_at: Date | null;
  }>(
    `SELECT d.name, h.status, h.findings, h.checked_at FROM domains d LEFT JOIN domain_health h ON h.domain_id = d.id
      WHERE d.id = $1 AND d.organization_id = $2`,
    [domainId, organizationId],
  );
  const row = rows[0];
  if (!row) throw notFound('Domain');
  if (row.checked_at === null) return null;
  return {
    object: 'domain_health',
    domain_id: domainId,
    domain: row.name,
    status: row.status!,
    checked_at: row.checked_at.toISOString(),
    findings: row.findings!,
  };
}

/** The daily round: every verified domain not checked for `intervalMs`, at most `limit` of them, claimed so two processes do not both check one. */
export async function checkDueDomains(ctx: DoctorContext, intervalMs: number, limit = 20): Promise<number> {
  const now = ctx.now?.() ?? new Date();
  const due = await ctx.db.transaction(async (tx) => {
    const { rows } = await tx.query<DomainRow>(
      `SELECT d.id, d.organization_id, d.name, d.dkim_selector, d.dkim_public_key, d.custom_return_path, d.receiving FROM domains d
         LEFT JOIN domain_health h ON h.domain_id = d.id
        WHERE d.status = 'verified' AND (h.claimed_at IS NULL OR h.claimed_at < $1)
        ORDER BY h.claimed_at NULLS FIRST LIMIT $2 FOR UPDATE OF d SKIP LOCKED`,
      [new Date(now.getTime() - intervalMs), limit],
    );
    // Claimed (its findings stay as they were until checked), so another process's round passes them over.
    for (const row of rows) {
      await tx.query(
        `INSERT INTO domain_health (domain_id, claimed_at) VALUES ($1, $2)
         ON CONFLICT (domain_id) DO UPDATE SET claimed_at = $2`,
        [row.id, now],
      );
    }
    return rows;
  });
  let checked = 0;
  for (const domain of due) {
    // One domain's failure (its DNS, the database a moment) does not keep the others unchecked.
    try {
      await runChecks(ctx, domain);
      checked += 1;
    } catch (error) {
      ctx.log?.error({ err: error, domain: domain.name }, 'doctor: could not check the domain');
    }
  }
  return checked;
}

function sameAddress(a: string, b: string): boolean {
  return (
    ipaddr.isValid(a) &&
    ipaddr.isValid(b) &&
    ipaddr.process(a).toNormalizedString() === ipaddr.process(b).toNormalizedString()
  );
}

/** The answer of a DNS blocklist for an address (127.0.0.x), false when not listed, 'failed' when unknown. */
async function blocklisted(resolver: Resolver, address: string, zone: string): Promise<string | false | 'failed'> {
  const parsed = ipaddr.process(address);
  const reversed =
    parsed.kind() === 'ipv4'
      ? parsed.toString().split('.').reverse().join('.')
      : (parsed as ipaddr.IPv6)
          .toByteArray()
          .flatMap((byte) => [byte >> 4, byte & 15])
          .map((nibble) => nibble.toString(16))
          .reverse()
          .join('.');
  try {
    const answers = await resolver.resolve4(`${reversed}.${zone}`);
    // 127.255.255.x is a blocklist's refusal to answer (a public resolver, over quota), not a listing.
    const listings = answers.filter((a) => a.startsWith('127.') && !a.startsWith('127.255.255.'));
    if (listings.length === 0) return answers.length > 0 ? 'failed' : false;
    return listings.join(', ');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOTFOUND' || code === 'ENODATA' ? false : 'failed';
  }
}

/** True when the return-path domain's first MX host greets as Mailroom's inbound listener; else why not. */
async function reachesListener(ctx: DoctorContext, domain: string): Promise<true | string> {
  let hosts: Array<{ exchange: string; priority: number }>;
  try {
    hosts = (await ctx.resolver.resolveMx(domain)).sort((a, b) => a.priority - b.priority);
  } catch (error) {
    return `its MX look-up failed (${(error as NodeJS.ErrnoException).code})`;
  }
  if (hosts.length === 0) return 'it has no MX record';
  const host = hosts[0]!.exchange;
  const addresses = await ctx.resolver.resolve4(host).catch(() => [] as string[]);
  if (addresses.length === 0) return `its MX host ${host} has no address`;
  const banner = await new Promise<string>((resolve) => {
    const socket = new Socket();
    const done = (text: string) => {
      socket.destroy();
      resolve(text);
    };
    socket.setTimeout(Math.min(ctx.config.smtpTimeoutMs, 10_000), () => done('no greeting'));
    socket.once('error', (error) => done(`no connection (${(error as NodeJS.ErrnoException).code ?? error.message})`));
    socket.once('data', (chunk) => done(chunk.toString('utf8').split('\r\n')[0] ?? ''));
    socket.connect(ctx.config.mxPort, addresses[0]!);
  });
  return /^220 .*Mailroom/.test(banner) ? true : `${host} [${addresses[0]}] answered "${banner.slice(0, 120)}"`;
}

async function complaintRate(db: Queryable, organizationId: string, now: Date) {
  const { rows } = await db.query<{ delivered: number; complained: number }>(
    `SELECT coalesce(sum(count) FILTER (WHERE type = 'delivered'), 0)::int AS delivered,
            coalesce(sum(count) FILTER (WHERE type = 'complained'), 0)::int AS complained
       FROM email_event_counts WHERE organization_id = $1 AND hour >= $2`,
    [organizationId, new Date(now.getTime() - 30 * 86_400_000)],
  );
  const { delivered, complained } = rows[0]!;
  return { delivered, complained, rate: delivered === 0 ? 0 : complained / delivered };
}

async function unsubscribeCoverage(db: Queryable, domain: DomainRow, now: Date) {
  const { rows } = await db.query<{ total: number; without_topic: number; busiest: number }>(
    `WITH sent AS (
       SELECT date_trunc('day', created_at) AS day, topic_id FROM emails
        WHERE organization_id = $1 AND created_at >= $2
          AND lower(substring("from" from '@([^@>[:space:]]+)>?[[:space:]]*$')) = $3)
     SELECT count(*)::int AS total, count(*) FILTER (WHERE topic_id IS NULL)::int AS without_topic,
            coalesce((SELECT max(n) FROM (SELECT count(*)::int AS n FROM sent GROUP BY day) d), 0)::int AS busiest
       FROM sent`,
    [domain.organization_id, new Date(now.getTime() - 30 * 86_400_000), domain.name],
  );
  const row = rows[0]!;
  return { total: row.total, withoutTopic: row.without_topic, busiestDay: row.busiest };
}
