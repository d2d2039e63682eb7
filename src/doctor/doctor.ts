import { notFound } from '../platform/errors.ts';
import type { Queryable } from '../platform/db/database.ts';
import { isUuid } from '../platform/ids.ts';
import { emitEvent } from '../webhooks/fan-out.ts';
import { checkBulkSenderPractice } from './bulk-sender-checks.ts';
import { checkDomainRecords } from './domain-record-checks.ts';
import { checkMx } from './mx-checks.ts';
import { checkSources } from './source-checks.ts';
import {
  CHECK_AGAIN,
  worst,
  type AddFinding,
  type DoctorContext,
  type DomainHealth,
  type DomainRow,
  type Finding,
  type FindingStatus,
} from './findings.ts';

export type { DoctorContext, DomainHealth, Finding, FindingStatus } from './findings.ts';

// The deliverability doctor: what Gmail, Yahoo and Microsoft check of a bulk sender, checked for one
// sending domain and each egress source, with each finding stated as the fix to make. Run on demand
// (POST /domains/:id/check, `mailroom domain check`, the domain's page) and once a day per verified
// domain; a finding whose status changes emits `domain.health_changed`. Each family of checks has its
// file (domain-record-checks, source-checks, mx-checks, bulk-sender-checks); here they are run in the
// order they are shown, their findings stored with the event, and the daily round's domains claimed.

/** Every check of one domain (and of each egress source for it), in the order they are shown. */
export async function examineDomain(ctx: DoctorContext, domain: DomainRow): Promise<Finding[]> {
  const findings: Finding[] = [];
  const add: AddFinding = (check, subject, status, summary, fix = null) =>
    findings.push({ check, subject, status, summary, fix });
  await checkDomainRecords(ctx, domain, add);
  await checkSources(ctx, domain, add);
  await checkMx(ctx, domain, add);
  await checkBulkSenderPractice(ctx, domain, findings, add);
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
