import type { Database } from '../../src/platform/db/database.ts';
import type { App } from '../../src/app.ts';
import { setRateLimitClock } from '../../src/emails/sending-limits.ts';
import { bearer, type TestOrganization } from './app.ts';

/** A minimal valid message from the organization's verified domain. */
export function message(org: TestOrganization, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { from: `Acme <hello@${org.domain}>`, to: 'someone@example.com', subject: 'Hi', text: 'Hello', ...extra };
}

export function send(app: App, token: string, body: unknown, headers: Record<string, string> = {}) {
  return app.inject({
    method: 'POST',
    url: '/emails',
    headers: { ...bearer(token), ...headers },
    payload: body as object,
  });
}

export function sendBatch(app: App, token: string, body: unknown, headers: Record<string, string> = {}) {
  return app.inject({
    method: 'POST',
    url: '/emails/batch',
    headers: { ...bearer(token), ...headers },
    payload: body as object,
  });
}

export async function setLimits(db: Database, orgId: string, limits: { rateLimit?: number; monthlyQuota?: number }) {
  await db.query(
    'UPDATE organizations SET rate_limit = coalesce($2, rate_limit), monthly_quota = coalesce($3, monthly_quota) WHERE id = $1',
    [orgId, limits.rateLimit ?? null, limits.monthlyQuota ?? null],
  );
  await db.query('DELETE FROM rate_limit_buckets WHERE organization_id = $1', [orgId]);
}

/**
 * Replaces the database's clock for the rate-limit bucket (on each handle given) with one that moves only
 * when told: no token comes back while the test sends, however slow the machine.
 */
export function frozenRateClock(...dbs: Database[]) {
  let now = Date.now();
  for (const db of dbs) setRateLimitClock(db, () => new Date(now));
  return {
    advance(ms: number) {
      now += ms;
    },
    release() {
      for (const db of dbs) setRateLimitClock(db, undefined);
    },
  };
}

/** Messages stored for the organization, and the recipients charged this month. */
export async function counts(db: Database, orgId: string) {
  const emails = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM emails WHERE organization_id = $1', [
    orgId,
  ]);
  const usage = await db.query<{ recipients: number }>(
    'SELECT coalesce(sum(recipients), 0)::int AS recipients FROM monthly_usage WHERE organization_id = $1',
    [orgId],
  );
  return { emails: emails.rows[0]!.n, charged: usage.rows[0]!.recipients };
}
