// Sent messages written in bulk by SQL for the benchmarks that need many stored: message i (from 0) is
// created at 2026-01-01 plus i milliseconds, to `user<i mod recipients>@example.com`, subject `Message <i>`,
// tagged kind:reset (every tenth) or kind:receipt, with its recipient row and its outcome in the timeline a
// second later: every tenth bounced, the rest delivered.
import type { Database } from '../src/platform/db/database.ts';

const CHUNK = 50_000;

export interface FillTarget {
  db: Database;
  organizationId: string;
  domainId: string;
  domain: string;
  /** How many different recipients the messages go to (default: each message its own). */
  recipients?: number;
}

/** Writes messages from .. to - 1 (positions, 0 = oldest), then refreshes the planner's statistics. */
export async function fillMessages(target: FillTarget, from: number, to: number): Promise<void> {
  const { db, organizationId, domainId, domain } = target;
  const recipients = target.recipients ?? 2 ** 31 - 1;
  for (let start = from; start < to; start += CHUNK) {
    const end = Math.min(to, start + CHUNK) - 1;
    await db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO emails (id, organization_id, domain_id, "from", "to", subject, text, tags, message_id, status,
                             recipient_count, created_at)
         SELECT gen_random_uuid(), $1, $2, 'Acme <hello@' || $3 || '>',
                jsonb_build_array('user' || (i % $6::int) || '@example.com'),
                'Message ' || i, 'Hello', jsonb_build_array(jsonb_build_object('name', 'kind', 'value',
                CASE WHEN i % 10 = 0 THEN 'reset' ELSE 'receipt' END)), '<' || i || '@' || $3 || '>', 'sent', 1,
                timestamptz '2026-01-01' + make_interval(secs => i / 1000.0)
           FROM generate_series($4::int, $5::int) i`,
        [organizationId, domainId, domain, start, end, recipients],
      );
      // The chunk just written: its messages are the organization's newest.
      const chunk = `e.organization_id = $1 AND e.created_at >= timestamptz '2026-01-01' + make_interval(secs => $2 / 1000.0)`;
      await tx.query(
        `INSERT INTO email_recipients (email_id, address, kind, status)
         SELECT id, "to" ->> 0, 'to',
                CASE WHEN split_part(subject, ' ', 2)::int % 10 = 0 THEN 'bounced' ELSE 'delivered' END
           FROM emails e WHERE ${chunk}`,
        [organizationId, start],
      );
      await tx.query(
        `INSERT INTO email_events (id, email_id, organization_id, type, recipient, created_at)
         SELECT gen_random_uuid(), e.id, e.organization_id, r.status, r.address, e.created_at + interval '1 second'
           FROM emails e JOIN email_recipients r ON r.email_id = e.id
          WHERE ${chunk}`,
        [organizationId, start],
      );
    });
  }
  for (const table of ['emails', 'email_recipients', 'email_events']) await db.query(`ANALYZE ${table}`);
}
