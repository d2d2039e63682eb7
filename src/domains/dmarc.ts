import { randomUUID } from 'node:crypto';
import type { Database, Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';

// DMARC aggregate reports per sending domain: stored as the inbound listener reads them
// (src/inbound/dmarc-reports.ts), and summed for GET /domains/:id/dmarc and the domain's page: how much
// of the domain's mail passed DMARC (DKIM or SPF aligned with the From domain) and, source address by
// source address, what failed: someone spoofing the domain, or a sender of its own that was forgotten
// (a CRM, a help desk) and is not signed yet.

/** What a report says, as stored (src/inbound/dmarc-reports.ts reads it from the report's XML). */
export interface StoredReport {
  /** Who sent the report: `google.com`, `Yahoo`, `Enterprise Outlook`. */
  reporter: string;
  reporterEmail: string | null;
  reportId: string;
  begin: Date;
  end: Date;
  /** The policy domain: the sending domain the report is about. */
  domain: string;
  /** The published `p=`. */
  policy: string | null;
  records: Array<{
    sourceIp: string;
    messages: number;
    /** DKIM and SPF as DMARC evaluated them: passed and aligned with the From domain. */
    dkimAligned: boolean;
    spfAligned: boolean;
    disposition: string | null;
    headerFrom: string | null;
    envelopeFrom: string | null;
    dkimDomains: string[];
    spfDomain: string | null;
  }>;
}

/**
 * Stores the report for the verified domain it is about; false when no organization has verified that
 * domain, or the same report (reporter and id) was stored before.
 */
export async function storeDmarcReport(db: Database, report: StoredReport): Promise<boolean> {
  return db.transaction(async (tx) => {
    const { rows: domains } = await tx.query<{ id: string }>(
      "SELECT id FROM domains WHERE name = $1 AND status = 'verified'",
      [report.domain],
    );
    const domainId = domains[0]?.id;
    if (domainId === undefined) return false;
    const id = randomUUID();
    const { rowCount } = await tx.query(
      `INSERT INTO dmarc_reports (id, domain_id, reporter, reporter_email, report_id, begin_at, end_at, policy)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (domain_id, reporter, report_id) DO NOTHING`,
      [id, domainId, report.reporter, report.reporterEmail, report.reportId, report.begin, report.end, report.policy],
    );
    if (rowCount === 0) return false;
    const day = report.begin.toISOString().slice(0, 10);
    // One statement for every record: a large provider's report has thousands.
    await tx.query(
      `INSERT INTO dmarc_report_rows (report_id, day, source_ip, messages, dkim_aligned, spf_aligned, disposition,
                                      header_from, envelope_from, dkim_domains, spf_domain)
       SELECT $1, $2::date, r.source_ip, r.messages, r.dkim_aligned, r.spf_aligned, r.disposition, r.header_from,
              r.envelope_from, ARRAY(SELECT jsonb_array_elements_text(r.dkim_domains)), r.spf_domain
         FROM jsonb_to_recordset($3::jsonb) AS r(source_ip text, messages int, dkim_aligned boolean, spf_aligned boolean,
              disposition text, header_from text, envelope_from text, dkim_domains jsonb, spf_domain text)`,
      [
        id,
        day,
        JSON.stringify(
          report.records.map((r) => ({
            source_ip: r.sourceIp,
            messages: r.messages,
            dkim_aligned: r.dkimAligned,
            spf_aligned: r.spfAligned,
            disposition: r.disposition,
            header_from: r.headerFrom,
            envelope_from: r.envelopeFrom,
            dkim_domains: r.dkimDomains,
            spf_domain: r.spfDomain,
          })),
        ),
      ],
    );
    return true;
  });
}

export interface DmarcSource {
  source_ip: string;
  messages: number;
  /** Passed DMARC: DKIM or SPF aligned. */
  passed: number;
  failed: number;
  dkim_aligned: number;
  spf_aligned: number;
  /** The Mailroom egress source with this address, when it is one. */
  mailroom_source: string | null;
  reporters: string[];
  envelope_from: string[];
  dkim_domains: string[];
}

export interface DmarcSummary {
  object: 'dmarc_summary';
  domain: string;
  days: number;
  reports: number;
  messages: number;
  passed: number;
  /** Share of messages that passed DMARC, 0 to 1; null without reports. */
  pass_rate: number | null;
  daily: Array<{ day: string; messages: number; passed: number }>;
  /** Failing sources first, then by volume. */
  sources: DmarcSource[];
  /** The `rua` tag to publish in the domain's DMARC record; null when no inbound address is configured. */
  rua: string | null;
}

/** The domain's reports of the last `days` days, summed per day and per source address. */
export async function dmarcSummary(
  db: Queryable,
  organizationId: string,
  domainId: string,
  options: { days: number; now: Date; mailroomSources: ReadonlyMap<string, string>; rua: string | null },
): Promise<DmarcSummary> {
  if (!isUuid(domainId)) throw notFound('Domain');
  const { rows: domains } = await db.query<{ name: string }>(
    'SELECT name FROM domains WHERE id = $1 AND organization_id = $2',
    [domainId, organizationId],
  );
  if (!domains[0]) throw notFound('Domain');
  const since = new Date(options.now.getTime() - options.days * 86_400_000).toISOString().slice(0, 10);
  // Sums as float8: a forged report may claim a billion messages a record, past a 32-bit integer.
  const { rows: sources } = await db.query<{
    source_ip: string;
    messages: number;
    passed: number;
    dkim_aligned: number;
    spf_aligned: number;
    reporters: string[];
    envelope_from: string[];
    dkim_domains: string[];
  }>(
    `SELECT w.source_ip, sum(w.messages)::float8 AS messages,
            coalesce(sum(w.messages) FILTER (WHERE w.dkim_aligned OR w.spf_aligned), 0)::float8 AS passed,
            coalesce(sum(w.messages) FILTER (WHERE w.dkim_aligned), 0)::float8 AS dkim_aligned,
            coalesce(sum(w.messages) FILTER (WHERE w.spf_aligned), 0)::float8 AS spf_aligned,
            array_agg(DISTINCT r.reporter ORDER BY r.reporter) AS reporters,
            array_remove(array_agg(DISTINCT w.envelope_from ORDER BY w.envelope_from), NULL) AS envelope_from,
            ARRAY(SELECT DISTINCT d FROM unnest(array_agg(array_to_string(w.dkim_domains, ','))) AS d
                   WHERE d <> '' ORDER BY d) AS dkim_domains
       FROM dmarc_report_rows w JOIN dmarc_reports r ON r.id = w.report_id
      WHERE r.domain_id = $1 AND w.day >= $2::date
      GROUP BY w.source_ip
      ORDER BY sum(w.messages) - coalesce(sum(w.messages) FILTER (WHERE w.dkim_aligned OR w.spf_aligned), 0) DESC,
               sum(w.messages) DESC, w.source_ip`,
    [domainId, since],
  );
  const { rows: daily } = await db.query<{ day: string; messages: number; passed: number }>(
    `SELECT to_char(w.day, 'YYYY-MM-DD') AS day, sum(w.messages)::float8 AS messages,
            coalesce(sum(w.messages) FILTER (WHERE w.dkim_aligned OR w.spf_aligned), 0)::float8 AS passed
       FROM dmarc_report_rows w JOIN dmarc_reports r ON r.id = w.report_id
      WHERE r.domain_id = $1 AND w.day >= $2::date
      GROUP BY w.day ORDER BY w.day`,
    [domainId, since],
  );
  const { rows: counted } = await db.query<{ reports: number }>(
    `SELECT count(*)::int AS reports FROM dmarc_reports WHERE domain_id = $1 AND begin_at >= $2::date`,
    [domainId, since],
  );
  const messages = daily.reduce((sum, day) => sum + day.messages, 0);
  const passed = daily.reduce((sum, day) => sum + day.passed, 0);
  return {
    object: 'dmarc_summary',
    domain: domains[0].name,
    days: options.days,
    reports: counted[0]?.reports ?? 0,
    messages,
    passed,
    pass_rate: messages === 0 ? null : Math.round((passed / messages) * 10_000) / 10_000,
    daily,
    sources: sources.map((source) => ({
      ...source,
      failed: source.messages - source.passed,
      mailroom_source: options.mailroomSources.get(source.source_ip) ?? null,
      dkim_domains: [...new Set(source.dkim_domains.flatMap((list) => list.split(',')))].sort(),
    })),
    rua: options.rua,
  };
}
