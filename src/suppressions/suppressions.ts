import type { Queryable } from '../platform/db/database.ts';
import { ApiError, notFound } from '../platform/http/errors.ts';
import { parseMailbox } from '../emails/addresses.ts';

// The organization's suppression list: addresses it does not send to. Hard bounces (delivery/, inbound/)
// and complaints (inbound/) add themselves; the organization adds and removes addresses over the API.
// Removing one is how a sender says "this mailbox works again": the next message goes out.

export type SuppressionReason = 'hard_bounce' | 'complaint' | 'manual';

export interface SuppressionView {
  object: 'suppression';
  email: string;
  reason: SuppressionReason;
  created_at: string;
}

interface SuppressionRow {
  address: string;
  reason: SuppressionReason;
  created_at: Date;
}

const view = (row: SuppressionRow): SuppressionView => ({
  object: 'suppression',
  email: row.address,
  reason: row.reason,
  created_at: row.created_at.toISOString(),
});

/** The list key of an address: the bare address, domain in ASCII, lower-cased (as delivery matches it). */
export function suppressionKey(input: string, field = 'email'): string {
  const mailbox = parseMailbox(input, field);
  if (mailbox.name !== undefined) {
    throw new ApiError('validation_error', `Invalid address in ${field}: give the bare address, without a name`, field);
  }
  return mailbox.address.toLowerCase();
}

/** Adds an address by hand; an address already listed keeps its reason. `created` says which happened. */
export async function addSuppression(
  db: Queryable,
  organizationId: string,
  email: string,
): Promise<{ suppression: SuppressionView; created: boolean }> {
  const address = suppressionKey(email);
  const inserted = await db.query<SuppressionRow>(
    `INSERT INTO suppressions (organization_id, address, reason) VALUES ($1, $2, 'manual')
     ON CONFLICT (organization_id, address) DO NOTHING
     RETURNING address, reason, created_at`,
    [organizationId, address],
  );
  if (inserted.rows[0]) return { suppression: view(inserted.rows[0]), created: true };
  return { suppression: await getSuppression(db, organizationId, address), created: false };
}

export async function getSuppression(db: Queryable, organizationId: string, email: string): Promise<SuppressionView> {
  const address = lookupKey(email);
  const { rows } = await db.query<SuppressionRow>(
    'SELECT address, reason, created_at FROM suppressions WHERE organization_id = $1 AND address = $2',
    [organizationId, address],
  );
  if (!rows[0]) throw notFound(`Suppression for ${address}`);
  return view(rows[0]);
}

export async function deleteSuppression(db: Queryable, organizationId: string, email: string): Promise<string> {
  const address = lookupKey(email);
  const { rowCount } = await db.query('DELETE FROM suppressions WHERE organization_id = $1 AND address = $2', [
    organizationId,
    address,
  ]);
  if (rowCount === 0) throw notFound(`Suppression for ${address}`);
  return address;
}

/** Oldest first, `limit` at a time; `after` is the last email of the previous page. */
export async function listSuppressions(
  db: Queryable,
  organizationId: string,
  page: { limit: number; after?: string },
): Promise<{ object: 'list'; has_more: boolean; data: SuppressionView[] }> {
  const after = page.after === undefined ? null : lookupKey(page.after, 'after');
  if (after !== null)
    await getSuppression(db, organizationId, after).catch(() => {
      throw new ApiError('validation_error', `after: ${after} is not on the suppression list`, 'after');
    });
  const { rows } = await db.query<SuppressionRow>(
    `SELECT address, reason, created_at FROM suppressions s
      WHERE organization_id = $1
        AND ($2::text IS NULL OR (created_at, address) >
             (SELECT created_at, address FROM suppressions WHERE organization_id = $1 AND address = $2))
      ORDER BY created_at, address
      LIMIT $3`,
    [organizationId, after, page.limit + 1],
  );
  return { object: 'list', has_more: rows.length > page.limit, data: rows.slice(0, page.limit).map(view) };
}

/** A path or cursor address: a malformed one cannot be listed, so it reads as not found rather than 400. */
function lookupKey(email: string, field = 'email'): string {
  try {
    return suppressionKey(email, field);
  } catch {
    if (field === 'after') throw new ApiError('validation_error', `after: "${email}" is not an address`, 'after');
    throw notFound(`Suppression for ${email}`);
  }
}
