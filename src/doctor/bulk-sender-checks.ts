import type { Queryable } from '../platform/db/database.ts';
import type { AddFinding, DoctorContext, DomainRow, Finding } from './findings.ts';

// The bulk-sender checklist of Gmail, Yahoo and Microsoft beyond DNS: the complaint rate, one-click
// unsubscribe on marketing mail, and authentication (from the dkim, spf and dmarc findings made before).

/** The complaint_rate, unsubscribe and authentication findings; `findings` holds the DNS checks' already. */
export async function checkBulkSenderPractice(
  ctx: DoctorContext,
  domain: DomainRow,
  findings: Finding[],
  add: AddFinding,
): Promise<void> {
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
