import type { Queryable } from '../platform/db/database.ts';
import { isUuid } from '../platform/ids.ts';

export interface Organization {
  id: string;
  name: string;
  monthly_quota: number;
  rate_limit: number;
  created_at: Date;
}

/** Recipients per calendar month and messages per second, unless the operator says otherwise. */
export const DEFAULT_MONTHLY_QUOTA = 100_000;
export const DEFAULT_RATE_LIMIT = 100;

export async function createOrganization(
  db: Queryable,
  input: { name: string; monthlyQuota?: number; rateLimit?: number },
): Promise<Organization> {
  const { rows } = await db.query<Organization>(
    `INSERT INTO organizations (name, monthly_quota, rate_limit) VALUES ($1, $2, $3)
     RETURNING id, name, monthly_quota, rate_limit, created_at`,
    [input.name, input.monthlyQuota ?? DEFAULT_MONTHLY_QUOTA, input.rateLimit ?? DEFAULT_RATE_LIMIT],
  );
  return rows[0]!;
}

export async function findOrganization(db: Queryable, id: string): Promise<Organization | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await db.query<Organization>(
    'SELECT id, name, monthly_quota, rate_limit, created_at FROM organizations WHERE id = $1',
    [id],
  );
  return rows[0];
}

/** Every organization, oldest first (the operator CLI's list). */
export async function listOrganizations(db: Queryable): Promise<Organization[]> {
  const { rows } = await db.query<Organization>(
    'SELECT id, name, monthly_quota, rate_limit, created_at FROM organizations ORDER BY created_at, id',
  );
  return rows;
}
