import type { Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { addressKey } from '../platform/address-key.ts';
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

/** The list key of an address: the bare address, as addressKey compares it (delivery matches lower(address)). */
function suppressionKey(input: string, field = 'email'): string {
  const mailbox = parseMailbox(input, field);
  if (mailbox.name !== undefined) {
    throw new ServiceError(
      'validation_error',
      `Invalid address in ${field}: give the bare address, without a name`,
      field,
    );
  }
  return addressKey(mailbox.address);
}

/**
 * Lists an address because of what happened to a message sent to it (delivery/, inbound/), inside the
 * transaction that records it. An address already listed keeps the reason it was listed for.
 */
export async function suppressAddress(
  tx: Queryable,
  organizationId: string,
  address: string,
  reason: Exclude<SuppressionReason, 'manual'>,
): Promise<void> {
  await tx.query(
    'INSERT INTO suppressions (organization_id, address, reason) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
    [organizationId, addressKey(address), reason],
  );
}

/**
 * SQL for a data-modifying CTE body that puts on the suppression list the addresses of the earlier CTE
 * `from` (columns `organization_id`, and `address`: an address key, or NULL for none) with `reason`, for
 * a statement that records why (a batch of delivery outcomes). In a fixed order (organization, then
 * address): two statements that suppress overlapping sets wait for each other in the same order, so
 * they cannot deadlock. An address already listed keeps its reason.
 */
export function suppressionsFrom(from: string, address: string, reason: Exclude<SuppressionReason, 'manual'>): string {
  return `INSERT INTO suppressions (organization_id, address, reason)
    SELECT organization_id, ${address}, '${reason}' FROM ${from} WHERE ${address} IS NOT NULL
     GROUP BY organization_id, ${address} ORDER BY organization_id, ${address} COLLATE "C"
    ON CONFLICT DO NOTHING`;
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
  const address = pathKey(email);
  const { rows } = await db.query<SuppressionRow>(
    'SELECT address, reason, created_at FROM suppressions WHERE organization_id = $1 AND address = $2',
    [organizationId, address],
  );
  if (!rows[0]) throw notFound(`Suppression for ${address}`);
  return view(rows[0]);
}

export async function deleteSuppression(db: Queryable, organizationId: string, email: string): Promise<string> {
  const address = pathKey(email);
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
  // The cursor must be an address on the list: there is no place to continue from otherwise.
  const after = page.after === undefined ? null : suppressionKey(page.after, 'after');
  if (after !== null) {
    const { rowCount } = await db.query('SELECT 1 FROM suppressions WHERE organization_id = $1 AND address = $2', [
      organizationId,
      after,
    ]);
    if (rowCount === 0)
      throw new ServiceError('validation_error', `after: ${after} is not on the suppression list`, 'after');
  }
  const { rows } = await db.query<SuppressionRow>(
    `SELECT address, reason, created_at FROM suppressions
      WHERE organization_id = $1
        AND ($2::text IS NULL OR (created_at, address) >
             (SELECT created_at, address FROM suppressions WHERE organization_id = $1 AND address = $2))
      ORDER BY created_at, address
      LIMIT $3`,
    [organizationId, after, page.limit + 1],
  );
  return { object: 'list', has_more: rows.length > page.limit, data: rows.slice(0, page.limit).map(view) };
}

/** A path's address: a malformed one cannot be on the list, so it reads as not found rather than 400. */
function pathKey(email: string): string {
  try {
    return suppressionKey(email);
  } catch {
    throw notFound(`Suppression for ${email}`);
  }
}
